"""One worker process: the services every loop shares, and the delivery loops beside them.

A cycle is intake -> sweep -> (claim -> deliver -> record)*: the intake service takes the
staging rows in and the sweeper tidies the queue in the take-in's transaction, then each loop
drains what is due for its channel, asking between its batches whether the next take-in is due
(``Beside``) and reporting through the reporter every SHARE_EVERY. This version runs one loop,
the channel of the settings it is given (``settings.channels.only_channel``); a loop takes its
channel's settings and target, so that several can run side by side, and a stop reaches every
loop's batch in flight (``DeliveryLoop.request_stop``).

``Worker`` keeps the names the runner, the composition root and the tests know: what belongs
to the loop (its pace, breaker, pause) is read through to it.
"""

from __future__ import annotations

import random
import time
from datetime import datetime

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.domain.breaker import CircuitBreaker
from exchange.domain.clock import SYSTEM_MONOTONIC, Clock, Monotonic
from exchange.domain.pace import Pace
from exchange.domain.pause import PauseCause
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision, RetryPolicy
from exchange.intake.sources.common import Source
from exchange.queue import control, lease
from exchange.queue.idle import is_idle
from exchange.settings import Settings
from exchange.targets.base import Target
from exchange.worker.common import CycleReport, Metrics
from exchange.worker.intake import IntakeService
from exchange.worker.loop import DeliveryLoop
from exchange.worker.reporter import Reporter
from exchange.worker.sweeper import Sweeper


