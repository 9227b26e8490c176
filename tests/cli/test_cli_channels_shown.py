"""The commands name the channel (issue 31, step 7; contract 13 "Commands and pages"):
``status --json``'s ``channels``, ``--channel NAME`` on ``status``, ``find``, ``history``,
``prioritize`` and ``quarantine list|retry|cancel`` (an unknown one: one line, exit 2), the
preview counted per channel; a one-channel installation's codes stay bare."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clitools import TOKEN, Cli, Scenario, assert_one_line_error, describe, run_json
from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries, history, workers
from exchange.dev.testing import one_channel_messages
from exchange.ops.find import by_message, find_whole
from exchange.queue import control
from exchange.secrets import safe_url

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

NOW_NAME = "second"


def _second(
    engine: Engine, message_id: str, state: str = "quarantined", target: str = "api"
) -> None:
    """A channel ``second`` (of ``target``) with a delivery of ``message_id`` in ``state``
    (http-422)."""
    with transaction(engine) as connection:
        added = connection.execute(select(channels.c.added_at).limit(1)).scalar_one()
        second = connection.execute(
            insert(channels)
            .values(name=NOW_NAME, target=target, added_at=added)
            .returning(channels.c.id)
        ).scalar_one()
        row = connection.execute(select(messages).where(messages.c.message_id == message_id)).one()
        connection.execute(
            insert(deliveries).values(
                message_pk=row.id,
                channel_id=second,
                aggregate_id=row.aggregate_id,
                kind=row.kind,
                version=row.version,
                state=state,
                reason="http-422",
                waiting_since=row.updated_at,
                updated_at=row.updated_at,
            )
        )
        connection.execute(
            insert(channel_aggregates).values(aggregate_id=row.aggregate_id, channel_id=second)
        )


def test_a_one_channel_status_has_one_channels_entry_and_bare_codes(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert list(figures["channels"]) == ["api"]
    api = figures["channels"]["api"]
    assert api["target"] == "api" and api["configured"] is True
    assert api["counts"]["quarantined"] == 2  # the two http-422; the records are no channel's
    assert figures["counts"]["quarantined"] == 4  # summed over channels, with the records
    assert api["backlog"] == figures["backlog"]
    assert figures["needs_person_causes"] == ["quarantine"]  # bare: no EXCHANGE_CHANNELS


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_unknown_channel_is_one_line_and_exit_2_on_every_command(
    cli: Cli, db_url: str, scenario: Scenario
) -> None:
    for args in (
        ("status", "--channel", "third"),
        ("find", "SKU", "--channel", "third"),
        ("history", scenario.sku2, "--channel", "third"),
        ("quarantine", "list", "--channel", "third"),
        ("quarantine", "retry", "--reason", "http-422", "--channel", "third"),
        ("prioritize", scenario.doc1_v2, "--note", "n", "--channel", "third"),
    ):
        assert_one_line_error(cli(*args, db=db_url), "unknown channel 'third'")


def test_two_channels_are_shown_narrowed_and_counted_per_channel(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    _second(engine, scenario.sku2)  # delivered on api, quarantined on second
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert list(figures["channels"]) == ["api", "second"]
    assert figures["channels"]["second"]["counts"]["quarantined"] == 1
    assert figures["channels"]["second"]["configured"] is False  # not in this configuration
    one = run_json(cli, "status", "--json", "--channel", "second", db=db_url, code=1)
    assert list(one["channels"]) == ["second"]
    assert one["counts"]["delivered"] == 0

    found = run_json(cli, "find", "SKU-2", "--json", db=db_url)
    assert [m["deliveries"] for m in found] == [{"api": "delivered", "second": "quarantined"}]
    bio = run_json(cli, "history", scenario.sku2, "--json", db=db_url)
    assert [(d["channel"], d["state"]) for d in bio["deliveries"]] == [
        ("api", "delivered"),
        ("second", "quarantined"),
    ]
    text = cli("history", scenario.sku2, db=db_url)
    assert "channel second: quarantined" in text.stdout, describe(text)

    listed = run_json(cli, "quarantine", "list", "--json", "--channel", "second", db=db_url)
    # intake's records are listed whatever the channel (no channel's); of the deliveries,
    # only the second channel's
    shown = [(e["message_id"], e["channel"]) for e in listed if not e["rejected_row"]]
    assert shown == [(scenario.sku2, "second")]

    preview = cli("quarantine", "cancel", "--reason", "http-422", "--note", "n", db=db_url)
    assert preview.returncode == 0, describe(preview)
    assert "on channel api: 2" in preview.stdout, describe(preview)
    assert "on channel second: 1" in preview.stdout, describe(preview)

    table = cli("status", db=db_url)
    assert "channels" in table.stdout and "second" in table.stdout, describe(table)


REQUIRED = {"message_id", "kind", "aggregate", "version", "state", "name", "deliveries"}


def test_find_json_is_a_list_of_messages_with_their_state_on_each_channel(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Contract 6: ``find TEXT --json`` is a list of objects, one per message, with at least
    ``message_id``, ``kind``, ``aggregate``, ``version``, ``state``, ``name`` and, with
    channels, ``deliveries`` (``{channel: state}``); ``state`` is the message's as ``history``
    says it (its first channel's); each delivery's detail in ``channels``; each object names
    its database, as ``quarantine list --json``'s do. Never one row per delivery in an object
    (review: ``{"database": …, "messages": [...]}``)."""
    _second(engine, scenario.sku2)  # delivered on api, quarantined (http-422) on second
    found = run_json(cli, "find", "SKU", "--json", db=db_url)
    assert isinstance(found, list), found
    ids = [m["message_id"] for m in found]
    assert len(ids) == len(set(ids)), "one object per message, never one per delivery"
    assert scenario.sku2 in ids and scenario.sku_rejected in ids
    for m in found:
        assert REQUIRED <= set(m), m
        assert m["database"] == safe_url(db_url)
    (two,) = (m for m in found if m["message_id"] == scenario.sku2)
    assert (two["kind"], two["aggregate"], two["version"]) == ("price", "SKU-2", 1)
    assert two["deliveries"] == {"api": "delivered", "second": "quarantined"}
    bio = run_json(cli, "history", scenario.sku2, "--json", db=db_url)
    assert bio["message"]["state"] == "delivered"  # its first channel's: api's
    assert (two["state"], two["channel"]) == (bio["message"]["state"], "api")
    assert two["channels"]["second"]["state"] == "quarantined"
    assert two["channels"]["second"]["reason"] == "http-422"
    assert set(two["channels"]["api"]) >= {"attempts", "next_try_at", "last_error", "awaiting"}
    # an invalid row is intake's record: its own state, on no channel
    (bad,) = run_json(cli, "find", "SKU-BAD", "--json", db=db_url)
    assert (bad["state"], bad["deliveries"], bad["channels"]) == ("quarantined", {}, {})

    one = run_json(cli, "find", "SKU-2", "--json", "--channel", "second", db=db_url)
    assert [(m["state"], m["deliveries"]) for m in one] == [
        ("quarantined", {"second": "quarantined"})
    ]
    assert run_json(cli, "find", "NO-SUCH", "--json", db=db_url) == []


