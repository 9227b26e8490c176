"""``exchange run``: the scheduled service, one cycle, or cycles until idle.

The forever mode is an APScheduler interval job (one instance at a time, missed runs
coalesced). SIGINT/SIGTERM let the batch in flight finish and be recorded, then exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from exchange.db.wake import watch
from exchange.errors import DatabaseUnavailable
from exchange.ops import prune
from exchange.report import schedule as report_schedule
from exchange.report.notice import Notifier
from exchange.worker import REPORT_EVERY_S, CycleReport, Worker

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_TIMED_OUT = 3
IDLE_PAUSE_S = 0.05


def run(main: Coroutine[Any, Any, int]) -> int:
    """``asyncio.run(main)``, on uvloop's event loop when uvloop is installed (a dependency but
    on Windows), else asyncio's. Measured against bench/fastsite.py (median of 3 runs of 6,000
    requests): the site client 4,083 -> 4,785 requests/s, aiohttp alone 10,724 -> 15,458."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


async def _safe_cycle(worker: Worker, *, wait: bool = True) -> CycleReport | None:
    """A failed cycle is logged and the next one tries again; the service keeps running.
    ``wait``: until every channel's loop drained (else each drains on its own, as ``run`` and
    ``run --until-idle`` have them, ``Worker.cycle``)."""
    try:
        return await worker.cycle(wait=wait)
    except DatabaseUnavailable as exc:
        log.error("cycle failed: %s; the next cycle will try again", exc)
    except Exception:
        log.exception("cycle failed; the next cycle will try again")
    return None


def _install_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop)
        except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
            signal.signal(signum, lambda *_: loop.call_soon_threadsafe(stop))


@contextlib.asynccontextmanager
async def reporting(worker: Worker, every: float = REPORT_EVERY_S) -> AsyncIterator[None]:
    """While the worker runs: its heartbeat now (a start clears a stop) and then every
    ``every`` seconds, whatever a cycle waits for (contract 15: a worker quiet for 30 s is
    shown silent), a stop's wait for the requests in flight included (each up to
    EXCHANGE_HTTP_TIMEOUT: a worker still finishing its batch is not silent). A failed write is
    one log line; the next one tries again. The clean stop's mark comes after the block (the
    runner's event loop closed, no write of a beat still in a thread)."""

    async def beat() -> None:
        while True:
            try:
                await worker.report()
            except DatabaseUnavailable as exc:
                log.error("heartbeat not written: %s; the next one tries again", exc)
            except Exception:
                log.exception("heartbeat not written; the next one tries again")
            await asyncio.sleep(every)

    async with beside(beat()):
        yield


