"""``exchange status [--json]`` and ``exchange history MESSAGE_ID [--json]`` (contract 6)."""

from __future__ import annotations

import pytest
from clitools import Cli, Scenario, assert_one_line_error, describe, run_json

STATES = ("new", "in_progress", "delivered", "delayed", "quarantined", "cancelled")


def test_status_json_is_one_document_with_counts_by_state_and_the_queue_figures(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    figures = run_json(cli, "status", "--json", db=db_url, code=1)

    counts = figures["counts"]
    assert set(STATES) <= set(counts)
    assert {state: counts[state] for state in STATES} == {
        "new": 2,  # DOC-1 v2 and v3, held behind the quarantined v1
        "in_progress": 0,
        "delivered": 4,  # SKU-1 v2, SKU-2 v1, DOC-2 v1 and v2
        "delayed": 0,
        "quarantined": 4,  # two http-422 and two rejected staging rows
        "cancelled": 1,  # SKU-1 v1, superseded
    }
    # The only undelivered messages are held behind the quarantine: a person moves them, not
    # time, so they are counted apart and left out of the oldest-undelivered figure.
    assert figures["held"] == 2 and figures["oldest_undelivered_age_s"] is None
    assert figures["error_share"] == pytest.approx(2 / 6, abs=0.001)  # 2 of 6 attempts refused
    assert figures["delivery_rate_per_min"] > 0
    # The backlog leaves the held messages out: they wait for a person, not for the pace.
    assert figures["backlog"]["messages"] == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_status_prints_a_table_of_states_and_names_blocked_aggregates(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    result = cli("status", db=db_url)

    assert result.returncode == 1, describe(result)  # the quarantine needs a person
    assert "needs a person: 4 message(s) in quarantine" in result.stdout, describe(result)
    lines = result.stdout.splitlines()
    for state, count in (("delivered", 4), ("quarantined", 4), ("cancelled", 1), ("new", 2)):
        assert any(state in line and str(count) in line for line in lines), describe(result)
    blocked = [line for line in lines if "blocked" in line and "DOC-1" in line]
    assert blocked and scenario.doc1_v1 in blocked[0], describe(result)


def test_history_json_is_the_biography_in_order(cli: Cli, db_url: str, scenario: Scenario) -> None:
    bio = run_json(cli, "history", scenario.sku2, "--json", db=db_url)

    assert bio["message"]["message_id"] == scenario.sku2
    assert bio["message"]["state"] == "delivered"
    # one row for the attempt: its lease (worker, attempt, start) and its outcome
    assert [event["event"] for event in bio["history"]] == ["taken", "delivered"]
    attempt = bio["history"][-1]
    assert (attempt["attempt"], attempt["http_status"]) == (1, 200)
    assert attempt["worker"] and attempt["leased_at"]
    times = [event["at"] for event in bio["history"]]
    assert times == sorted(times)
    assert attempt["leased_at"] <= attempt["at"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_history_of_an_unknown_message_exits_2_with_one_error_line(cli: Cli, db_url: str) -> None:
    result = cli("history", "price.NO-SUCH.v1.000000000000000000000000", "--json", db=db_url)
    assert_one_line_error(result, "NO-SUCH")
    assert result.stdout == ""


def test_history_headline_says_its_count_is_of_charged_attempts(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    """Words 38 item 3: the headline said «attempts=0» beside a row numbered «attempt 1» (a
    wait's look is numbered in its row, never charged): the headline's count names itself
    the charged attempts, in English and Russian."""
    en = cli("history", scenario.sku2, db=db_url)
    assert "charged_attempts=1" in en.stdout and " attempts=" not in en.stdout, describe(en)
    ru = cli("history", scenario.sku2, db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert "засчитано попыток: 1" in ru.stdout, describe(ru)