def test_find_never_cuts_a_message_at_its_limit(
    engine: Engine, db_url: str, scenario: Scenario
) -> None:
    """``find``'s limit counts messages, not deliveries: the last message shown keeps its
    delivery on every channel, so ``deliveries`` never leaves out a channel it is on."""
    _second(engine, scenario.sku2)
    with transaction(engine) as connection:
        rows = find_whole(connection, "SKU-2", shown=1)
    assert [m["deliveries"] for m in by_message(rows)] == [
        {"api": "delivered", "second": "quarantined"}
    ]


def test_with_channels_status_names_the_channel_that_does_not_answer(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Contract 13: under EXCHANGE_CHANNELS a channel none of whose loops hears it is named,
    with what it is, under the workers table and in the causes («канал second (сайт) не
    отвечает с …»), never «сайт не отвечает» (the one site's words: tests/ops)."""
    _second(engine, scenario.sku2, state="new")
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w1/second",
                started_at=now - timedelta(minutes=30),
                heartbeat_at=now,
                breaker_state="open",
                unreachable_since=now - timedelta(minutes=5),
                channel=NOW_NAME,
            )
        )
    shop = {"target": "api", "site_url": "https://shop.example.com"}
    env = {
        "EXCHANGE_LANG": "ru",
        "EXCHANGE_CHANNELS": json.dumps({"api": shop, NOW_NAME: shop}),
        "EXCHANGE_SITE_TOKEN": None,
    }
    named = cli("status", db=db_url, env=env)
    said = " ".join(named.stdout.split())
    assert said.count("канал second (сайт) не отвечает с") == 2, describe(named)  # caption, cause
    assert "сайт не отвечает" not in said, describe(named)
    as_json = cli("status", "--json", db=db_url, env=env)
    assert "breaker:second" in json.loads(as_json.stdout)["needs_person_causes"]


