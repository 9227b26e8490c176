"""Workers as they are (issue 34 items 1, 2, 3 and 13; contract 15, "one pause, one truth"):
a start clears a stop; a worker quiet for 30 s is shown silent, then not live, never vanishing;
a stopped one is shown stopped, with when; rows go after a day; ``delivery_paused`` is true for
any pause and ``pause`` says whose; a site that gives no answer at all is said unreachable,
since when. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, insert, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.db.worker_rows import STOPPED_KEPT, WORKERS_KEPT, clear_old_workers
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.domain.notify import Stop
from exchange.domain.policy import KindPolicies
from exchange.ops import notify
from exchange.ops.attention import attention
from exchange.ops.backlog import backlog_words
from exchange.ops.status import SILENT_AFTER, WorkerState, status, tables
from exchange.queue import control
from exchange.runner import reporting
from exchange.worker import REPORT_EVERY_S

KINDS = KindPolicies.of({})


def _figures(engine: Engine, now: datetime | None = None) -> tuple[object, list[str]]:
    now = now or datetime.now(UTC)
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, KINDS, live_within=60.0)
        found = attention(connection, None, figures, now, KINDS, 60.0)
    return figures, [cause.code for cause in found.causes]


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


def test_a_worker_started_again_under_its_id_clears_its_stop(
    engine: Engine, db_url: str, site: SiteSimulator
) -> None:
    """Item 1: the shipped configuration fixes EXCHANGE_WORKER_ID, so every restart reuses
    the row a clean stop marked; the new run's report clears the mark: live, no
    ``no-live-worker`` cause, and the notice sees a worker (no "delivery stopped")."""
    settings = fast_settings(db_url, site.url)  # its worker id is fixed: "test-worker"
    first = bootstrap.worker(settings, engine, rng=random.Random(1))
    run_worker(first)
    first.retire()
    figures, _ = _figures(engine)
    assert [(w["worker_id"], w["state"]) for w in figures.workers] == [("test-worker", "stopped")]

    stage(engine, [price_row("SKU-1", 1)])
    again = bootstrap.worker(settings, engine, rng=random.Random(2))
    run_worker(again)
    figures, codes = _figures(engine)
    [row] = figures.workers
    assert (row["state"], row["live"], row["stopped_at"]) == ("live", True, None)
    assert "no-live-worker" not in codes
    assert figures.last_stopped is None
    with transaction(engine, read_only=True) as connection:
        found = notify.snapshot(connection, datetime.now(UTC), KINDS, stalled_after=60.0)
    assert Stop.NO_WORKER not in found.situation.stops
    assert found.situation.workers == 1


def test_a_restarted_worker_paused_by_the_site_says_the_site_refused_its_key(
    engine: Engine, db_url: str
) -> None:
    """Item 1's last clause: the restarted worker's own pause is what its row says, not the
    stop of its previous run."""
    now = datetime.now(UTC)
    _row(
        engine,
        "shop-1",
        now,
        stopped_at=None,
        paused_reason="HTTP 401: invalid token",
        paused_at=now - timedelta(minutes=3),
        pause_cause="token",
    )
    figures, codes = _figures(engine, now)
    assert codes == ["paused"]
    assert figures.delivery_paused is True
    assert figures.pause == {
        "by": "configuration",
        "since": (now - timedelta(minutes=3)).isoformat(),
        "note": "HTTP 401: invalid token",
        "operator": None,
        "cause": "token",
    }


def test_a_key_that_may_only_read_is_a_pause_by_the_site(engine: Engine) -> None:
    """Contract 15's ``pause.by``: ``site`` where the site's people are to act."""
    now = datetime.now(UTC)
    _row(engine, "w1", now, paused_reason="the key may read but not write", paused_at=now,
         pause_cause="read-only-key")  # fmt: skip
    figures, codes = _figures(engine, now)
    assert figures.pause is not None
    assert (figures.pause["by"], figures.pause["cause"], codes) == (
        "site",
        "read-only-key",
        ["paused"],
    )


def test_any_pause_is_delivery_paused_and_the_rows_say_the_same(engine: Engine) -> None:
    """Item 2: an operator's pause makes ``delivery_paused`` true, ``pause`` names the
    operator, and the console's worker row says paused, never ``running``."""
    now = datetime.now(UTC)
    _row(engine, "w1", now)
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="проверка цен", now=now)
    figures, codes = _figures(engine, now)
    assert figures.delivery_paused is True
    assert figures.pause is not None
    assert (figures.pause["by"], figures.pause["operator"], figures.pause["note"]) == (
        "operator",
        "olga",
        "проверка цен",
    )
    assert codes == ["paused"]
    printed = _printed(figures)
    assert "PAUSED by operator olga" in printed and "running" not in printed