@contextlib.asynccontextmanager
async def beside(job: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """``job`` runs as a task while the block runs, and is cancelled (and awaited) after."""
    task = asyncio.create_task(job)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def run_once(worker: Worker) -> int:
    _install_signals(asyncio.get_running_loop(), worker.request_stop)
    await worker.cycle()
    return EXIT_OK


async def run_until_idle(
    worker: Worker,
    *,
    max_seconds: float | None,
    poll_interval: float,
    on_cycle: Callable[[CycleReport | None], None] | None = None,
) -> int:
    """Cycles until nothing is left that the service could move without a person
    (``Worker.idle``): exit 0; at ``max_seconds`` exit 3; a stop (SIGINT/SIGTERM) exit 0. Each
    channel's loop drains as a task of its own, as in ``run`` (``Worker.cycle(wait=False)``):
    when one loop's drain ends, the next cycle takes rows in and starts that loop's next drain
    while another's goes on, so a slow channel never holds back another's drains (contract 13:
    each at its own pace). Whether all is idle is asked when no loop drains. ``on_cycle`` is
    told, after each wait for a drain, the take-in's and the ended drains' report (None: the
    cycle failed)."""
    loop = asyncio.get_running_loop()
    _install_signals(loop, worker.request_stop)
    started = loop.time()
    timed_out = False
    pause = min(poll_interval, IDLE_PAUSE_S)

    def time_is_up() -> None:
        nonlocal timed_out
        timed_out = True
        worker.request_stop()

    # --max-seconds ends the run even inside a cycle that would not end by itself: the stop
    # lets the requests in flight finish and hands the rest back, as SIGTERM does.
    deadline = None if max_seconds is None else loop.call_later(max_seconds, time_is_up)
    try:
        async with reporting(worker):
            try:
                while not worker.stopping:  # a stop during the pause below: no further cycle
                    report = await _safe_cycle(worker, wait=False)
                    ended = await worker.drains_ended()  # a stop ends every drain
                    rested = loop.time() + pause
                    if ended.batches == 0:
                        # The loops that ended are caught up: their next drain waits the pause,
                        # in which the others may end too (and all be found idle below).
                        ended.add(await worker.drains_ended(every=True, timeout=pause))
                    if on_cycle:
                        on_cycle(None if report is None else report.add(ended))
                    if worker.stopping:  # by a signal, or the time is up
                        break
                    if not worker.draining():
                        try:
                            if worker.idle():
                                return EXIT_OK
                        except DatabaseUnavailable as exc:
                            log.error("%s", exc)
                    if max_seconds is not None and loop.time() - started >= max_seconds:
                        time_is_up()
                        break
                    if ended.batches == 0:
                        await asyncio.sleep(max(0.0, rested - loop.time()))
            finally:
                # Every loop's batch in flight is recorded before the run ends (after a
                # failure here too: the loops are stopped first).
                if worker.draining():
                    worker.request_stop()
                    await worker.drained()
        if not timed_out:  # stopped by a signal
            return EXIT_OK
    finally:
        if deadline is not None:
            deadline.cancel()
    log.warning("not idle after %.1f s: giving up (exit %d)", max_seconds, EXIT_TIMED_OUT)
    return EXIT_TIMED_OUT


async def notify_step(notifier: Notifier) -> None:
    """One notification step in a thread (database, SMTP or HTTP block): never on the event
    loop, never in the way of a cycle; whatever fails is one log line."""
    try:
        await asyncio.to_thread(notifier.step)
    except DatabaseUnavailable as exc:
        log.error("notification check failed: %s", exc)
    except Exception:
        log.exception("notification check failed")


async def run_forever(
    worker: Worker, *, poll_interval: float, notifier: Notifier | None = None
) -> int:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    busy = asyncio.Lock()

    async def tick() -> None:
        if worker.stopping:
            return
        async with busy:
            # Each channel's loop drains as a task of its own: a slow or down channel's batch
            # never holds back the next take-in, nor another channel's drain (contract 13).
            await _safe_cycle(worker, wait=False)

    def stop() -> None:
        log.info("stop requested: finishing the batch in flight")
        worker.request_stop()
        stopped.set()

    _install_signals(loop, stop)
    scheduler = AsyncIOScheduler(event_loop=loop, timezone=UTC)
    scheduler.add_job(
        tick,
        "interval",
        seconds=poll_interval,
        next_run_time=datetime.now(UTC),
        max_instances=1,
        coalesce=True,
        id="cycle",
    )
    if notifier is not None:
        # A job of its own (one at a time), so a slow mail server never delays a cycle.
        scheduler.add_job(
            _notify_job(notifier, worker),
            "interval",
            seconds=poll_interval,
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
            id="notify",
        )
    prune.schedule(scheduler, prune_job(worker))
    report_schedule.schedule(
        scheduler,
        worker.settings,
        worker.engine,
        clock=worker.clock,
        stopping=lambda: worker.stopping,
    )
    scheduler.start()
    log.info("running: a cycle every %g s as %s", poll_interval, worker.worker_id)
    end_wake_ups = _wake_on_new_rows(worker, tick)
    async with reporting(worker):
        await stopped.wait()
        scheduler.pause()  # no job is handed to the loop from now on
        await end_wake_ups()
        # The cycle in flight finishes and records its outcomes first: shutting the scheduler
        # down while it runs would cancel it between the site's answer and the record.
        async with busy:
            pass
        await worker.drained()  # every channel's batch in flight recorded
    # A job whose task the scheduler created in the same turn of the loop as the stop has not
    # taken its first step yet: one turn lets it see the stop and return, where shutdown would
    # cancel it into an "Error running job" line.
    await asyncio.sleep(0)
    scheduler.shutdown(wait=False)
    log.info("stopped")
    return EXIT_OK


def _wake_on_new_rows(
    worker: Worker, tick: Callable[[], Coroutine[Any, Any, None]]
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A cycle as soon as rows are staged (exchange/db/wake.py: NOTIFY on PostgreSQL, PRAGMA
    data_version on SQLite), beside the poll: a wake-up during a cycle runs one more cycle
    right after it (``tick`` waits for the one in flight), so a row committed at any moment is
    taken within a cycle. Returns what ends it at a stop: the watch is cancelled, but a cycle it
    woke finishes and records its batch like the poll's (cancelling it there left a delivered
    batch ``in_progress`` until its lease ran out: found by the several-workers test, 1 run in
    3)."""
    wake = asyncio.Event()
    watching = watch(worker.engine, worker.staging_engine, wake.set)
    if watching is None:

        async def nothing() -> None:
            return None

        return nothing

    async def cycles() -> None:
        while not worker.stopping:
            await wake.wait()
            wake.clear()
            await tick()  # returns at once once the worker is stopping

    listening = asyncio.create_task(watching.run())
    cycling = asyncio.create_task(cycles())

    async def end() -> None:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        wake.set()  # a loop waiting for a wake-up sees the stop; one in a cycle ends it
        await cycling

    return end


def _notify_job(notifier: Notifier, worker: Worker) -> Callable[[], Coroutine[Any, Any, None]]:
    async def job() -> None:
        if worker.stopping:
            return
        # A stop while a message is on its way: the loop ends without waiting for the mail
        # server (its thread ends within EXCHANGE_HTTP_TIMEOUT); not an error to report.
        with contextlib.suppress(asyncio.CancelledError):
            await notify_step(notifier)

    return job


def prune_job(worker: Worker) -> Callable[[], Coroutine[Any, Any, None]]:
    """The daily prune of ``exchange run``, on the worker's databases and clock, stopping with
    it."""
    return prune.scheduled_job(
        worker.engine,
        worker.staging_engine,
        clock=worker.clock,
        retention_days=worker.settings.retention_days,
        kinds=worker.kinds,
        stopping=lambda: worker.stopping,
    )