def test_status_of_one_channel_lists_that_channels_workers_only(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Issue 31 item 7: ``status --channel second`` lists the loops of ``second`` (and a
    process's own rows), not every channel's; without ``--channel`` every loop."""
    _second(engine, scenario.sku2, state="new")
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        for channel in ("api", NOW_NAME):
            connection.execute(
                insert(workers).values(
                    worker_id=f"loop-of/{channel}",
                    started_at=now - timedelta(minutes=30),
                    heartbeat_at=now,
                    breaker_state="closed",
                    channel=channel,
                )
            )
    every = cli("status", db=db_url)
    assert "loop-of/api" in every.stdout and "loop-of/second" in every.stdout, describe(every)
    one = cli("status", "--channel", NOW_NAME, db=db_url)
    assert "loop-of/second" in one.stdout and "loop-of/api" not in one.stdout, describe(one)


BUSY = (
    '{"accepted_rate": 40, "in_flight": 2, "limit": 3, "max_limit": 16, "refused_last_minute": 12}'
)


def test_status_of_one_marketplace_channel_names_it_never_the_site(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """``status --channel second`` of an Ozon channel without EXCHANGE_CHANNELS: its
    workers' column and its pace name the channel as every channel-aware word does («Канал
    second (Ozon)», «канал second (Ozon) перегружен»), never «Сайт» nor «сайт перегружен»
    (two channels registered: the words name the channels, ``words.channels_named``)."""
    _second(engine, scenario.sku2, state="new", target="ozon")
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=f"loop-of/{NOW_NAME}",
                started_at=now - timedelta(minutes=30),
                heartbeat_at=now,
                breaker_state="closed",
                channel=NOW_NAME,
                pace=BUSY,
            )
        )
    one = cli("status", "--channel", NOW_NAME, db=db_url, env={"EXCHANGE_LANG": "ru"})
    said = " ".join(one.stdout.split())
    assert "Канал second (Ozon)" in said, describe(one)
    assert "канал second (Ozon) перегружен: 40 запросов/с" in said, describe(one)
    assert "Сайт" not in said and "сайт перегружен" not in said, describe(one)


def _renamed(tmp_path: Path, name: str = "site") -> dict[str, str | None]:
    """The scenario's one channel (``api``, as migrate registered it) configured under a new
    name in EXCHANGE_CHANNELS, as a shop owner moving to channels renames it."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    channel = {
        "target": "api",
        "site_url": "https://shop.example.com",
        "site_token_file": str(token),
    }
    return {"EXCHANGE_CHANNELS": json.dumps({name: channel}), "EXCHANGE_SITE_TOKEN": None}