def _printed(figures: object) -> str:
    from rich.console import Console

    console = Console(width=300, record=True)
    for table in tables(figures):  # type: ignore[arg-type]
        console.print(table)
    return console.export_text()


def test_a_killed_worker_goes_silent_then_not_live_and_never_vanishes(engine: Engine) -> None:
    """Item 13: a worker reports every 10 s; quiet for 30 s it is silent (still live, contract
    6), quiet for the live window it is not live, and it stays shown for a day; then its row
    goes."""
    assert REPORT_EVERY_S * 3 <= SILENT_AFTER.total_seconds()
    now = datetime.now(UTC)
    _row(engine, "killed", now - timedelta(seconds=35))
    _row(engine, "gone", now - timedelta(hours=3))
    _row(engine, "ancient", now - WORKERS_KEPT - timedelta(minutes=1))
    figures, _ = _figures(engine, now)
    shown = {w["worker_id"]: (w["state"], w["live"]) for w in figures.workers}
    assert shown == {"killed": ("silent", True), "gone": ("not-live", False)}
    printed = _printed(figures)
    assert "SILENT since" in printed and "not live: delivers nothing" in printed
    later, _ = _figures(engine, now + timedelta(seconds=30))
    assert {w["worker_id"]: w["state"] for w in later.workers}["killed"] == "not-live"
    with transaction(engine) as connection:
        assert clear_old_workers(connection, now) == 1
        left = connection.execute(select(workers.c.worker_id).order_by(workers.c.worker_id))
        assert [r.worker_id for r in left] == ["gone", "killed"]


def test_a_stopped_worker_is_shown_stopped_with_when(
    engine: Engine, db_url: str, site: SiteSimulator
) -> None:
    worker = bootstrap.worker(fast_settings(db_url, site.url), engine, rng=random.Random(3))
    run_worker(worker)
    worker.retire()
    figures, _ = _figures(engine)
    [row] = figures.workers
    assert (row["state"], row["live"]) == (WorkerState.STOPPED.value, False)
    assert row["stopped_at"] is not None
    assert "STOPPED at" in _printed(figures)


def test_a_running_worker_reports_every_few_seconds_whatever_its_cycle_waits_for(
    engine: Engine, db_url: str, site: SiteSimulator
) -> None:
    """Item 13: the report does not wait for a cycle to end (one may wait for a slow site
    far longer than 30 s); its first write also clears the stop of an earlier run."""
    worker = bootstrap.worker(fast_settings(db_url, site.url), engine)
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    _row(engine, "test-worker", long_ago, stopped_at=long_ago)
    beats: list[datetime] = []

    async def scenario() -> None:
        # no cycle runs at all here: every beat is the reporter's own; a loaded machine may
        # take a while for the first, so the test waits (up to a bound) for three of them
        deadline = time.monotonic() + 10
        async with reporting(worker, every=0.05):
            while len(set(beats)) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.06)
                with transaction(engine, read_only=True) as connection:
                    row = connection.execute(select(workers)).mappings().one()
                if row["stopped_at"] is None:  # the first report cleared the old stop
                    beats.append(row["heartbeat_at"])
        await worker.target.aclose()

    asyncio.run(scenario())
    assert len(set(beats)) >= 3, beats


