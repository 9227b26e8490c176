"""One worker process: the services every loop shares, and the delivery loops beside them.

A cycle is intake -> sweep -> (claim -> deliver -> record)* per channel: the intake service
takes the staging rows in and the sweeper tidies the queue in the take-in's transaction, then
each configured channel's loop drains what is due for its channel, every loop as a task of its
own (contract 13: a channel that is down, paused or slow never delays another), asking between
its batches whether the next take-in is due (``Beside``, one take-in at a time for all of them)
and reporting through the reporter every SHARE_EVERY. ``cycle()`` waits for every loop's drain
(``run --once``, the tests); ``cycle(wait=False)``, what ``run`` runs every poll interval and
``run --until-idle`` whenever a loop's drain ended, takes rows in and leaves each loop draining
on its own: a loop still busy with a slow site keeps its drain, a loop that finished starts
another, so the other channels' cycles go on at their own pace. ``drains_ended()`` waits for a
loop's drain to end (``--until-idle``: its next cycle, and whether all is idle once none
drains). A stop reaches every loop's batch in flight (``DeliveryLoop.request_stop``), and
``drained()`` waits for them.

Each loop takes its channel's settings (the global ones with the channel's over them) and its
own target (``Channel`` below). ``Worker`` keeps the names the runner, the composition root and
the tests know: what belongs to a loop (its pace, breaker, pause) is read through to the first.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from exchange import logs
from exchange.db.engine import transaction
from exchange.delivery.probe import PROBE_TURN
from exchange.domain.breaker import CircuitBreaker
from exchange.domain.clock import SYSTEM_MONOTONIC, Clock, Monotonic
from exchange.domain.pace import Pace
from exchange.domain.pause import PauseCause
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision, RetryPolicy
from exchange.errors import DatabaseUnavailable
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

log = logging.getLogger("exchange.worker")  # the name operators filter on (docs/monitoring.md)


@dataclass(frozen=True)
class Channel:
    """One loop's channel as the process builds it: its name (None: the one channel of a
    configuration without EXCHANGE_CHANNELS, delivered as before channels), its settings, its
    target and its id in the registry."""

    name: str | None
    settings: Settings
    target: Target
    channel_id: int


def probe_turn_name(channel: str | None) -> str:
    """The ``target_locks`` row of a channel's probe turn: ``probe:<channel>``, one per site
    (the one channel keeps the row it always had)."""
    return PROBE_TURN if channel is None else f"probe:{channel}"


class Worker:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        channels: Sequence[Channel],
        clock: Clock,
        *,
        staging_engine: Engine | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
        source: Source | None = None,
        monotonic: Monotonic | None = None,
    ) -> None:
        if not channels:
            raise ValueError("a worker delivers to at least one channel")
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
        built = []
        for channel in channels:
            row = self.reporter.add_loop(channel.name or channel.settings.target)
            loop = DeliveryLoop(
                channel.settings,
                engine,
                channel.target,
                clock,
                self.monotonic,
                reports=row,
                metrics=self._metrics.for_channel(channel.name),
                rng=rng,
                channel=channel.name,
                channel_id=channel.channel_id,
                probe_turn=probe_turn_name(channel.name),
                holder=row.row_id,
            )
            row.told = loop.heartbeat_values
            built.append(loop)
        self.loops: tuple[DeliveryLoop, ...] = tuple(built)
        self.loop = self.loops[0]
        # One take-in at a time, whichever loop asks for it between its batches.
        self._taking_in = asyncio.Lock()
        # ``cycle(wait=False)``'s drains, each ending with its report (None: it failed)
        self._draining: dict[int, asyncio.Task[CycleReport | None]] = {}

    def request_stop(self) -> None:
        """Every loop lets its requests in flight finish and records them, hands its batch's
        unsent messages back at once (uncharged) and stops claiming."""
        self.stopping = True
        for loop in self.loops:
            loop.request_stop()

    # -- the cycle ---------------------------------------------------------------------

    async def cycle(self, *, wait: bool = True) -> CycleReport:
        """Take rows in, then let every loop drain. ``wait``: until each loop's drain ended;
        else a loop drains as a task of its own that the next cycles leave alone until it
        ends (``drained`` waits for them), and the report counts the take-in and the drains
        that ended since, unless ``drains_ended`` counted them."""
        started = time.perf_counter()
        try:
            report = await self._cycle(wait)
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
        for loop in self.loops:
            loop.metrics.loop_state(loop.breaker.state(now))
        return report

    async def _cycle(self, wait: bool) -> CycleReport:
        report = CycleReport()
        # A cycle's start sweeps the whole queue; while a loop still drains, the take-in is
        # one of its poll interval's, sweeping when due, as a long cycle's always was.
        busy = self.draining()
        async with self._taking_in:
            await self.intake.pull()
            self._take_in(report, sweep=not busy)
        if not wait:
            for index, loop in enumerate(self.loops):
                task = self._draining.get(index)
                if task is None or task.done():
                    ended = None if task is None or task.cancelled() else task.result()
                    if ended is not None:
                        report.add(ended)
                    self._draining[index] = asyncio.create_task(self._drain_apart(loop))
        elif len(self.loops) == 1:
            await self._drain(self.loop, report)
        else:
            failed = [
                outcome
                for outcome in await asyncio.gather(
                    *(self._drain(loop, report) for loop in self.loops), return_exceptions=True
                )
                if isinstance(outcome, BaseException)
            ]
            if failed:
                raise failed[0]
        if not busy or self.reporter.due():
            self.reporter.heartbeat()
        return report

    async def _drain(self, loop: DeliveryLoop, report: CycleReport) -> None:
        """One loop's part of a cycle: its share of the site counted (before the loop's
        first request, ``share_site_at_start``), its withheld prices asked about, then its
        drain."""
        # contract 13: every line the loop writes names its channel (none without
        # EXCHANGE_CHANNELS: the one channel's lines read as before)
        with logs.bound(channel=loop.channel):
            await loop.share_site_at_start()
            await loop.recheck_withheld()
            await loop.drain(report, _Beside(self, loop))

    async def _drain_apart(self, loop: DeliveryLoop) -> CycleReport | None:
        """A loop's drain as a task of its own (``cycle(wait=False)``), ending with its report,
        or with None after a failure, logged with its channel in the words of a failed cycle
        (docs/guarantees.md); the next cycle starts the loop's next drain."""
        report = CycleReport()
        try:
            await self._drain(loop, report)
        except DatabaseUnavailable as exc:
            self._metrics.cycle_failed()
            log.error("channel %s: cycle failed: %s; the next cycle will try again", loop.name, exc)
        except Exception:
            self._metrics.cycle_failed()
            log.exception("channel %s: cycle failed; the next cycle will try again", loop.name)
        else:
            return report
        return None

    async def drains_ended(
        self, *, every: bool = False, timeout: float | None = None
    ) -> CycleReport:
        """Wait until a loop's drain started by ``cycle(wait=False)`` ends (``every``: each
        of them), or ``timeout`` passes; the report of the drains that ended, each counted once
        (what ``run --until-idle`` goes by). Another loop's drain goes on meanwhile."""
        pending = [task for task in self._draining.values() if not task.done()]
        if pending:
            when = asyncio.ALL_COMPLETED if every else asyncio.FIRST_COMPLETED
            await asyncio.wait(pending, timeout=timeout, return_when=when)
        report = CycleReport()
        for index, task in list(self._draining.items()):
            if task.done():
                del self._draining[index]
                ended = None if task.cancelled() else task.result()
                if ended is not None:
                    report.add(ended)
        return report

    async def drained(self) -> None:
        """Wait until every loop's drain started by ``cycle(wait=False)`` ended (after a stop:
        each loop's batch in flight recorded)."""
        pending = [task for task in self._draining.values() if not task.done()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def draining(self) -> bool:
        """Whether a loop's drain started by ``cycle(wait=False)`` still runs."""
        return any(not task.done() for task in self._draining.values())

    async def take_in_between(self, loop: DeliveryLoop, report: CycleReport) -> bool:
        """A take-in a loop asks for between its batches, unless another loop's (or a cycle's)
        just ran; whether an operator pauses this loop's delivery."""
        async with self._taking_in:
            if self.intake.due():
                with logs.unbound():  # intake is every channel's, not this loop's
                    await self.intake.pull()
                    self._take_in(report)
        return loop.operator_paused

    def _take_in(self, report: CycleReport, *, sweep: bool = False) -> None:
        """Intake, the sweeper, and the operator's pauses: what a cycle does before it claims
        (and again every poll interval of a long one). Each loop learns whether an operator
        paused it (every channel's pause, or its own).

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
        with transaction(self.engine) as connection:
            swept = self.sweeper.sweep(
                connection, now, whole=sweep, since=since if taken.messages else None
            )
            # An operator's pause (the workbench) holds every loop it names from this cycle on.
            held = [
                control.operator_pause(connection, loop.channel) is not None for loop in self.loops
            ]
            resumed = [
                control.resumed_at(connection, loop.channel) if loop.paused_reason else None
                for loop in self.loops
            ]
        for loop, paused, resumed_at in zip(self.loops, held, resumed, strict=True):
            if resumed_at is not None:
                loop.resumed(resumed_at)
            loop.operator_paused = paused
        report.cancelled += swept.cancelled + swept.gaps
        self._metrics.quarantined(Reason.SEQUENCE_GAP, swept.gaps)
        self._metrics.quarantined(Reason.RETRY_LIMIT, swept.expired)

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
        """Nothing left that this service could move without a person (contract 6), on the
        channels it delivers to (contract 13: a registered channel it does not serve is not
        waited for); an operator's pause of a channel is such a person's decision."""
        if not self.intake.source_idle():
            return False  # the broker had something ready at the last pull
        moving = [loop.channel_id for loop in self.loops if not loop.operator_paused]
        if not moving:
            return True
        return is_idle(self.engine, self.staging_engine, self.kinds, moving)

    # -- the names the runner, the composition root and the tests know ---------------------

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: Metrics) -> None:
        self._metrics = metrics
        for loop in self.loops:
            loop.metrics = metrics.for_channel(loop.channel)

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
    interval (one at a time for every loop), a report (and a new count of the workers sharing
    the site) every SHARE_EVERY."""

    def __init__(self, worker: Worker, loop: DeliveryLoop) -> None:
        self._worker = worker
        self._loop = loop

    def take_in_due(self) -> bool:
        return self._worker.intake.due()

    async def take_in(self, report: CycleReport) -> bool:
        return await self._worker.take_in_between(self._loop, report)

    def batch_done(self) -> None:
        worker = self._worker
        if worker.reporter.due():  # a long cycle
            worker.reporter.heartbeat()
            now = worker.clock.now()
            for loop in worker.loops:
                loop.share_site(now)