def test_deliveries_waiting_on_a_registered_channel_no_configured_channel_serves_need_a_person(
    cli: Cli, db_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    """Contract 6, 13: the channel ``api`` renamed ``site`` in the settings leaves DOC-1 v2 and
    v3 waiting on ``api``, which no worker takes: ``status`` (--json and text, in Russian too)
    says so as a cause of its own, naming the channel, the count and what to do."""
    env = _renamed(tmp_path)
    figures = run_json(cli, "status", "--json", db=db_url, env=env, code=1)
    assert figures["channels"]["api"]["configured"] is False
    assert "unserved:api" in figures["needs_person_causes"]
    said = figures["needs_person"][figures["needs_person_causes"].index("unserved:api")]
    # owner 31 item 4: both ways out, the rename's too (drop the old, seed the new)
    assert said == (
        "channel api (site): 2 deliveries wait on it and no configured channel serves it: "
        "configure it again (a channel named api in the settings), or, renamed, drop it, which "
        "cancels what waits on it (exchange channels drop api --note TEXT), and give the new "
        "channel every current price: exchange channels seed NEW"
    )
    text = cli("status", db=db_url, env=env)
    assert 1 == text.returncode, describe(text)
    assert "2 deliveries wait on it" in " ".join(text.stdout.split()), describe(text)
    russian = cli("status", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    assert "exchange channels drop api --note" in " ".join(russian.stdout.split())
    assert "exchange channels seed НОВЫЙ" in " ".join(russian.stdout.split())
    assert "канал api (сайт): ждут 2 доставки" in " ".join(russian.stdout.split()), describe(
        russian
    )


def test_a_registered_channel_configured_or_with_nothing_waiting_is_no_cause(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario, tmp_path: Path
) -> None:
    configured = run_json(cli, "status", "--json", db=db_url, env=_renamed(tmp_path, "api"), code=1)
    assert not [c for c in configured["needs_person_causes"] if c.startswith("unserved")]
    _second(engine, scenario.sku2)  # quarantined there: a cause of its own, nothing waits
    figures = run_json(cli, "status", "--json", db=db_url, env=_renamed(tmp_path, "api"), code=1)
    assert figures["channels"]["second"]["configured"] is False
    assert not [c for c in figures["needs_person_causes"] if c.startswith("unserved")]


def test_a_channels_pause_is_shown_with_its_note_operator_and_time(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario, tmp_path: Path
) -> None:
    """``exchange pause --channel second --note …``: ``status`` says the note beside the
    pause (the channels' table and the cause), with who paused and when (words31 item 5)."""
    _second(engine, scenario.sku2, state="new")
    at = datetime(2026, 12, 5, 7, 50, 12, tzinfo=UTC)
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="price check", now=at, channel="second")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    env = {
        "EXCHANGE_CHANNELS": json.dumps({"api": site, "second": site}),
        "EXCHANGE_SITE_TOKEN": None,
    }
    figures = run_json(cli, "status", "--json", db=db_url, env=env, code=1)
    said = figures["needs_person"][figures["needs_person_causes"].index("paused:second")]
    assert said == (
        "channel second (site): delivery paused by operator olga since 2026-12-05 07:50 UTC: "
        "“price check”"
    )
    text = cli("status", db=db_url, env=env)
    row = next(line for line in text.stdout.splitlines() if line.lstrip("│ ").startswith("second"))
    assert "paused by operator olga since 2026-12-05 07:50 UTC: “price check”" in row, describe(
        text
    )


def test_the_backlog_line_says_its_work_waits_on_a_channel_no_worker_takes(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario, tmp_path: Path
) -> None:
    """Owner 31 item 2 (contract 6 ``backlog``): all the work waiting is on ``second``, a
    channel no process configures (renamed away), while ``api``'s is done: the backlog line
    says so and names it, never an estimate from ``api``'s pace nor «none delivered in the last
    minute» (a pace no worker of that channel could have)."""
    _second(engine, scenario.sku2, state="new")
    env = _renamed(tmp_path, "api")
    figures = run_json(cli, "status", "--json", db=db_url, env=env, code=1)
    assert figures["backlog"]["messages"] == 1
    text = cli("status", db=db_url, env=env)
    said = " ".join(text.stdout.split())
    assert (
        "backlog: 1 message, all on channels no worker takes now, paused or not configured "
        "(second): no estimate"
    ) in said, describe(text)
    assert "at the current pace" not in said and "none delivered" not in said


def test_a_paused_channels_row_and_its_live_loop_say_paused_with_no_estimate(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario, tmp_path: Path
) -> None:
    """Owner 31 item 6 (docs/runbook.md, «delivery»: PAUSED …): ``second`` paused by an
    operator while its loop is live and delivered a moment before: its worker row says
    «PAUSED by operator olga», never «running», and its backlog has no estimate from the pace
    before the pause."""
    _second(engine, scenario.sku2, state="new")
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="price check", now=now, channel="second")
        second = connection.execute(
            select(channels.c.id).where(channels.c.name == NOW_NAME)
        ).scalar_one()
        pk = connection.execute(
            select(messages.c.id).where(messages.c.message_id == scenario.sku2)
        ).scalar_one()
        connection.execute(
            insert(workers).values(
                worker_id=f"loop-of/{NOW_NAME}",
                started_at=now - timedelta(minutes=5),
                heartbeat_at=now,
                breaker_state="closed",
                channel=NOW_NAME,
            )
        )
        connection.execute(  # the pace its backlog's estimate would come from
            insert(history).values(
                message_pk=pk,
                channel_id=second,
                at=now - timedelta(seconds=5),
                event="delivered",
                worker=f"loop-of/{NOW_NAME}",
            )
        )
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    env = {
        "EXCHANGE_CHANNELS": json.dumps({"api": site, "second": site}),
        "EXCHANGE_SITE_TOKEN": None,
    }
    assert run_json(cli, "status", "--json", db=db_url, env=env, code=1)["channels"][NOW_NAME][
        "backlog"
    ]["eta_s"], "the scene has a pace to estimate from"
    text = cli("status", db=db_url, env=env)
    lines = text.stdout.splitlines()
    loop = next(line for line in lines if f"loop-of/{NOW_NAME}" in line)
    assert "PAUSED by operator olga" in loop and "running" not in loop, describe(text)
    row = next(line for line in lines if line.lstrip("│ ").startswith(f"{NOW_NAME} "))
    assert "1 (paused: no estimate)" in row and "about" not in row, describe(text)


