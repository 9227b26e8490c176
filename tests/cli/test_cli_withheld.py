"""``exchange withheld release`` and ``status`` on withheld prices (contract 13), against the
site simulator's withholding switch (a test device: exchange/dev/sitemodel.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from clitools import TOKEN, Cli, assert_one_line_error, deliver_in_process, describe, run_json
from prometheus_client import generate_latest
from rich.console import Console
from sqlalchemy import Engine, insert, select

from exchange.cli.withheld_shown import withheld_table
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import channels, history
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.domain import identity
from exchange.domain.breaker import BreakerState
from exchange.ops.metrics import PrometheusMetrics
from exchange.words import error_words, name

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def withholding_site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN, faults=Faults(seed=1), withhold_drops=Decimal("0.5")) as sim:
        yield sim


def _withheld_v2(db_url: str, engine: Engine, site: SiteSimulator) -> str:
    deliver_in_process(db_url, engine, site, [price_row("S1", 1, "100.00")])
    deliver_in_process(db_url, engine, site, [price_row("S1", 2, "10.00")])
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.state == "withheld")
            ).scalar_one()
        )


def test_status_counts_withheld_and_names_the_cause(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    message_id = _withheld_v2(db_url, engine, withholding_site)
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert figures["counts"]["withheld"] == 1
    assert "withheld" in figures["needs_person_causes"]
    assert figures["oldest_undelivered_age_s"] is None  # left out, as the backlog
    text = cli("status", db=db_url)
    assert text.returncode == 1 and "withheld" in text.stdout, describe(text)
    # listed with the channel's own words and what releases it
    assert message_id in text.stdout and "exchange withheld release" in text.stdout
    assert "the site took the price and withholds it from buyers" in text.stdout, describe(text)
    ru = cli("status", db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert "придержано каналом" in ru.stdout, describe(ru)
    assert "сайт принял цену, но придержал её от покупателей" in ru.stdout, describe(ru)


def test_release_asks_the_channel_and_writes_history_with_operator_and_note(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    message_id = _withheld_v2(db_url, engine, withholding_site)
    refused = cli("withheld", "release", message_id, db=db_url, site=withholding_site.url)
    assert refused.returncode == 2 and "--note" in refused.stderr, describe(refused)
    done = cli(
        "withheld",
        "release",
        message_id,
        "--note",
        "price checked with the buyer",
        "--operator",
        "olga",
        db=db_url,
        site=withholding_site.url,
    )
    assert done.returncode == 0, describe(done)
    assert f"{message_id}: delivered" in done.stdout, describe(done)
    # A count of the released prices buyers see, never read as a price of 0 (review 32).
    assert "buyers see the new price of 1 of 1 now" in done.stdout, describe(done)
    assert withholding_site.effect_counts()[message_id] == 1
    with transaction(engine, read_only=True) as connection:
        state = connection.execute(
            select(messages.c.state).where(messages.c.message_id == message_id)
        ).scalar_one()
        rows = connection.execute(
            select(history.c.event, history.c.operator, history.c.note)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.message_id == message_id)
            .order_by(history.c.id)
        ).all()
    assert state == "delivered"
    assert [tuple(r) for r in rows[-2:]] == [
        ("operator-release", "olga", "price checked with the buyer"),
        ("withheld-live", "olga", "price checked with the buyer"),
    ]
    again = cli(
        "withheld", "release", message_id, "--note", "x", db=db_url, site=withholding_site.url
    )
    assert again.returncode == 2 and "only withheld messages" in again.stderr, describe(again)
    unknown = cli(
        "withheld",
        "release",
        message_id,
        "--note",
        "x",
        "--channel",
        "nowhere",
        db=db_url,
        site=withholding_site.url,
    )
    assert unknown.returncode == 2 and "no channel nowhere" in unknown.stderr, describe(unknown)


def test_the_report_and_the_metrics_count_withheld(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator, tmp_path: Path
) -> None:
    _withheld_v2(db_url, engine, withholding_site)
    output = tmp_path / "report.json"
    done = cli("quarantine", "export", "--format", "json", "--output", str(output), db=db_url)
    assert done.returncode == 0, describe(done)
    assert json.loads(output.read_text(encoding="utf-8"))["summary"]["withheld"] == 1
    csv = tmp_path / "report.csv"
    assert (
        cli("quarantine", "export", "--format", "csv", "--output", str(csv), db=db_url).returncode
        == 0
    )
    assert "Придержано каналом от покупателей, не в карантине (exchange withheld release);1" in (
        csv.read_text(encoding="utf-8-sig")
    )
    metrics = PrometheusMetrics()
    metrics.cycle_finished(
        engine, now=datetime.now(UTC), seconds=0.1, breaker=BreakerState.CLOSED, paused=False
    )
    scraped = generate_latest(metrics.registry).decode()
    assert 'exchange_messages{state="withheld"} 1.0' in scraped
    assert 'exchange_attempts_total{outcome="withheld"}' in scraped


def test_run_until_idle_counts_withheld_as_idle_and_says_it_is_left(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    deliver_in_process(db_url, engine, withholding_site, [price_row("S1", 1, "100.00")])
    stage(engine, [price_row("S1", 2, "10.00")])
    ran = cli("run", "--until-idle", "--max-seconds", "30", db=db_url, site=withholding_site.url)
    assert ran.returncode == 0, describe(ran)  # idle: exit 0, not 3
    assert "1 withheld by the channel (exchange withheld release)" in ran.stdout, describe(ran)


def test_release_the_channel_did_not_take_says_so_and_exits_1(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Promise: a release the channel did not carry out (the site down) is never reported as
    released; the headline counts asked, released and not released, and the exit is 1."""
    message_id = _withheld_v2(db_url, engine, withholding_site)
    down = "http://127.0.0.1:9"  # nothing listens on the discard port
    done = cli("withheld", "release", message_id, "--note", "x", db=db_url, site=down)
    assert done.returncode == 1, describe(done)
    assert "asked 1, released 0, not released 1" in done.stdout, describe(done)
    assert "buyers see the new price of 0 of 1 now" in done.stdout, describe(done)
    assert not done.stdout.startswith("released"), describe(done)
    assert f"{message_id}: not released: the site did not answer" in done.stdout, describe(done)
    ru = cli(
        "withheld",
        "release",
        message_id,
        "--note",
        "x",
        db=db_url,
        site=down,
        env={"EXCHANGE_LANG": "ru"},
    )
    assert ru.returncode == 1, describe(ru)
    assert "не выпущено: сайт не ответил" in ru.stdout, describe(ru)
    assert "новую цену покупатели уже видят у 0 из 1" in ru.stdout, describe(ru)
    # sellerwords 3: the history records the person's ask and that the channel did not
    # release, never «выпущено оператором»
    with transaction(engine, read_only=True) as connection:
        details = (
            connection.execute(
                select(history.c.detail).where(history.c.event == "operator-release")
            )
            .scalars()
            .all()
        )
    assert len(details) == 2, details
    assert all(
        d.startswith("not released by the channel: the site did not answer") for d in details
    ), details
    assert name("event", "operator-release", "ru") == "оператор попросил выпустить"
    said = error_words(details[0], "ru")
    assert said.startswith("канал не выпустил: сайт не ответил"), said