def test_a_stopping_worker_reports_until_its_run_ends(
    engine: Engine, db_url: str, site: SiteSimulator
) -> None:
    """Review (Yandex Market hang): a stop waits for the requests in flight (each up to
    EXCHANGE_HTTP_TIMEOUT, 30 s: the silent line); meanwhile the worker still reports. The old
    heartbeat ended at the stop request, and ``status`` showed the worker SILENT (still live)."""
    worker = bootstrap.worker(fast_settings(db_url, site.url), engine)
    worker.request_stop()
    beats: list[datetime] = []

    async def scenario() -> None:
        deadline = time.monotonic() + 10
        async with reporting(worker, every=0.05):
            while len(set(beats)) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.06)
                with transaction(engine, read_only=True) as connection:
                    row = connection.execute(select(workers)).mappings().first()
                if row is not None:
                    beats.append(row["heartbeat_at"])
        await worker.target.aclose()

    asyncio.run(scenario())
    assert len(set(beats)) >= 3, beats


def test_a_site_that_refuses_connections_is_said_unreachable_not_delivering(
    engine: Engine, db_url: str
) -> None:
    """Item 3: with the site refusing connections, the row says since when it has not
    answered, ``status`` says so, and no estimate is given at 0 requests/s."""
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    settings = fast_settings(db_url, "http://127.0.0.1:9")
    worker = bootstrap.worker(settings, engine, rng=random.Random(4))

    async def one_cycle(w: object) -> None:
        await worker.cycle()

    run_worker(worker, one_cycle)
    assert worker.unreachable_since is not None
    figures, _ = _figures(engine)
    assert figures.site_unreachable_since == worker.unreachable_since.isoformat()
    assert "the site has not answered since" in " ".join(_printed(figures).split())
    waiting = {"messages": 3, "eta_s": None}
    said = backlog_words(waiting, unreachable=figures.site_unreachable_since is not None)
    assert said == "backlog: 3 messages, the site does not answer (no estimate)"


def test_an_open_breaker_with_no_answer_at_all_says_the_site_does_not_answer(
    engine: Engine,
) -> None:
    """Item 3: refused connections are no "errors the site answers with": the cause says
    since when the site has not answered and that delivery goes on by itself."""
    now = datetime.now(UTC)
    since = now - timedelta(minutes=4)
    _row(engine, "w1", now, breaker_state="open", breaker_until=now + timedelta(seconds=30),
         unreachable_since=since)  # fmt: skip
    figures, codes = _figures(engine, now)
    assert codes == ["breaker"]
    assert figures.site_unreachable_since == since.isoformat()
    with transaction(engine, read_only=True) as connection:
        found = attention(connection, None, figures, now, KINDS, 60.0)
    said = found.causes[0].words("ru")
    assert said.startswith(f"сайт не отвечает с {since.strftime('%Y-%m-%d %H:%M')} UTC"), said
    assert "продолжится сама" in said and "предохранител" not in said


def test_stopped_rows_a_later_stop_of_their_channel_superseded_go_at_a_start_the_last_stays(
    engine: Engine,
) -> None:
    """Words31 item 3: twenty short runs, each under a new worker id with a row per channel,
    leave twenty stopped rows per channel. A start or a stop (``clear_old_workers``) removes
    those a later stop of their channel superseded more than ``STOPPED_KEPT`` ago; the last
    stop of each channel stays (``status`` names it), so do a recent one, a killed worker's
    row and a stopped row no later stop of its channel followed (a channel renamed since)."""
    now = datetime.now(UTC)
    runs = [now - timedelta(hours=5) + timedelta(minutes=10 * n) for n in range(20)]
    for n, stopped in enumerate(runs):
        _row(engine, f"w{n:02d}", stopped, stopped_at=stopped)
        _row(engine, f"w{n:02d}/site", stopped, stopped_at=stopped, channel="site")
    recent = now - STOPPED_KEPT + timedelta(minutes=5)
    _row(engine, "w20", recent, stopped_at=recent)
    _row(engine, "w21", now - timedelta(minutes=1), stopped_at=now - timedelta(minutes=1))
    _row(engine, "killed", now - timedelta(hours=4))
    _row(engine, "w00/old-name", runs[0], stopped_at=runs[0], channel="old-name")
    before, _ = _figures(engine, now)
    last = before.last_stopped
    with transaction(engine) as connection:
        assert clear_old_workers(connection, now) == 20 + 19
    figures, causes = _figures(engine, now)
    assert sorted(w["worker_id"] for w in figures.workers) == [
        "killed",
        "w00/old-name",
        "w19/site",
        "w20",
        "w21",
    ]
    assert figures.last_stopped == last  # the last stop is said as before
    assert figures.pause == before.pause and causes == []