def _stopped_runs(engine: Engine, runs: int) -> datetime:
    """``runs`` short runs without EXCHANGE_WORKER_ID, each leaving its process's row and a
    loop's row per channel, stopped a minute apart (the workers' table holds nothing else);
    the last one's stop."""
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(workers.delete())
        for run in range(runs):
            stopped = now - timedelta(minutes=runs - run)
            for channel in (None, "api", NOW_NAME):
                connection.execute(
                    insert(workers).values(
                        worker_id=f"vm-{run}" + (f"/{channel}" if channel else ""),
                        started_at=stopped - timedelta(seconds=5),
                        heartbeat_at=stopped,
                        stopped_at=stopped,
                        breaker_state="closed",
                        channel=channel,
                    )
                )
    return now


def test_status_shows_each_channels_last_stopped_worker_and_counts_the_rest(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Owner 31 item 7: 5 short runs leave 15 stopped rows; ``status`` shows the last stopped
    row of each channel and says how many more, where the table grew by 3 rows a run; --json
    keeps every row. A process's own row beside its loops' rows is not shown, nor counted
    (review mpadvice item 7: each worker once)."""
    _second(engine, scenario.sku2)
    _stopped_runs(engine, 5)
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert 15 == len(figures["workers"])
    text = cli("status", db=db_url)
    rows = [line for line in text.stdout.splitlines() if line.lstrip("│ ").startswith("vm-")]
    assert ["vm-4/api", f"vm-4/{NOW_NAME}"] == [r.split()[1] for r in rows], describe(text)
    assert "and 8 more stopped" in text.stdout, describe(text)
    russian = cli("status", db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert "ещё 8 остановленных" in russian.stdout, describe(russian)


def test_a_marketplaces_reason_is_said_in_its_words_by_list_status_and_the_report(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario, tmp_path: Path
) -> None:
    """Issue 32 (mpwords2 item 1): a price quarantined ``unknown-response`` on an Ozon channel
    is «непонятный ответ площадки» (the one rule, ``words.reason_target``) in ``quarantine
    list``, ``status``'s quarantine table and the exported report's summary, as ``find``
    says it; the site's own reasons keep the site's words."""
    _second(engine, scenario.sku2, target="ozon")
    with transaction(engine) as connection:
        second = connection.execute(
            select(channels.c.id).where(channels.c.name == NOW_NAME)
        ).scalar_one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == second)
            .values(reason="unknown-response")
        )
    # wide enough for the channel column two channels add (sellerwords item 5)
    env = {"EXCHANGE_LANG": "ru", "COLUMNS": "300"}
    listed = cli("quarantine", "list", db=db_url, env=env)
    row = next(line for line in listed.stdout.splitlines() if scenario.sku2 in line)
    assert "непонятный ответ площадки (unknown-response)" in row, describe(listed)
    site_row = next(line for line in listed.stdout.splitlines() if scenario.sku_rejected in line)
    assert "сайт отклонил (http-422)" in site_row, describe(listed)
    status = cli("status", db=db_url, env=env)
    assert "непонятный ответ площадки (unknown-response)" in status.stdout, describe(status)
    report = tmp_path / "q.html"
    exported = cli(
        "quarantine", "export", "--output", str(report), "--lang", "ru", db=db_url, env=env
    )
    assert exported.returncode == 0, describe(exported)
    summary = report.read_text(encoding="utf-8").split('class="reasons"')[1].split("</table>")[0]
    assert "непонятный ответ площадки (unknown-response)" in summary, summary
    assert "непонятный ответ сайта" not in summary, summary


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_status_at_80_columns_wraps_its_sentences_between_words(
    cli: Cli, db_url: str, scenario: Scenario, tmp_path: Path, lang: str
) -> None:
    """Issue 32 (mpwords2 item 6): ``status`` in an 80-column terminal printed its sentences
    (what needs a person, the backlog) as lines longer than the terminal, which the terminal
    cut mid-word. Each is wrapped between words at the width: no line is wider than 80 (the
    database's address, the header, aside), and the words read back whole."""
    env = {**_renamed(tmp_path), "EXCHANGE_LANG": lang, "COLUMNS": "80"}
    text = cli("status", db=db_url, env=env)
    assert text.returncode == 1, describe(text)
    lines = text.stdout.splitlines()[1:]
    assert all(len(line) <= 80 for line in lines), describe(text)
    whole = " ".join(text.stdout.split())
    said = (
        "канал api (сайт): ждут 2 доставки, а ни один настроенный канал его не обслуживает"
        if lang == "ru"
        else "channel api (site): 2 deliveries wait on it and no configured channel serves it"
    )
    assert said in whole, describe(text)


def test_the_quarantine_list_says_each_rows_channel_where_there_are_several(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Promise (contract 13; sellerwords item 5): one message quarantined on two channels is
    two rows of ``quarantine list``, each naming its channel; one channel keeps its columns."""
    one = cli("quarantine", "list", db=db_url)
    assert one.returncode == 0, describe(one)
    header = next(line for line in one.stdout.splitlines() if "message_id" in line)
    assert "channel" not in header, describe(one)
    quarantined = [
        e["message_id"]
        for e in run_json(cli, "quarantine", "list", "--json", db=db_url)
        if not e["rejected_row"]
    ]
    _second(engine, quarantined[0])  # quarantined on api and on second
    for lang, column in (("en", "channel"), ("ru", "канал")):
        text = cli("quarantine", "list", db=db_url, env={"EXCHANGE_LANG": lang, "COLUMNS": "250"})
        assert text.returncode == 0, describe(text)
        lines = text.stdout.splitlines()
        header = next(line for line in lines if line.startswith("┃"))
        assert header.split("┃")[2].strip() == column, describe(text)
        rows = [line.split("│") for line in lines if quarantined[0] in line]
        assert sorted(cells[2].strip() for cells in rows) == ["api", "second"], describe(text)


def test_a_retry_of_a_message_quarantined_on_two_channels_names_it_once(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Promise (sellerwords item 7): ``quarantine retry ID`` of a message quarantined on two
    channels says one message and its id on one line; the per-channel lines count the two."""
    quarantined = [
        e["message_id"]
        for e in run_json(cli, "quarantine", "list", "--json", db=db_url)
        if not e["rejected_row"]
    ]
    mid = quarantined[0]
    _second(engine, mid)  # quarantined on api and on second
    done = cli("quarantine", "retry", mid, db=db_url)
    assert done.returncode == 0, describe(done)
    lines = done.stdout.splitlines()
    assert [line.strip() for line in lines].count(mid) == 1, describe(done)
    assert "retried 1 message" in done.stdout, describe(done)
    assert "on channel api: 1" in done.stdout and "on channel second: 1" in done.stdout, describe(
        done
    )


def test_find_says_a_messages_id_once_whatever_its_channels(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Review mpadvice item 6: ``find`` printed the message_id line once per channel; a
    message's deliveries follow its id, said once."""
    _second(engine, scenario.sku2)
    found = run_json(cli, "find", "SKU-2", "--json", db=db_url)
    message_id = found[0]["message_id"]
    text = cli("find", "SKU-2", db=db_url).stdout
    lines = text.splitlines()
    assert lines.count(message_id) == 1, text
    assert "channel api:" in text and "channel second:" in text, text


def test_status_of_one_channel_lists_only_the_processes_serving_it(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Review 33 item 4: a seller runs a worker per channel (``exchange run --channel``):
    each process writes its own row (no channel) and its loop's ``<worker id>/<channel>``.
    ``status --channel second`` listed every process's own row, the other channels' workers
    among them: it lists the process whose loop serves ``second`` (and its loop) only. A
    process without loop rows (one channel, no EXCHANGE_CHANNELS) serves whatever channel
    there is: listed."""
    _second(engine, scenario.sku2, state="new")
    now = datetime.now(UTC)
    rows = [
        ("proc-api", None),
        ("proc-api/api", "api"),
        ("proc-second", None),
        (f"proc-second/{NOW_NAME}", NOW_NAME),
        ("proc-alone", None),
    ]
    with transaction(engine) as connection:
        for worker_id, channel in rows:
            connection.execute(
                insert(workers).values(
                    worker_id=worker_id,
                    started_at=now - timedelta(minutes=30),
                    heartbeat_at=now,
                    breaker_state="closed",
                    channel=channel,
                )
            )
    one = cli("status", "--channel", NOW_NAME, db=db_url)
    shown = set(re.findall(r"proc-[\w/-]+", one.stdout))
    # a process is read on its loops' rows (``shown_workers``): proc-second on its loop's
    assert shown == {f"proc-second/{NOW_NAME}", "proc-alone"}, describe(one)
    every = cli("status", db=db_url)
    assert set(re.findall(r"proc-[\w/-]+", every.stdout)) == {
        "proc-api/api",
        f"proc-second/{NOW_NAME}",
        "proc-alone",
    }, describe(every)


def test_status_of_one_channel_lists_that_channels_withheld_prices_only(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Seller 34 item 2: SKU-2 withheld on ``second`` and SKU-REJ on ``api``: ``status
    --channel api`` lists api's withheld price, never second's; without ``--channel`` both."""
    _second(engine, scenario.sku2, state="withheld")
    with transaction(engine) as connection:
        pk = connection.execute(
            select(messages.c.id).where(messages.c.message_id == scenario.sku_rejected)
        ).scalar_one()
        api = connection.execute(select(channels.c.id).where(channels.c.name == "api")).scalar_one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == pk, deliveries.c.channel_id == api)
            .values(state="withheld", reason=None)
        )
    every = cli("status", db=db_url)
    assert scenario.sku2 in every.stdout and scenario.sku_rejected in every.stdout, describe(every)
    one = cli("status", "--channel", "api", db=db_url)
    assert scenario.sku_rejected in one.stdout, describe(one)
    assert scenario.sku2 not in one.stdout, describe(one)