def _first_cells(text: str) -> str:
    """The first column of a rendered table, its lines joined (a folded id whole again)."""
    return "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))


@pytest.mark.parametrize(
    ("sku", "one_line"),
    [("SKU-1_retail", True), ("SKU-1_retail_price_of_a_long_catalogue_name", False)],
)
def test_status_lists_a_withheld_message_id_whole_at_80_columns(
    db_url: str,
    engine: Engine,
    withholding_site: SiteSimulator,
    sku: str,
    one_line: bool,
) -> None:
    """Promise: ``exchange status`` never cuts a withheld message's id (``withheld release``
    needs it whole): at 80 columns a usual id stays on one line, a longer one is folded."""
    deliver_in_process(db_url, engine, withholding_site, [price_row(sku, 1, "100.00")])
    deliver_in_process(db_url, engine, withholding_site, [price_row(sku, 2, "10.00")])
    with transaction(engine, read_only=True) as connection:
        message_id = str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.state == "withheld")
            ).scalar_one()
        )
    table = withheld_table(engine, "en", "UTC")
    assert table is not None
    console = Console(width=80, record=True, force_terminal=False)
    console.print(table)
    text = console.export_text()
    assert (message_id in text) is one_line, text
    assert message_id in _first_cells(text) and "…" not in _first_cells(text), text


