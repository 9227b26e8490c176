"""``exchange run`` stops on a signal with exit 0 and ``stopped`` as its last line (contract 6),
whatever the scheduler was doing at that moment: even a job handed to the event loop but not
yet started ends quietly instead of being logged as "Error running job"."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange import runner
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, run_worker
from exchange.report.schedule import ScheduledExport


@pytest.mark.parametrize("wakeups", [2, 3, 5])
def test_a_stop_right_after_a_cycle_is_handed_to_the_loop_logs_no_error_and_exits_0(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    wakeups: int,
) -> None:
    """The stop arrives between the scheduler creating the cycle's task and the task's first
    step (the window CI once hit with SIGTERM): the task must not be cancelled into an error."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    seen = {"wakeups": 0, "cycles": 0}

    class Scheduler(AsyncIOScheduler):
        def start(self, *args: Any, **kwargs: Any) -> None:
            def submitted(event: JobSubmissionEvent) -> None:
                seen["cycles"] += event.job_id == "cycle"

            self.add_listener(submitted, EVENT_JOB_SUBMITTED)
            super().start(*args, **kwargs)

        def wakeup(self) -> None:
            # The signal handler runs in the same turn of the loop as the scheduler's timer,
            # just before it: the stop is set, then the due jobs' tasks are created.
            seen["wakeups"] += 1
            if seen["wakeups"] == wakeups:
                stops[-1]()
            super().wakeup()

    monkeypatch.setattr(runner, "AsyncIOScheduler", Scheduler)
    worker = bootstrap.worker(fast_settings(db_url, site.url), engine)
    codes: list[int] = []

    async def scenario(_: Any) -> None:
        codes.append(await asyncio.wait_for(runner.run_forever(worker, poll_interval=0.01), 10))
        # A cancelled job's callback is a ready callback: the loop runs it at its next turn,
        # which this sleep lets come however slow the machine (no margin of time involved).
        # The 10 s above is a hang guard: the stop comes within a few 0.01 s wakeups.
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.INFO):
        run_worker(worker, scenario)

    assert [0] == codes
    assert seen["cycles"] >= 1  # a cycle's task was created as the stop arrived
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert [] == errors
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("exchange")]
    assert "stopped" == ours[-1]


def test_a_stop_while_the_scheduled_report_is_written_waits_for_it_and_logs_no_error(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """The report export runs in a thread at start; a stop in the middle of it is no error,
    and the report is still written in full before the process ends."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    exporting = threading.Event()
    stopped = threading.Event()
    original = ScheduledExport.run

    def slow_run(self: ScheduledExport) -> list[Path]:
        """The export goes on only once the stop was asked for: in the middle of it whatever
        the load (a fixed sleep would race the stop on a loaded machine)."""
        exporting.set()
        assert stopped.wait(10), "no stop within 10 s"  # a hang guard, not a margin
        return original(self)

    monkeypatch.setattr(ScheduledExport, "run", slow_run)
    reports = tmp_path / "reports"
    settings = fast_settings(db_url, site.url, report_dir=reports)
    worker = bootstrap.worker(settings, engine)
    codes: list[int] = []

    async def scenario(_: Any) -> None:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=0.01))
        while not exporting.is_set():
            await asyncio.sleep(0.01)
        stops[-1]()
        stopped.set()
        codes.append(await asyncio.wait_for(running, 10))

    with caplog.at_level(logging.INFO):
        run_worker(worker, scenario)

    assert [0] == codes
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert [] == errors
    assert any(reports.iterdir())  # the export in flight finished before the process ended
