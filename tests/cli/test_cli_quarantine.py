"""``exchange quarantine list | export | retry | cancel`` (contract 6): what waits for a person."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from clitools import (
    TOKEN,
    Cli,
    Scenario,
    assert_one_line_error,
    deliver_in_process,
    describe,
    run_json,
    states,
)
from sqlalchemy import Engine

from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, message, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.intake import staging_table as intake

ENTRY_FIELDS = {
    "message_id",
    "kind",
    "aggregate",
    "version",
    "reason",
    "attempts",
    "last_error",
    "source_ref",
    "quarantined_at",
}
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


EVERYTHING = {
    ("price", "SKU-REJ", 1, "http-422"),
    ("financial_posting", "DOC-1", 1, "http-422"),
    ("price", "SKU-BAD", 1, "invalid-contract"),
    ("stock_level", "SKU-3", 1, "unknown-kind"),
}


def summary(entries: list[dict[str, object]]) -> set[tuple[object, ...]]:
    return {(e["kind"], e["aggregate"], e["version"], e["reason"]) for e in entries}


def test_quarantine_list_json_is_a_list_of_entries_with_the_contract_fields(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    entries = run_json(cli, "quarantine", "list", "--json", db=db_url)

    assert isinstance(entries, list)
    for entry in entries:
        assert ENTRY_FIELDS <= set(entry), entry
        # Issue 16: every reading command names its database, and the list stays a list.
        assert entry["database"] == db_url, entry
        datetime.fromisoformat(entry["quarantined_at"])
    assert summary(entries) == EVERYTHING
    by_id = {e["message_id"]: e for e in entries}
    refused = by_id[scenario.doc1_v1]
    assert refused["attempts"] == 1
    assert refused["last_error"]
    assert refused["source_ref"] == "Реализация DOC-1"
    bad = next(e for e in entries if e["aggregate"] == "SKU-BAD")
    assert bad["source_ref"] == "Установка цен 000777"
    assert bad["last_error"]  # says what is wrong with the row


@SQLITE_ONLY
def test_quarantine_list_filters_by_kind_reason_aggregate_since_and_until(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    expected = {
        ("--kind", "financial_posting"): {("financial_posting", "DOC-1", 1, "http-422")},
        ("--reason", "http-422"): {
            ("price", "SKU-REJ", 1, "http-422"),
            ("financial_posting", "DOC-1", 1, "http-422"),
        },
        ("--aggregate", "SKU-BAD"): {("price", "SKU-BAD", 1, "invalid-contract")},
        ("--since", "2999-01-01"): set(),
        ("--until", "2999-01-01T00:00:00+00:00"): EVERYTHING,
        # contract 15: a date field takes ДД.ММ.ГГГГ as well
        ("--since", "01.01.2999"): set(),
        ("--until", "01.01.2999 00:00"): EVERYTHING,
    }
    results = cli.many(
        [["quarantine", "list", option, value, "--json"] for option, value in expected],
        db=db_url,
    )
    for (filters, wanted), result in zip(expected.items(), results, strict=True):
        assert result.returncode == 0, describe(result)
        assert summary(json.loads(result.stdout)) == wanted, filters


def test_quarantine_export_json_writes_the_report_with_a_summary_by_reason(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    path = cli.cwd / "reports" / "quarantine.json"

    result = cli("quarantine", "export", "--format", "json", "--output", str(path), db=db_url)

    assert result.returncode == 0, describe(result)
    text = path.read_text(encoding="utf-8")
    assert TOKEN not in text
    report = json.loads(text)
    assert report["summary"]["by_reason"] == {
        "http-422": 2,
        "invalid-contract": 1,
        "unknown-kind": 1,
    }
    assert summary(report["entries"]) == EVERYTHING


def test_quarantine_retry_puts_the_message_back_to_new_and_history_shows_who_and_why(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator, scenario: Scenario
) -> None:
    result = cli(
        "quarantine",
        "retry",
        scenario.doc1_v1,
        "--operator",
        "alice",
        "--note",
        "fixed",
        db=db_url,
    )

    assert result.returncode == 0, describe(result)
    retried = message(engine, "financial_posting", "DOC-1", 1)
    assert (retried["state"], retried["attempts"]) == ("new", 0)
    bio = run_json(cli, "history", scenario.doc1_v1, "--json", db=db_url)
    last = bio["history"][-1]
    assert (last["operator"], last["note"], last["to"]) == ("alice", "fixed", "new")

    # Replayed with the same message_id: once the site accepts it, the document goes through.
    site.faults.reject = {"SKU-REJ"}
    deliver_in_process(db_url, engine, site)
    assert site.applied_versions("financial_posting", "DOC-1") == [1, 2, 3]
    assert scenario.doc1_v1 in {e.message_id for e in site.effects()}


@SQLITE_ONLY
def test_bulk_retry_with_a_filter_but_without_yes_changes_nothing_and_says_so(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    before = states(engine)

    result = cli("quarantine", "retry", "--reason", "http-422", db=db_url)

    assert result.returncode == 0, describe(result)
    assert states(engine) == before
    assert "--yes" in result.stdout, describe(result)
    assert "nothing changed" in result.stdout.lower(), describe(result)
    assert scenario.doc1_v1 in result.stdout  # what it would retry
    assert scenario.sku_rejected in result.stdout


@SQLITE_ONLY
def test_bulk_retry_dry_run_changes_nothing_even_with_yes(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    before = states(engine)

    result = cli("quarantine", "retry", "--reason", "http-422", "--dry-run", "--yes", db=db_url)

    assert result.returncode == 0, describe(result)
    assert states(engine) == before
    assert scenario.doc1_v1 in result.stdout


def test_bulk_retry_with_a_filter_and_yes_replays_every_match(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    before = states(engine)

    result = cli(
        "quarantine", "retry", "--reason", "http-422", "--yes", "--operator", "carol", db=db_url
    )

    assert result.returncode == 0, describe(result)
    after = states(engine)
    assert after[scenario.doc1_v1] == ("new", None)
    assert after[scenario.sku_rejected] == ("new", None)
    unchanged = {
        k: v for k, v in after.items() if k not in (scenario.doc1_v1, scenario.sku_rejected)
    }
    assert unchanged == {
        k: v for k, v in before.items() if k not in (scenario.doc1_v1, scenario.sku_rejected)
    }


def test_quarantine_cancel_ends_the_message_cancelled_and_history_shows_who_and_why(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator, scenario: Scenario
) -> None:
    result = cli(
        "quarantine",
        "cancel",
        scenario.doc1_v1,
        "--note",
        "duplicate in 1C",
        "--operator",
        "bob",
        db=db_url,
    )

    assert result.returncode == 0, describe(result)
    assert message(engine, "financial_posting", "DOC-1", 1)["state"] == "cancelled"
    bio = run_json(cli, "history", scenario.doc1_v1, "--json", db=db_url)
    last = bio["history"][-1]
    assert (last["operator"], last["note"], last["to"]) == ("bob", "duplicate in 1C", "cancelled")

    # Cancelled by an operator: the versions held behind it go on, and it is never sent.
    site.faults.reject = {"SKU-REJ"}
    deliver_in_process(db_url, engine, site)
    assert site.applied_versions("financial_posting", "DOC-1") == [2, 3]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_quarantine_list_json_names_its_database_with_the_password_masked(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    # Trust authentication ignores the password, so the URL still reaches the database.
    with_password = db_url.replace("postgres@", "postgres:Pw-s3cret-9@", 1)
    assert with_password != db_url
    result = cli("quarantine", "list", "--json", db=with_password)
    assert result.returncode == 0, describe(result)
    entries = json.loads(result.stdout)
    expected = db_url.replace("postgres@", "postgres:***@", 1)
    assert entries and {entry["database"] for entry in entries} == {expected}
    assert "Pw-s3cret-9" not in result.stdout + result.stderr


def test_prioritize_puts_a_waiting_price_first_and_refuses_an_unknown_one_in_one_line(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """Contract 6: ``exchange prioritize AGGREGATE… | MESSAGE_ID… --note TEXT``."""
    stage(engine, [price_row("SKU-A", 1), price_row("SKU-B", 1)])
    intake.take(engine, None, fast_settings(db_url).kinds, FakeClock().now())
    done = cli("prioritize", "SKU-B", "--note", "wrong price live", "--operator", "bob", db=db_url)
    assert done.returncode == 0, describe(done)
    assert message(engine, "price", "SKU-B", 1)["message_id"] in done.stdout
    bio = run_json(
        cli, "history", message(engine, "price", "SKU-B", 1)["message_id"], "--json", db=db_url
    )
    last = bio["history"][-1]
    assert (last["event"], last["operator"], last["note"]) == (
        "operator-prioritize",
        "bob",
        "wrong price live",
    )
    missing = cli("prioritize", "SKU-NONE", "--note", "x", db=db_url)
    assert_one_line_error(missing, "SKU-NONE")


@SQLITE_ONLY
@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_preview_with_nothing_to_do_says_so_without_zero_lines(
    cli: Cli, db_url: str, scenario: Scenario, action: str
) -> None:
    """Review mpadvice item 8: a preview that matches nothing said «будут отменены 0 …
    чтобы отменить 0 сообщений, добавьте --yes»; it says there is nothing to do."""
    result = cli("quarantine", action, "--reason", "retry-limit", "--note", "n", db=db_url)
    assert result.returncode == 0, describe(result)
    assert f"nothing to {action}" in result.stdout, describe(result)
    assert " 0 " not in result.stdout and "--yes" not in result.stdout, describe(result)