def test_a_release_of_a_withheld_price_with_a_newer_one_sent_after_it_is_refused(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Review 32: Yandex withheld 5000 (v2), 1C corrected to 1050 (v3, sent, not yet shown),
    the operator released v2 and Yandex applied the confirmation after the correction (§3.5: no
    order): 5000 went live over 1C's newer price. A release of a version with a newer one on
    the channel (not cancelled) is refused in one line, nothing asked of the channel; the
    newest may be released. (v3 is taken in 1C's stead only after the refusals: withheld in
    v2's place, it ends v2 superseded, review ym400.)"""
    older = _withheld_v2(db_url, engine, withholding_site)
    withholding_site.faults.outage = True  # v3 taken in, on its way: the site is down
    deliver_in_process(db_url, engine, withholding_site, [price_row("S1", 3, "9.00")])
    withholding_site.faults.outage = False
    with transaction(engine, read_only=True) as connection:
        newest = str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.version == 3)
            ).scalar_one()
        )
    refused = cli(
        "withheld", "release", older, "--note", "checked", db=db_url, site=withholding_site.url
    )
    assert refused.returncode == 2, describe(refused)
    assert f"{older} → {newest}" in refused.stderr, describe(refused)
    # v3 never reached the site (quarantined here): it waits to go, never "went" (ym34)
    assert "newer price from 1C waits to go to this channel" in refused.stderr, describe(refused)
    assert "went" not in refused.stderr, describe(refused)
    assert len(refused.stderr.strip().splitlines()) == 1, describe(refused)
    assert withholding_site.effect_counts().get(older, 0) == 0, "the channel was not asked"
    ru = cli(
        "withheld",
        "release",
        older,
        "--note",
        "checked",
        db=db_url,
        site=withholding_site.url,
        env={"EXCHANGE_LANG": "ru"},
    )
    assert ru.returncode == 2 and "ждёт отправки более новая" in ru.stderr, describe(ru)
    again = cli("quarantine", "retry", newest, "--note", "site back", "--yes", db=db_url)
    assert again.returncode == 0, describe(again)
    deliver_in_process(db_url, engine, withholding_site)  # v3 withheld in v2's place
    done = cli(
        "withheld", "release", newest, "--note", "checked", db=db_url, site=withholding_site.url
    )
    assert done.returncode == 0 and f"{newest}: delivered" in done.stdout, describe(done)