class Worker:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        target: Target,
        clock: Clock,
        *,
        staging_engine: Engine | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
        source: Source | None = None,
        monotonic: Monotonic | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.staging_engine = staging_engine
        self.clock = clock
        self.monotonic = monotonic or SYSTEM_MONOTONIC
        self._metrics = metrics or Metrics()  # the base records nothing: metrics off
        self.worker_id = settings.worker_id
        self.kinds = settings.policies
        self.started_at = clock.now()
        self.stopping = False
        self.intake = IntakeService(
            settings,
            engine,
            self.monotonic,
            staging_engine=staging_engine,
            source=source,
        )
        self.sweeper = Sweeper(settings, self.monotonic)
        self.reporter = Reporter(
            settings, engine, clock, self.monotonic, started_at=self.started_at, source=source
        )
        self.loop = DeliveryLoop(
            settings,
            engine,
            target,
            clock,
            self.monotonic,
            reports=self.reporter,
            metrics=self._metrics,
            rng=rng,
        )
        self.loops = (self.loop,)
        for loop in self.loops:
            self.reporter.loops.append(loop.heartbeat_values)
        self._beside = _Beside(self)

    def request_stop(self) -> None:
        """Every loop lets its requests in flight finish and records them, hands its batch's
        unsent messages back at once (uncharged) and stops claiming."""
        self.stopping = True
        for loop in self.loops:
            loop.request_stop()

    # -- the cycle ---------------------------------------------------------------------

    async def cycle(self) -> CycleReport:
        started = time.perf_counter()
        try:
            report = await self._cycle()
        except Exception:
            self._metrics.cycle_failed()
            raise
        now = self.clock.now()
        self._metrics.cycle_finished(
            self.engine,
            now=now,
            seconds=time.perf_counter() - started,
            breaker=self.loop.breaker.state(now),
            paused=self.loop.paused,
        )
        return report

    async def _cycle(self) -> CycleReport:
        report = CycleReport()
        await self.intake.pull()
        self._take_in(report, sweep=True)
        for loop in self.loops:
            await loop.recheck_withheld()
        now = self.clock.now()
        for loop in self.loops:
            loop.share_site(now)
        for loop in self.loops:
            await loop.drain(report, self._beside)
        self.reporter.heartbeat()
        return report

    def _take_in(self, report: CycleReport, *, sweep: bool = False) -> bool:
        """Intake, the sweeper, and the operator's pause: what a cycle does before it claims
        (and again every poll interval of a long one). Returns whether an operator paused
        delivery.

        The sweeper sweeps the whole queue when ``sweep`` is asked (a cycle's start) or due
        (``Sweeper.due``); otherwise it coalesces only the aggregates this take-in brought
        messages for."""
        now = self.clock.now()
        at = self.intake.begin()
        sweep = sweep or self.sweeper.due(at)
        since = None if sweep else self.intake.last_message_id()
        taken = self.intake.take(now)
        report.taken += taken.taken
        self._metrics.intake(taken)
        paused = any(loop.paused_reason for loop in self.loops)
        with transaction(self.engine) as connection:
            swept = self.sweeper.sweep(
                connection, now, whole=sweep, since=since if taken.messages else None
            )
            # An operator's pause (the workbench) holds every worker from this cycle on.
            held = control.operator_pause(connection) is not None
            resumed_at = control.resumed_at(connection) if paused else None
        for loop in self.loops:
            if resumed_at is not None:
                loop.resumed(resumed_at)
            loop.operator_paused = held
        report.cancelled += swept.cancelled + swept.gaps
        self._metrics.quarantined(Reason.SEQUENCE_GAP, swept.gaps)
        self._metrics.quarantined(Reason.RETRY_LIMIT, swept.expired)
        return held

    async def aclose(self) -> None:
        """Close the targets' connections and the source's."""
        try:
            for loop in self.loops:
                await loop.aclose()
        finally:
            await self.intake.aclose()

    # -- what the worker tells about itself ------------------------------------------------

    async def report(self) -> None:
        """A heartbeat off the event loop (``runner.reporting``'s every REPORT_EVERY_S); the
        first of a run also clears the rows of workers silent for a day."""
        await self.reporter.report()

    def retire(self) -> None:
        """A clean stop: the worker's row is marked stopped; its last word about the site
        stays on it (``Reporter.retire``)."""
        now = self.clock.now()
        self.reporter.retire(now)
        for loop in self.loops:
            loop.tell_stopped(now)

    def idle(self) -> bool:
        """Nothing left that this service could move without a person (contract 6); an
        operator's pause is such a person's decision."""
        if not self.intake.source_idle():
            return False  # the broker had something ready at the last pull
        return self.loop.operator_paused or is_idle(
            self.engine, self.staging_engine, self.kinds, [loop.channel_id for loop in self.loops]
        )

    # -- the names the runner, the composition root and the tests know ---------------------

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: Metrics) -> None:
        self._metrics = metrics
        for loop in self.loops:
            loop.metrics = metrics

    @property
    def source(self) -> Source | None:
        return self.intake.source

    @property
    def target(self) -> Target:
        return self.loop.target

    @property
    def rng(self) -> random.Random:
        return self.loop.rng

    @property
    def policy(self) -> RetryPolicy:
        return self.loop.policy

    @property
    def breaker(self) -> CircuitBreaker:
        return self.loop.breaker

    @property
    def pace(self) -> Pace:
        return self.loop.pace

    @property
    def paused_reason(self) -> str | None:
        return self.loop.paused_reason

    @property
    def pause_cause(self) -> PauseCause | None:
        return self.loop.pause_cause

    @property
    def unreachable_since(self) -> datetime | None:
        return self.loop.unreachable_since

    @property
    def write_refused(self) -> bool:
        return self.loop.write_refused

    @property
    def operator_paused(self) -> bool:
        return self.loop.operator_paused

    @property
    def requests_sent(self) -> int:
        return self.loop.requests_sent

    @property
    def _write_try_at(self) -> float:
        return self.loop._write_try_at

    @_write_try_at.setter
    def _write_try_at(self, at: float) -> None:
        self.loop._write_try_at = at

    def pace_figures(self, now: float) -> dict[str, float | int | None]:
        return self.loop.pace_figures(now)

    async def _deliver(self, batch: lease.Batch) -> list[tuple[lease.Leased, Decision]]:
        return await self.loop._deliver(batch)


class _Beside:
    """The services as one channel's loop asks them between its batches: a take-in every poll
    interval, a report (and a new count of the workers sharing the site) every SHARE_EVERY."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def take_in_due(self) -> bool:
        return self._worker.intake.due()

    async def take_in(self, report: CycleReport) -> bool:
        await self._worker.intake.pull()
        return self._worker._take_in(report)

    def batch_done(self) -> None:
        worker = self._worker
        if worker.reporter.due():  # a long cycle
            worker.reporter.heartbeat()
            now = worker.clock.now()
            for loop in worker.loops:
                loop.share_site(now)
