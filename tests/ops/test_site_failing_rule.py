"""The site keeps failing (issue 34, the walk after contract 15): only a live worker's breaker
raises the cause ``breaker`` and the notice's stop, and evidence that the site answers (a live
worker of the channel that hears it, a delivery after the cool-down ended) supersedes it. On
SQLite and PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, func, insert, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, workers
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.domain.notify import Stop
from exchange.domain.policy import KindPolicies
from exchange.domain.states import Event
from exchange.ops import notify
from exchange.ops.attention import attention
from exchange.ops.status import status

KINDS = KindPolicies.of({})
LIVE_WITHIN = 60.0


def _codes(engine: Engine, now: datetime) -> tuple[bool, list[str], bool]:
    """``breaker_open``, the causes' codes, and whether the notice stops for the breaker."""
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, KINDS, live_within=LIVE_WITHIN)
        found = attention(connection, None, figures, now, KINDS, LIVE_WITHIN)
        snapshot = notify.snapshot(connection, now, KINDS, stalled_after=LIVE_WITHIN)
    stop = Stop.BREAKER in snapshot.situation.stops
    return figures.breaker_open, [c.code for c in found.causes], stop


def _row(engine: Engine, worker_id: str, seen: datetime, **values: object) -> None:
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=worker_id,
                started_at=seen - timedelta(hours=1),
                heartbeat_at=seen,
                **{"breaker_state": "closed", **values},
            )
        )


def test_a_not_live_workers_breaker_raises_nothing(engine: Engine) -> None:
    """w1 was ``kill -9``ed with its breaker half-open; w3 is live and hears the site: no
    «сайт раз за разом отвечает ошибками», no breaker stop."""
    now = datetime.now(UTC)
    _row(engine, "w1", now - timedelta(minutes=12), breaker_state="half-open",
         breaker_until=now - timedelta(minutes=20))  # fmt: skip
    _row(engine, "w3", now)
    assert _codes(engine, now) == (False, [], False)


def test_a_not_live_workers_breaker_raises_nothing_with_no_worker_left(engine: Engine) -> None:
    """With no live worker the cause is ``no-live-worker`` (when work waits), never a frozen
    breaker's «сайт отвечает ошибками»."""
    now = datetime.now(UTC)
    _row(engine, "w1", now - timedelta(minutes=12), breaker_state="open",
         breaker_until=now + timedelta(minutes=5))  # fmt: skip
    breaker_open, codes, stop = _codes(engine, now)
    assert (breaker_open, "breaker" in codes, stop) == (False, False, False)


def test_an_idle_half_open_breaker_is_superseded_by_a_worker_that_hears_the_site(
    engine: Engine,
) -> None:
    """Idle w1 has nothing to probe with and stays half-open, no answer since 08:19; w2 delivers:
    the site answers, and neither «не отвечает» nor «отвечает ошибками» is said."""
    now = datetime.now(UTC)
    _row(engine, "w1", now, breaker_state="half-open", breaker_until=now - timedelta(minutes=9),
         unreachable_since=now - timedelta(minutes=10))  # fmt: skip
    _row(engine, "w2", now)
    assert _codes(engine, now) == (False, [], False)


def test_a_live_open_breaker_with_no_evidence_stays_a_cause(engine: Engine) -> None:
    """The rule still says a real outage: the only live worker's breaker is open."""
    now = datetime.now(UTC)
    _row(engine, "w1", now, breaker_state="open", breaker_until=now + timedelta(seconds=30))
    assert _codes(engine, now) == (True, ["breaker"], True)


def test_a_delivery_after_the_cool_down_supersedes_a_half_open_breaker(
    engine: Engine, db_url: str, site: SiteSimulator
) -> None:
    """A delivery recorded after a half-open breaker's cool-down ended is the site answering;
    one before it is not."""
    stage(engine, [price_row("SKU-1", 1)])
    worker = bootstrap.worker(fast_settings(db_url, site.url), engine, rng=random.Random(1))
    run_worker(worker)
    with transaction(engine) as connection:
        connection.execute(delete(workers))  # only w1's word is left
        delivered = connection.execute(
            select(func.max(history.c.at)).where(history.c.event == Event.DELIVERED.value)
        ).scalar_one()
    now = datetime.now(UTC)
    _row(engine, "w1", now, breaker_state="half-open",
         breaker_until=delivered - timedelta(seconds=1))  # fmt: skip
    assert _codes(engine, now)[0] is False
    with transaction(engine) as connection:
        connection.execute(workers.update().values(breaker_until=delivered + timedelta(seconds=1)))
    assert _codes(engine, now) == (True, ["breaker"], True)


def _console(engine: Engine, now: datetime, lang: str) -> str:
    from rich.console import Console

    from exchange.ops.status import tables

    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, KINDS, live_within=LIVE_WITHIN)
    console = Console(width=400, record=True)
    for table in tables(figures, lang=lang):  # type: ignore[arg-type]
        console.print(table)
    return " ".join(console.export_text().split())


def test_refused_connections_are_said_in_the_console_as_on_the_dashboard(engine: Engine) -> None:
    """While connections are refused the console's worker row said «сайт отвечает ошибками
    до …» and «сайт перегружен: … отказов за последнюю минуту: 12»; it says what the
    dashboard's row says: no answer since when, waits for the site, failed attempts."""
    from exchange.words import word

    now = datetime.now(UTC)
    since = now - timedelta(minutes=3)
    pace = (
        '{"limit": 1, "max_limit": 4, "in_flight": 0, "accepted_rate": 0, "paced_rate": 0.5,'
        ' "hold_s": 0, "refused_last_minute": 12}'
    )
    _row(engine, "w1", now, breaker_state="open", breaker_until=now + timedelta(minutes=1),
         unreachable_since=since, pace=pace)  # fmt: skip
    for lang in ("ru", "en"):
        said = _console(engine, now, lang)
        when = since.strftime("%Y-%m-%d %H:%M")
        unreachable = word("breaker_unreachable", lang).format(when="")  # type: ignore[arg-type]
        assert f"{unreachable}{when}" in said, said
        assert word("waits_for_site", lang) in said, said  # type: ignore[arg-type]
        failed = word("pace_unreachable", lang).format(failed=12)  # type: ignore[arg-type]
        assert failed in said, said
        for wrong in ("перегружен", "отвечает ошибками", "site busy", "fails: paused"):
            assert wrong not in said, said