def test_a_release_with_a_newer_price_still_in_staging_is_refused_before_anything_is_sent(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Review release36: 1C staged v3 (100.00) after the withheld v2 (10.00) while intake had
    not taken it yet (workers stopped, or intake behind a large package): ``withheld release``
    of v2 answered "released 1", buyers saw 10.00, and on a marketplace the quarantine then
    withheld v3 against it. A row 1C staged is 1C's: refused as a newer one taken in is, naming
    the staged version, nothing asked of the channel. Rows intake would refuse (another sku
    under the aggregate, a bad price) and an older version do not count; taken in, the newest
    lands."""
    older = _withheld_v2(db_url, engine, withholding_site)
    stage(
        engine,
        [
            price_row("S1", 3, "100.00"),
            {**price_row("S1", 4, "5.00"), "payload": json.dumps({"sku": "S9", "price": "5"})},
            price_row("S1", 5, "-1"),
        ],
    )
    staged = identity.message_id("price", "S1", 3)
    refused = cli(
        "withheld", "release", older, "--note", "checked", db=db_url, site=withholding_site.url
    )
    assert refused.returncode == 2, describe(refused)
    assert f"{older} → {staged}" in refused.stderr, describe(refused)
    assert "received, not taken in yet" in refused.stderr, describe(refused)
    assert len(refused.stderr.strip().splitlines()) == 1, describe(refused)
    assert withholding_site.effect_counts().get(older, 0) == 0, "the channel was not asked"
    ru = cli(
        "withheld",
        "release",
        older,
        "--note",
        "checked",
        db=db_url,
        site=withholding_site.url,
        env={"EXCHANGE_LANG": "ru"},
    )
    assert ru.returncode == 2 and "получена, но ещё не взята в работу" in ru.stderr, describe(ru)
    assert f"{older} → {staged}" in ru.stderr, describe(ru)
    with transaction(engine, read_only=True) as connection:
        state = connection.execute(
            select(messages.c.state).where(messages.c.message_id == older)
        ).scalar_one()
    assert state == "withheld"
    deliver_in_process(db_url, engine, withholding_site)  # taken in: 100.00 lands
    assert withholding_site.effect_counts().get(staged) == 1
    assert withholding_site.effect_counts().get(older, 0) == 0


def test_a_staged_row_intake_would_refuse_does_not_hold_a_release(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator, tmp_path: Path
) -> None:
    """Review release36's guard: only a row intake would take as a newer message of the good
    refuses a release; a bad row, another sku or price type under the aggregate, another
    aggregate, another kind and an older version do not. With staging in a database of its
    own, that one's rows count."""
    older = _withheld_v2(db_url, engine, withholding_site)
    stage(
        engine,
        [
            {**price_row("S1", 4, "5.00"), "payload": json.dumps({"sku": "S9", "price": "5"})},
            price_row("S1", 5, "-1"),
            # the aggregate's first version fixed it to retail: intake refuses another type
            {
                **price_row("S1", 8, "100.00"),
                "payload": json.dumps(
                    {"sku": "S1", "price": "100.00", "currency": "RUB", "price_type": "wholesale"}
                ),
            },
            price_row("S1", 1, "100.00"),
            price_row("S2", 7, "100.00"),
            {**price_row("S1", 6, "100.00"), "kind": "no-such-kind"},
        ],
    )
    # staging_intents in a database of its own: that one is read (EXCHANGE_STAGING_URL)
    apart = make_engine(f"sqlite:///{tmp_path / 'staging.db'}")
    try:
        upgrade(apart)
        stage(apart, [price_row("S1", 3, "100.00")])
    finally:
        apart.dispose()
    own = {"EXCHANGE_STAGING_URL": f"sqlite:///{tmp_path / 'staging.db'}"}
    refused = cli(
        "withheld",
        "release",
        older,
        "--note",
        "checked",
        db=db_url,
        site=withholding_site.url,
        env=own,
    )
    assert refused.returncode == 2, describe(refused)
    assert f"{older} → {identity.message_id('price', 'S1', 3)}" in refused.stderr
    done = cli(
        "withheld", "release", older, "--note", "checked", db=db_url, site=withholding_site.url
    )
    assert done.returncode == 0 and f"{older}: delivered" in done.stdout, describe(done)


def test_a_withheld_price_with_a_newer_one_waiting_on_a_paused_channel_is_said_not_to_confirm(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Review ym34 finding 2: a newer price waiting to go on a paused channel (never sent) made
    ``withheld release`` of the held one say "a newer price went to this channel", and
    ``withheld list --json`` said ``newer_waits_behind: false`` (only Wildberries' quarantine
    wait counted). Now the refusal says the newer waits to go, the list says true, and
    ``status`` says not to confirm the held price, on any channel."""
    older = _withheld_v2(db_url, engine, withholding_site)
    paused = cli("pause", "--note", "the shop moves", db=db_url)
    assert paused.returncode == 0, describe(paused)
    deliver_in_process(db_url, engine, withholding_site, [price_row("S1", 3, "9.00")])
    with transaction(engine, read_only=True) as connection:
        newest, state = connection.execute(
            select(messages.c.message_id, messages.c.state).where(messages.c.version == 3)
        ).one()
    assert "new" == state, "never sent: the channel is paused"
    listed = run_json(cli, "withheld", "list", "--json", db=db_url)
    assert [(e["message_id"], e["newer_waits_behind"]) for e in listed] == [(older, True)]
    refused = cli(
        "withheld", "release", older, "--note", "checked", db=db_url, site=withholding_site.url
    )
    assert refused.returncode == 2, describe(refused)
    assert f"{older} → {newest}" in refused.stderr, describe(refused)
    assert "waits to go to this channel" in refused.stderr, describe(refused)
    assert "went" not in refused.stderr, describe(refused)
    table = cli("withheld", "list", db=db_url, env={"COLUMNS": "200"})
    assert "waits to go to this channel, not delivered yet: do not confirm" in table.stdout, (
        describe(table)
    )
    ru = cli("withheld", "list", db=db_url, env={"COLUMNS": "200", "EXCHANGE_LANG": "ru"})
    assert "не подтверждайте" in ru.stdout, describe(ru)
    status = run_json(cli, "status", "--json", db=db_url, code=1)
    assert "withheld" in status["needs_person_causes"], status


def test_status_says_how_many_withheld_it_leaves_out_and_withheld_list_lists_them_all(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Promise (sellerwords item 6): ``exchange status`` lists the first 20 withheld prices and
    says how many more there are and the command that lists them; ``exchange withheld list``
    lists every one."""
    skus = [f"W{n:02d}" for n in range(23)]
    deliver_in_process(db_url, engine, withholding_site, [price_row(s, 1, "100.00") for s in skus])
    deliver_in_process(db_url, engine, withholding_site, [price_row(s, 2, "10.00") for s in skus])
    env = {"COLUMNS": "200"}
    status = cli("status", db=db_url, env=env)
    assert "and 3 more: exchange withheld list" in status.stdout, describe(status)
    ru = cli("status", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    assert "и ещё 3: exchange withheld list" in ru.stdout, describe(ru)
    listed = cli("withheld", "list", db=db_url, env=env)
    assert listed.returncode == 0, describe(listed)
    assert all(f"price.{s}.v2." in listed.stdout for s in skus), describe(listed)
    assert "more" not in listed.stdout, describe(listed)


def test_withheld_list_gives_one_channels_ids_as_json_for_withheld_release(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Review: a seller with 143 prices held on one marketplace could not collect the ids
    ``withheld release`` takes: ``withheld list`` had no ``--json`` and no ``--channel``. Now
    ``--json`` is a list of objects (message id, SKU, channel, price, since, whether a newer
    price waits behind it), ``--channel`` narrows it (and the table) to that channel, and an
    unknown channel is one line, exit 2."""
    skus = ["W1", "W2"]
    # aggregates as contract 1 writes them, <sku>/<price_type>: the list names the SKU
    # (rev32q: its "sku" was the aggregate)
    rows = [price_row(s, 1, "100.00", aggregate=f"{s}/retail") for s in skus]
    deliver_in_process(db_url, engine, withholding_site, rows)
    rows = [price_row(s, 2, "10.00", aggregate=f"{s}/retail") for s in skus]
    deliver_in_process(db_url, engine, withholding_site, rows)
    with transaction(engine) as connection:
        added = connection.execute(select(channels.c.added_at).limit(1)).scalar_one()
        connection.execute(
            insert(channels).values(name="market", target="yandex-market", added_at=added)
        )
    listed = run_json(cli, "withheld", "list", "--json", "--channel", "api", db=db_url)
    assert [(e["sku"], e["channel"], e["price"]) for e in listed] == [
        ("W1", "api", "10.00"),
        ("W2", "api", "10.00"),
    ]
    assert [e["aggregate"] for e in listed] == ["W1/retail", "W2/retail"]
    (first, _second) = listed
    assert first["message_id"].startswith("price.W1_retail.v2.") and first["version"] == 2
    assert datetime.fromisoformat(first["since"]).utcoffset() == timedelta(0)
    assert first["newer_waits_behind"] is False
    assert run_json(cli, "withheld", "list", "--json", db=db_url) == listed
    assert run_json(cli, "withheld", "list", "--json", "--channel", "market", db=db_url) == []
    none = cli("withheld", "list", "--channel", "market", db=db_url)
    assert none.returncode == 0 and first["message_id"] not in none.stdout, describe(none)
    table = cli("withheld", "list", "--channel", "api", db=db_url, env={"COLUMNS": "200"})
    assert first["message_id"] in table.stdout, describe(table)
    for args in (("--json", "--channel", "ozon"), ("--channel", "ozon")):
        assert_one_line_error(cli("withheld", "list", *args, db=db_url), "unknown channel 'ozon'")


class _HoldsAfterAccepting:
    """A channel whose quarantine may hold a price it accepted (Yandex Market's
    ``accepted_unshown``): never asked to release, the refusal comes first."""

    def accepted_unshown(self, receipt: str | None) -> bool:
        return bool(receipt) and str(receipt).startswith("ym-accepted:")

    async def withheld_shown(self, messages: object) -> list[object]:
        raise AssertionError("never asked")

    async def release_withheld(self, messages: object) -> list[object]:
        raise AssertionError("never asked")


def test_a_release_behind_a_newer_price_the_channel_accepted_says_it_may_be_held_too(
    cli: Cli, db_url: str, engine: Engine, withholding_site: SiteSimulator
) -> None:
    """Words 38 item 6: Yandex Market accepted the newer price and its quarantine holds it too
    (``withheld`` a minute later, once listed), yet ``withheld release`` of the older said the
    newer was «not delivered yet», «let the newer land». The refusal says the newer was
    accepted, is not shown yet, and may be held too: look again in a minute; in Russian too."""
    import asyncio

    from exchange.db.schema import deliveries
    from exchange.delivery.withheld import release
    from exchange.errors import Conflict

    older = _withheld_v2(db_url, engine, withholding_site)
    paused = cli("pause", "--note", "the shop moves", db=db_url)
    assert paused.returncode == 0, describe(paused)
    deliver_in_process(db_url, engine, withholding_site, [price_row("S1", 3, "90.00")])
    with transaction(engine) as connection:
        newest, pk = connection.execute(
            select(messages.c.message_id, messages.c.id).where(messages.c.version == 3)
        ).one()
        connection.execute(  # as Yandex Market's 200 leaves it, waiting for its read-back
            deliveries.update()
            .where(deliveries.c.message_pk == pk)
            .values(state="delayed", receipt="ym-accepted:{}")
        )
    with pytest.raises(Conflict) as refused:
        asyncio.run(
            release(
                engine,
                _HoldsAfterAccepting(),  # type: ignore[arg-type]
                [older],
                operator="op",
                note="checked",
                now=lambda: datetime.now(UTC),
            )
        )
    said = str(refused.value)
    assert f"{older} → {newest}" in said, said
    assert "not delivered yet" not in said and "let the newer land" not in said, said
    assert "was accepted by this channel" in said and "may be holding it" in said, said
    assert "look again in a minute" in said, said
    ru = error_words(said, "ru")
    assert ru != said and "через минуту" in ru, ru
