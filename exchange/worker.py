"""One cycle of the service: intake -> coalesce -> (claim -> deliver -> record)*.

Database work happens in short transactions between HTTP calls, never across one. While a
batch is out, a renewal task keeps its lease alive, so a slow site does not let a second
worker take the same aggregates. The circuit breaker and the 401/403 pause decide how much
may be claimed; what a batch could not send is handed back uncharged.

The worker knows the shop only through its ``Target`` (exchange/targets/base.py): how a batch
travels, and one classification per message. What each classification means for the
message (charged or not, its next state, when it goes again) is ``domain.retry.decide``'s.

How fast and how many requests go is the site's pace (``domain.pace``, contract 5c): every
request waits its turn (the pace's hold, its rate, its limit on requests in flight); every
answer teaches the pace; a refusal that speaks about the site (429, 502-504 while others are
refused too, any temporary failure while the site's health check fails) slows the whole worker
and is not charged to the message. A target whose ``send`` is one request is paced around it;
a ``PacedTarget`` (WooCommerce, Bitrix: lookups, batches, read-backs, health checks, each step
of an exchange) takes one turn per request of its own through the worker's ``Pacer``
(``_SitePacer``), and the pace learns each of those requests' answers instead of the messages'.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import messages, workers
from exchange.db.target_lock import DbLock
from exchange.db.worker_rows import clear_old_workers
from exchange.delivery import withheld
from exchange.delivery.gate import InFlightGate
from exchange.delivery.probe import PROBE_TURN, ProbeTurn
from exchange.domain.breaker import BreakerState, CircuitBreaker
from exchange.domain.clock import SYSTEM_MONOTONIC, Clock, Monotonic
from exchange.domain.pace import Cause, Pace
from exchange.domain.pause import PauseCause, pause_cause
from exchange.domain.reasons import Reason
from exchange.domain.retry import (
    Decision,
    RetryPolicy,
    decide,
    delivered,
    not_sent,
    parse_retry_after,
)
from exchange.domain.states import Event, State
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import BrokerUnavailable, ConfigurationError, DatabaseUnavailable
from exchange.failpoints import failpoint
from exchange.intake import staging_table as intake
from exchange.intake.sources.common import Source
from exchange.intake.staging_table import IntakeReport
from exchange.logs import log_event
from exchange.queue import coalesce, control, deliveries, lease, record
from exchange.queue.idle import is_idle
from exchange.settings import Settings
from exchange.targets.base import OutgoingMessage, PacedTarget, Target
from exchange.targets.wire import STATUSES

log = logging.getLogger(__name__)
DETAIL_CAP = 200  # characters of a failure's detail in its outcome line
STOPPING = "not sent: the worker is stopping"
PROBE_WAITS = "not sent: the circuit breaker is half-open and one message probes"
HEALTH_TTL = 1.0  # seconds a health check's answer stands for the failures that follow
HOLD_BASE = 0.25  # seconds: the first hold after a site refusal without Retry-After (at most)
# What an attempt leaves to be tried again, and how often one cycle may do that to one
# aggregate (``_cycle``): once more within the cycle when its backoff has already passed.
_AGAIN = frozenset({State.DELAYED, State.NEW})
TRIES_PER_CYCLE = 2


def _excluded(tried: Counter[int], probed: Iterable[int]) -> list[int]:
    return sorted({a for a, n in tried.items() if n >= TRIES_PER_CYCLE}.union(probed))


SHARE_EVERY = 1.0  # seconds: in a long cycle, the worker reports and counts the others this often
# Contract 15: a running worker reports at least this often (``runner.reporting``), whatever its
# cycle waits for, so that one quiet for 30 s is shown silent and never one between reports.
REPORT_EVERY_S = 10.0


@dataclass
class CycleReport:
    taken: int = 0
    cancelled: int = 0
    batches: int = 0
    sent: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost_leases: int = 0


class Metrics:
    """What the worker tells as it works: its outbound port for metrics. This base records
    nothing (metrics are off); exchange.ops.metrics.PrometheusMetrics records them."""

    def intake(self, report: IntakeReport) -> None:
        """Staging rows taken this cycle."""

    def quarantined(self, reason: str, count: int = 1) -> None:
        """Messages quarantined outside a delivery answer (sequence gap, expired last lease)."""

    def claimed(self, batch: lease.Batch) -> None:
        """A batch was claimed (``batch.takeovers`` of its messages from an expired lease)."""

    def attempt(self, verdict: Verdict) -> None:
        """The site answered one request (or the request failed), classified."""

    def recorded(self, decisions: Iterable[Decision]) -> None:
        """The outcomes of a batch, after they were written."""

    def cycle_finished(
        self, engine: Engine, *, now: datetime, seconds: float, breaker: BreakerState, paused: bool
    ) -> None:
        """A cycle ended normally after ``seconds``; ``now`` is the worker's clock."""

    def cycle_failed(self) -> None:
        """A cycle raised; the runner logs it and tries again."""

    def refused(self, cause: Cause) -> None:
        """The site refused a request for a reason that speaks about the site (contract 5c)."""

    def pace(self, figures: dict[str, float | int | None]) -> None:
        """The site's pace after a batch (``Worker.pace_figures``)."""


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
        self.source = source  # a broker taken from at each cycle's intake (contract 12)
        self.engine = engine
        self.staging_engine = staging_engine
        self.target = target
        self.clock = clock
        # Seconds for the pace, the cycle's take-ins, the heartbeats, the write retry and the
        # health check's answer, and the clock the requests wait their turn on (the gate).
        self.monotonic = monotonic or SYSTEM_MONOTONIC
        self.rng = rng or random.Random()
        self.metrics = metrics or Metrics()  # the base records nothing: metrics off
        self.worker_id = settings.worker_id
        self.policy = RetryPolicy(
            settings.max_attempts, settings.retry_base_delay, settings.retry_max_delay
        )
        self.breaker = CircuitBreaker(settings.breaker_threshold, self.policy)
        self.pace = Pace(
            max_limit=settings.concurrency,
            max_delay=settings.retry_max_delay,
            hold_base=min(settings.retry_base_delay, HOLD_BASE),
            max_rate=settings.site_max_rate,
        )
        # Several workers on one site probe past their known-good rates one at a time
        # (exchange/delivery/probe.py): the turn is a row in target_locks, a guarded UPDATE.
        self.probe = ProbeTurn(
            self.pace,
            DbLock(engine, PROBE_TURN, settings.worker_id, clock),
            monotonic=self.monotonic.now,
            live_workers=lambda: self._live_workers(self.clock.now()),
            report=self._heartbeat_values,
            write_report=self._write_heartbeat,
        )
        self._reported_at = -math.inf  # the last heartbeat (monotonic)
        self.stopping = False
        self.gate = InFlightGate(
            self.pace, monotonic=self.monotonic, stopping=lambda: self.stopping
        )
        self._health_lock: asyncio.Lock | None = None
        self._health: tuple[float, bool] | None = None  # (checked at, site down)
        self.paused_reason: str | None = None
        self.unreachable_since: datetime | None = None  # the site gave no answer since (``_heard``)
        self.pause_cause: PauseCause | None = None  # which pause it is (domain/pause.py)
        # A refused write while reads are accepted (a read-only key): a GET proves nothing, so
        # the pause ends only by a write that succeeds, tried once every EXCHANGE_RETRY_MAX_DELAY
        # (``_write_turn``), or by ``exchange resume``. In memory: a restart starts unpaused.
        self.write_refused = False
        self._paused_at: datetime | None = None
        self._write_try_at = 0.0  # monotonic: the next real write while write_refused
        self._trying_write = False  # the one message now sent to find out whether writes work
        self._pause_told = True  # the pause's ERROR line was written (once per pause)
        self.operator_paused = False
        self.kinds = settings.policies
        self._stop_requested: asyncio.Event | None = None  # set by request_stop during a batch
        self._started: set[int] = set()  # pks of the batch in flight that went to the site
        self.started_at = clock.now()
        self.requests_sent = 0
        self._taken_in_at = -math.inf  # when intake last ran (monotonic)
        # A target that makes requests of its own within one send takes a turn for each.
        self._paced_inside = isinstance(target, PacedTarget)
        if isinstance(target, PacedTarget):
            target.pace_with(_SitePacer(self))
        self._swept_at = -math.inf  # when coalescing and the gap check last swept the queue
        self._sweep_cost = 0.0  # seconds that sweep took
        self._rechecked_at = -math.inf  # when the channel was last asked about withheld prices

    def request_stop(self) -> None:
        """Let the requests in flight finish (each within EXCHANGE_HTTP_TIMEOUT) and record
        them; hand the batch's unsent messages back at once (uncharged); stop claiming."""
        self.stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()
        self.gate.wake_all_threadsafe()

    # -- the cycle ---------------------------------------------------------------------

    async def cycle(self) -> CycleReport:
        started = time.perf_counter()
        try:
            report = await self._cycle()
        except Exception:
            self.metrics.cycle_failed()
            raise
        now = self.clock.now()
        self.metrics.cycle_finished(
            self.engine,
            now=now,
            seconds=time.perf_counter() - started,
            breaker=self.breaker.state(now),
            # Contract 15, one pause, one truth: what ``status`` calls ``delivery_paused``, as
            # this worker sees it (an operator's pause, or the site's refusal it met).
            paused=self.operator_paused or self.paused_reason is not None,
        )
        return report

    def _take_in(self, report: CycleReport, *, sweep: bool = False) -> bool:
        """Intake, coalescing, the gap and lease clocks, and the operator's pause: what a
        cycle does before it claims. Returns whether an operator paused delivery.

        Coalescing and the gap check sweep the whole queue when ``sweep`` is asked (a cycle's
        start) or due (``coalesce.sweep_due``); otherwise only the aggregates this take-in
        brought messages for are coalesced, and a take-in that brought none costs a few
        indexed reads whatever the backlog."""
        now = self.clock.now()
        self._taken_in_at = self.monotonic.now()
        sweep = sweep or coalesce.sweep_due(
            self._taken_in_at - self._swept_at, self._sweep_cost, self.settings.poll_interval
        )
        since = None if sweep else self._last_message_id()
        taken = intake.take(self.engine, self.staging_engine, self.settings.kinds, now)
        report.taken += taken.taken
        self.metrics.intake(taken)
        with transaction(self.engine) as connection:
            gaps = 0
            if sweep:
                started = self.monotonic.now()
                report.cancelled += coalesce.coalesce(connection, self.kinds, now)
                gaps = coalesce.quarantine_gaps(
                    connection, self.kinds, now, self.settings.gap_timeout
                )
                self._sweep_cost = self.monotonic.now() - started
                self._swept_at = self.monotonic.now()
            elif taken.messages:
                report.cancelled += coalesce.coalesce(connection, self.kinds, now, since=since)
            expired = lease.expire_exhausted(
                connection, now=now, max_attempts=self.settings.max_attempts
            )
            # An operator's pause (the workbench) holds every worker from this cycle on.
            held = control.operator_pause(connection) is not None
            resumed_at = control.resumed_at(connection) if self.paused_reason else None
        if resumed_at is not None and self._paused_at is not None and resumed_at > self._paused_at:
            log.warning("delivery resumed by an operator (exchange resume)")
            self._end_pause()
        report.cancelled += gaps
        self.operator_paused = held
        self.metrics.quarantined(Reason.SEQUENCE_GAP, gaps)
        self.metrics.quarantined(Reason.RETRY_LIMIT, expired)
        return held

    @functools.cached_property
    def channel_id(self) -> int:
        """The channel this worker delivers to: the one channel, read once."""
        with transaction(self.engine, read_only=True) as connection:
            return deliveries.one_channel(connection)

    def _last_message_id(self) -> int:
        """The highest message id now: what a take-in stores from here on lies above it."""
        with transaction(self.engine, read_only=True) as connection:
            return int(
                connection.execute(select(func.coalesce(func.max(messages.c.id), 0))).scalar_one()
            )

    async def _cycle(self) -> CycleReport:
        report = CycleReport()
        if self.source is not None:
            await self._pull_source()
        held = self._take_in(report, sweep=True)
        await self._recheck_withheld()
        self._share_site(self.clock.now())
        # Aggregates whose attempts in this cycle left them to be tried again: a cycle gives
        # each at most TRIES_PER_CYCLE such attempts, so that a failure the backoff makes due
        # at once (or one charged to nobody: the site's own trouble) ends the cycle instead of
        # looping in it; the next cycle's intake and coalescing come first.
        tried: Counter[int] = Counter()
        while not self.stopping and not held:
            # A backlog keeps a cycle going until it is drained: new staging rows are taken
            # in every poll interval meanwhile, so that a correction staged during a reload
            # gets its place at the head of the claim order (domain/urgency.py) within one
            # interval, not after the whole reload.
            # While the breaker probes, the cycle ends instead: the next one takes rows in
            # (a probe's cool-down can be shorter than a take, and a cycle of probes would
            # never end while the site is down).
            if (
                report.batches
                and self.monotonic.now() - self._taken_in_at >= self.settings.poll_interval
            ):
                if self.breaker.state(self.clock.now()) is not BreakerState.CLOSED:
                    break
                if self.source is not None:
                    await self._pull_source()
                held = self._take_in(report)
                if held:
                    break
            if self.paused_reason is not None and not await self._site_accepts_again():
                break
            now = self.clock.now()
            allowance = (
                1 if self._trying_write else self.breaker.allowance(now, self.settings.batch_size)
            )
            if allowance == 0:
                break
            probing = self.breaker.state(now) is BreakerState.HALF_OPEN
            with transaction(self.engine) as connection:
                batch = lease.claim(
                    connection,
                    worker=self.worker_id,
                    now=now,
                    limit=allowance,
                    lease_seconds=self.settings.lease_seconds,
                    kinds=self.kinds,
                    max_attempts=self.settings.max_attempts,
                    exclude=_excluded(tried, self.breaker.probed if probing else ()),
                    clock=self.clock.now,
                    channel_id=self.channel_id,
                )
            self.metrics.claimed(batch)
            failpoint("after-lease-commit")
            if not batch.messages and probing and self.breaker.probed:
                self.breaker.start_probing_again()
                continue
            if not batch.messages:
                break
            report.batches += 1
            batch_started = time.perf_counter()
            outcomes = await self._deliver(batch)
            tried.update(m.aggregate_id for m, d in outcomes if d.to_state in _AGAIN)
            with transaction(self.engine) as connection:
                recorded = record.record(
                    connection,
                    token=batch.token,
                    worker=self.worker_id,
                    now=self.clock.now(),
                    outcomes=outcomes,
                    kinds=self.kinds,
                )
            log_deliveries(outcomes, time.perf_counter() - batch_started)
            report.lost_leases += len(outcomes) - recorded
            self.metrics.recorded(decision for _, decision in outcomes)
            if recorded < len(outcomes):
                log.warning(
                    "%d outcomes not recorded: their lease passed to another worker",
                    len(outcomes) - recorded,
                )
            self._tell_pace()
            self._trying_write = False
            if self.monotonic.now() - self._reported_at >= SHARE_EVERY:  # a long cycle
                self._heartbeat()
                self._share_site(self.clock.now())
            for _, decision in outcomes:
                report.outcomes[decision.event.value] += 1
            report.sent += sum(1 for _, d in outcomes if d.event is not Event.RELEASED)
        self._heartbeat()
        return report

    async def _pull_source(self) -> None:
        """The broker's intents into staging, before the table is read: a broker that cannot
        be reached (it reconnects with a backoff) or that lost its queue never stops delivery
        of what is already in."""
        assert self.source is not None
        try:
            await self.source.pull()
        except BrokerUnavailable as exc:
            # One line per failure: a cycle that waits out the backoff is not news.
            log.log(logging.DEBUG if exc.said else logging.WARNING, "%s", exc)
        except ConfigurationError as exc:
            log.error("%s", exc)
        except Exception as exc:
            # The database refused what the source took (contract 15): the broker keeps what
            # was not acknowledged, and the staging table is read as ever.
            log.error(
                "%s: taking from the broker failed (%s); what it holds stays there",
                self.source.name,
                type(getattr(exc, "orig", None) or exc).__name__,
            )
            log.debug("the source's failure", exc_info=True)

    async def aclose(self) -> None:
        """Close the target's connections and the source's."""
        try:
            await self.target.aclose()
        finally:
            if self.source is not None:
                await self.source.aclose()

    # -- delivery ----------------------------------------------------------------------

    async def _deliver(self, batch: lease.Batch) -> list[tuple[lease.Leased, Decision]]:
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        renewal = asyncio.create_task(self._renew(batch))
        self._started = set()
        self._stop_requested = stop_requested = asyncio.Event()
        if self.stopping:
            stop_requested.set()
        hand_back = asyncio.create_task(self._hand_back_on_stop(batch, stop_requested))
        handed_back: set[int] = set()
        by_id = {m.message_id: m for m in batch.messages}
        try:
            requests = self.target.requests([_outgoing(m) for m in batch.messages])
            answered = await asyncio.gather(
                *(self._request([by_id[o.message_id] for o in r], r, semaphore) for r in requests)
            )
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            self._stop_requested = None
            if not stop_requested.is_set():
                hand_back.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                handed_back = await hand_back
        decided = {m.pk: d for pairs in answered for m, d in pairs}
        return [(m, decided[m.pk]) for m in batch.messages if m.pk not in handed_back]

    async def _hand_back_on_stop(self, batch: lease.Batch, stop: asyncio.Event) -> set[int]:
        """On a stop request, record the messages not sent yet as released (uncharged) and
        free their aggregates at once, so that another worker need not wait for the lease.
        Returns their pks (none when the record failed: they go back with the batch)."""
        await stop.wait()
        # Nothing is sent once stopping is set: the messages not started now never will be.
        unsent = [m for m in batch.messages if m.pk not in self._started]
        if not unsent:
            return set()
        try:
            recorded = await asyncio.to_thread(self._record_now, batch.token, unsent)
        except Exception as exc:  # the batch's own record hands them back instead
            log.warning("handing back %d unsent messages failed: %s", len(unsent), exc)
            return set()
        log.info("stopping: %d unsent messages handed back", recorded)
        return {m.pk for m in unsent}

    def _record_now(self, token: str, unsent: list[lease.Leased]) -> int:
        with transaction(self.engine) as connection:
            return record.record(
                connection,
                token=token,
                worker=self.worker_id,
                now=self.clock.now(),
                outcomes=[(m, not_sent(STOPPING, m.attempt)) for m in unsent],
                kinds=self.kinds,
                release_all=False,
            )

    async def _request(
        self,
        leased: list[lease.Leased],
        outgoing: list[OutgoingMessage],
        semaphore: asyncio.Semaphore,
    ) -> list[tuple[lease.Leased, Decision]]:
        """One request of the batch (one message, or several through a batch endpoint): each
        message judged as its own answer. Half-open, only the first message probes; the
        others wait, uncharged."""
        inside = self._paced_inside  # the target takes a turn per request of its own
        async with semaphore:
            held = self._held_back()
            if held is None and not inside:
                await self.gate.enter()
                held = self._held_back()
                if held is not None:
                    self.gate.leave()
            if held is not None:
                decisions = [not_sent(held, m.attempt) for m in leased]
            else:
                try:
                    for m in leased:
                        self._started.add(m.pk)
                    probing = self.breaker.is_open()
                    sent = 1 if probing else len(leased)
                    if not inside:
                        self.requests_sent += 1
                    sent_at = self.monotonic.now()
                    answers = await self.target.send(outgoing[:sent])
                finally:
                    if not inside:
                        self.gate.leave()
                failpoint("after-answer")
                answered_at = self.monotonic.now()
                decisions = []
                for m, c in zip(leased[:sent], answers, strict=True):
                    if c.verdict is Verdict.TEMPORARY:  # may speak about the site: _learn
                        site_delay = await self._learn(m, c, sent_at, answered_at, probing)
                    else:  # the pace learns the answer; no coroutine for the usual case
                        self._learn_answer(c, sent_at, answered_at)
                        site_delay = None
                    decisions.append(self._judge(m, c, probing, site_delay))
                for m, c in zip(leased[:sent], answers, strict=True):
                    # Only now: the items of one request do not corroborate each other.
                    self.pace.noticed(answered_at, m.aggregate, c.http_status)
                decisions += [not_sent(PROBE_WAITS, m.attempt) for m in leased[sent:]]
        outcomes = list(zip(leased, decisions, strict=True))
        for message, decision in outcomes:
            log_outcome(message, decision)
        return outcomes

    def _held_back(self) -> str | None:
        """Why nothing may be sent now (stopping, paused, breaker open), or None."""
        if self.stopping:
            return STOPPING
        if self.paused_reason is not None and not self._trying_write:
            return f"not sent: delivery paused ({self.paused_reason})"
        # Closed, the breaker has no time to compare (no clock read per request).
        if self.breaker.is_open() and self.breaker.state(self.clock.now()) is BreakerState.OPEN:
            return "not sent: the circuit breaker is open (site-wide failures)"
        return None

    # -- the site's pace -------------------------------------------------------------------

    async def _learn(
        self,
        message: lease.Leased,
        classification: Classification,
        sent_at: float,
        answered_at: float,
        probing: bool,
    ) -> float | None:
        """Teach the pace a temporary failure (any other answer: ``_learn_answer``); for a
        refusal that speaks about the site, the seconds the message waits before it is due
        again (else None: the message's own answer). A 502-504 speaks about the site when
        another request was refused too, or when the site's health check fails: a whole batch
        refused is one request."""
        status = classification.http_status
        cause: Cause | None = None
        if self.pace.speaks_about_site(answered_at, message.aggregate, status):
            cause = Cause.RATE_LIMITED if status == 429 else Cause.UNAVAILABLE
        if cause is None and classification.site_wide:
            cause = Cause.UNAVAILABLE  # the target read it as the site's (e.g. Bitrix's words)
        if cause is None and await self._site_down(answered_at):
            cause = Cause.SITE_DOWN
        if cause is None:
            return None  # about the message alone (a poison message): charged as before
        self.metrics.refused(cause)
        now = self.clock.now()
        hinted = parse_retry_after(classification.retry_after, now)
        # A PacedTarget's 429 was learned as its request's answer (``_learn_request``): this
        # one, sent before that round, only says how long the refused message waits.
        told = self._paced_inside and status == 429
        delay = self.pace.refused(answered_at, sent_at, cause, hinted, counted=not told)
        self.probe.answered(answered_at)
        self.gate.wake_all()  # the waiting requests learn the hold at once
        if probing:
            return None  # the breaker's probe: uncharged anyway, its cool-down rules
        return delay

    def _learn_answer(
        self, classification: Classification, sent_at: float, answered_at: float
    ) -> None:
        """``_learn`` for an answer that is no temporary failure: it never speaks about the
        site; the pace learns it (unless it refused the token: a pause). A PacedTarget's
        requests taught the pace each answer already (``_learn_request``)."""
        if classification.verdict is not Verdict.PAUSE:
            if not self._paced_inside:
                self.pace.answered(answered_at, answered_at - sent_at)
            self.probe.answered(answered_at)

    def _learn_request(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        """What one request of a PacedTarget teaches the pace: a 429 is the site's refusal (a
        round, its Retry-After honoured by every request: contract 5c); an answer that is no
        temporary failure and no pause is accepted (its RTT learned); the rest (no answer,
        401/403, 5xx, 408, 425) teaches nothing here, as for a single request: the messages'
        classifications say whether it speaks about the site (``_learn``)."""
        answered_at = self.monotonic.now()
        if status == 429:
            hinted = parse_retry_after(retry_after, self.clock.now())
            self.pace.refused(answered_at, sent_at, Cause.RATE_LIMITED, hinted)
            self.probe.answered(answered_at)
            self.gate.wake_all()  # the waiting requests learn the hold at once
        elif status is not None and STATUSES.verdict(status) not in (
            Verdict.TEMPORARY,
            Verdict.PAUSE,
        ):
            self.pace.answered(answered_at, answered_at - sent_at)
            self.probe.answered(answered_at)

    async def _site_down(self, now: float) -> bool:
        """Whether the site's health check fails (asked at most once per HEALTH_TTL). Not asked
        while the worker stops: the stop waits for the requests in flight, not for a check."""
        if self.stopping:
            return False
        if self._health_lock is None:
            self._health_lock = asyncio.Lock()
        async with self._health_lock:
            if self._health is not None and now - self._health[0] < HEALTH_TTL:
                return self._health[1]
            health = await self.target.health()
            down = health.verdict not in (Verdict.DELIVERED, Verdict.PAUSE)
            self._health = (self.monotonic.now(), down)
            self._heard(health, self.clock.now())
            return down

    def _tell_pace(self) -> None:
        now = self.monotonic.now()
        line = self.pace.report(now, self.gate.in_flight)
        if line is not None:
            log.warning("%s", line)
        self.metrics.pace(self.pace_figures(now))

    def pace_figures(self, now: float) -> dict[str, float | int | None]:
        """What the operator sees of the pace (metrics, ``exchange status``)."""
        rate = self.pace.effective_rate()
        refused = self.pace.refused_last_minute(now)
        return {
            "limit": self.pace.limit,
            "max_limit": self.pace.max_limit,
            "in_flight": self.gate.in_flight,
            "paced_rate": None if rate is None else round(rate, 3),
            "accepted_rate": round(self.pace.accepted_rate(now, 5.0), 3),
            "hold_s": round(max(0.0, self.pace.hold_until - now), 3),
            "refused_last_minute": sum(refused.values()),
            **{f"refused_{cause.name.lower()}": n for cause, n in refused.items()},
        }

    def _share_site(self, now: datetime) -> None:
        """Tell the pace who shares the site, at the start of each cycle and every
        SHARE_EVERY seconds of a long one (a backlog keeps a cycle going for as long as it
        lasts, and a worker that came meanwhile must count): the live workers, this one
        included, split EXCHANGE_SITE_MAX_RATE and the site's queue (``domain.pace``), and a
        worker alone probes without waiting for the turn."""
        live = self._live_workers(now)
        # Another worker's heartbeat may be late (the first comes after its first batch): a
        # turn it held (``ProbeTurn``) says it is there, for as long as a heartbeat would.
        if self.probe.others_seen_within(self._recent_seconds()):
            live = max(live, 2)
        self.pace.share(live, turn_held=self.probe.held)
        if self.settings.site_max_rate is not None:
            self.pace.max_rate = self.settings.site_max_rate / live

    def _recent_seconds(self) -> float:
        """A worker that reported within this many seconds is live."""
        return max(self.settings.lease_seconds, 3 * self.settings.poll_interval)

    def _live_workers(self, now: datetime) -> int:
        """Workers that reported recently (this one included): they share the rate cap."""
        since = now - timedelta(seconds=self._recent_seconds())
        with transaction(self.engine) as connection:
            others = connection.execute(
                select(func.count())
                .select_from(workers)
                .where(
                    workers.c.heartbeat_at >= since,
                    workers.c.worker_id != self.worker_id,
                    workers.c.stopped_at.is_(None),
                )
            ).scalar_one()
        return 1 + int(others)

    async def _recheck_withheld(self) -> None:
        """Every ``RECHECK_EVERY`` seconds, ask the channel which of its withheld prices buyers
        see now (contract 13; a target without the hooks is not asked): those end delivered."""
        now = self.monotonic.now()
        if now - self._rechecked_at < withheld.RECHECK_EVERY or self.paused_reason is not None:
            return
        self._rechecked_at = now
        live = await withheld.recheck(self.engine, self.target, self.clock.now)
        if live:
            log.info("%d withheld price(s) went live on the channel: delivered", live)

    def _heard(self, classification: Classification, now: datetime) -> None:
        """Whether the site answered at all: no answer (a refused connection, a timeout: a
        temporary failure without an HTTP status) starts ``unreachable_since``; any answer
        ends it. The dashboard says «сайт не отвечает с …» from it, never «Доставка идёт»."""
        silent = classification.verdict is Verdict.TEMPORARY and classification.http_status is None
        if not silent:
            self.unreachable_since = None
        elif self.unreachable_since is None:
            self.unreachable_since = now

    def _site_answers(self) -> None:
        """An answer that is no failure of the site's: the breaker closes (said once)."""
        if self.breaker.is_open():
            log.info("circuit breaker closed: the site answers again")
        self.breaker.record_success()

    def _judge(
        self,
        message: lease.Leased,
        classification: Classification,
        probing: bool,
        site_delay: float | None = None,
    ) -> Decision:
        """One message's classified answer -> its decision; the breaker and the pause learn
        from it."""
        verdict = classification.verdict
        if verdict is Verdict.NOT_FOR_THIS_SHOP:  # never sent: no answer to learn from
            return decide(
                classification,
                attempt=message.attempt,
                now=self.clock.now(),
                policy=self.policy,
                rng=self.rng,
            )
        self.metrics.attempt(verdict)
        if verdict is Verdict.DELIVERED:  # the usual answer: no clock read, no match
            self.unreachable_since = None
            self._site_answers()
            if self._trying_write and self.paused_reason is not None:
                log.warning(
                    "delivery resumed: %s",
                    "the known prices are read again"
                    if self.pause_cause is PauseCause.KNOWN_PRICES
                    else "the site accepts a write again",
                )
                self._end_pause()
            return delivered(classification)
        now = self.clock.now()
        self._heard(classification, now)
        match verdict:
            case Verdict.TEMPORARY if classification.http_status == 429 and not probing:
                pass  # the site asks to slow down: the pace's business, not an outage
            case Verdict.TEMPORARY:
                if self.breaker.record_temporary_failure(message.aggregate_id, now, probe=probing):
                    log.warning(
                        "circuit breaker open until %s: temporary failures on %d "
                        "aggregates in a row (last: %s)",
                        self.breaker.opened_until,
                        self.settings.breaker_threshold,
                        classification.detail,
                    )
            case Verdict.PAUSE:
                if self.paused_reason is None:  # told once it is known which pause it is
                    self.paused_reason = classification.detail
                    self._paused_at = now
                    self._pause_told = False
                    self.pause_cause = self._pause_cause(classification)
                elif not self.write_refused:
                    self.paused_reason = classification.detail
                    self.pause_cause = self._pause_cause(classification)
            case (
                Verdict.DELIVERED | Verdict.STALE_AT_SITE | Verdict.TERMINAL | Verdict.WITHHELD
            ):  # (not DELIVERED): the site answered
                self._site_answers()
            case Verdict.UNKNOWN | Verdict.NOT_FOR_THIS_SHOP:
                pass
        return decide(
            classification,
            attempt=message.attempt,
            now=now,
            policy=self.policy,
            rng=self.rng,
            probe=probing,
            site_delay=site_delay,
        )

    async def _renew(self, batch: lease.Batch) -> None:
        interval = max(self.settings.lease_seconds / 3, 0.001)
        while True:
            await asyncio.sleep(interval)
            until = self.clock.now() + timedelta(seconds=self.settings.lease_seconds)
            try:
                held = await asyncio.to_thread(self._renew_now, batch.token, until)
            except DatabaseUnavailable as exc:  # an outage: one line, no traceback
                log.warning("lease renewal failed: %s; will try again", exc)
                continue
            except Exception:  # a failed renewal must not kill the batch: try again
                log.exception("lease renewal failed; will try again")
                continue
            if held == 0:
                return

    def _renew_now(self, token: str, until: datetime) -> int:
        with transaction(self.engine) as connection:
            return lease.renew(connection, token, until)

    async def _site_accepts_again(self) -> bool:
        """Whether delivery may go on (or one message try a write) after a pause."""
        if self.write_refused:
            return self._write_turn()
        if self.pause_cause is PauseCause.KNOWN_PRICES:
            # The site is well; the service's own database did not give the known prices. A
            # GET proves nothing: one package tries again now and then every
            # EXCHANGE_RETRY_MAX_DELAY (``_write_turn``), its delivery ends the pause.
            if not self._pause_told:
                self._pause_told = True
                log.error(
                    "delivery paused: %s; one package is tried again every %s s, or run "
                    "`exchange resume`",
                    self.paused_reason,
                    self.settings.retry_max_delay,
                )
            return self._write_turn()
        # The token may have been replaced meanwhile (EXCHANGE_SITE_TOKEN_FILE): read it again,
        # so that fixing the file is all an operator has to do.
        try:
            self.target.reload_credentials()
        except ConfigurationError as exc:
            log.error("%s", exc)
        health = await self.target.health()
        if health.verdict is not Verdict.DELIVERED:
            self._tell_pause()
            return False
        if self._pause_told:  # reads were refused too, and are accepted now: fixed
            log.warning("delivery resumed: the site accepts the token again")
            self._end_pause()
            return True
        # Every pause comes from a write (a delivery), and the site accepts at once the same
        # credentials for a read: they may read but not write (a WooCommerce key with Read
        # permission, a Bitrix user without the right to import). Resuming on this GET is
        # what looped (issue 22).
        self.write_refused = True
        self.pause_cause = PauseCause.READ_ONLY_KEY
        self._write_try_at = self.monotonic.now() + self.settings.retry_max_delay
        self.paused_reason = f"the key may read but not write ({self.paused_reason})"
        self._pause_told = True
        log.error(
            "delivery paused: %s; one write is tried every %s s, or run `exchange resume`",
            self.paused_reason,
            self.settings.retry_max_delay,
        )
        return False

    def _tell_pause(self) -> None:
        if not self._pause_told:
            self._pause_told = True
            log.error(
                "delivery paused: %s; it resumes by itself when the site accepts again",
                self.paused_reason,
            )

    def _write_turn(self) -> bool:
        """While writes are refused: let one message go once every EXCHANGE_RETRY_MAX_DELAY
        (a write proves what a GET cannot); its success ends the pause (``_judge``)."""
        now = self.monotonic.now()
        if self._trying_write or now < self._write_try_at:
            return False
        self._write_try_at = now + self.settings.retry_max_delay
        self._trying_write = True
        return True

    def _pause_cause(self, answer: Classification) -> PauseCause:
        return pause_cause(self.settings.target, answer, write_refused=self.write_refused)

    def _end_pause(self) -> None:
        self.paused_reason = None
        self.pause_cause = None
        self.write_refused = False
        self._paused_at = None
        self._trying_write = False

    # -- what the worker tells about itself ------------------------------------------------

    def _heartbeat(self) -> None:
        self._write_heartbeat(self._heartbeat_values())

    async def report(self) -> None:
        """A heartbeat off the event loop (``runner.reporting``'s every REPORT_EVERY_S); the
        first of a run also clears the rows of workers silent for a day."""
        values = self._heartbeat_values()
        first = self._reported_at == -math.inf
        await asyncio.to_thread(self._write_heartbeat, values)
        if first:
            await asyncio.to_thread(self._clear_old_workers, values["heartbeat_at"])

    def _clear_old_workers(self, now: datetime) -> None:
        with transaction(self.engine) as connection:
            clear_old_workers(connection, now)

    def _heartbeat_values(self) -> dict[str, Any]:
        """What the worker tells about itself; read on the event loop (the pace lives there)."""
        now = self.clock.now()
        return {
            "worker_id": self.worker_id,
            "started_at": self.started_at,
            "heartbeat_at": now,
            # A start clears a stop (contract 15): the shipped configuration fixes the worker
            # id, so every restart reuses the row a clean stop marked.
            "stopped_at": None,
            "paused_reason": self.paused_reason,
            "paused_at": self._paused_at if self.paused_reason is not None else None,
            "pause_cause": self.pause_cause.value if self.pause_cause is not None else None,
            "unreachable_since": self.unreachable_since,
            "breaker_state": self.breaker.state(now).value,
            "breaker_until": self.breaker.opened_until,
            "pace": json.dumps(self.pace_figures(self.monotonic.now())),
            "source": json.dumps(self.source.health.as_json()) if self.source else None,
        }

    def _write_heartbeat(self, values: dict[str, Any]) -> None:
        self._reported_at = self.monotonic.now()
        with transaction(self.engine) as connection:
            dialect_insert = postgresql.insert if is_postgres(connection) else sqlite.insert
            statement = dialect_insert(workers).values(values)
            connection.execute(
                statement.on_conflict_do_update(
                    index_elements=["worker_id"],
                    set_={k: statement.excluded[k] for k in values if k != "worker_id"},
                )
            )

    def retire(self) -> None:
        """A clean stop: the worker's row is marked stopped (``stopped_at``: ``status`` and the
        dashboard show it stopped, with when, never silent; its next start clears the mark).
        Its last word about the site (a refused token, an open breaker) stays on the row:
        ``ops.status.holding`` reads it while no other worker is live. Rows of workers silent
        for a day go (``clear_old_workers``)."""
        now = self.clock.now()
        with transaction(self.engine) as connection:
            connection.execute(
                workers.update()
                .where(workers.c.worker_id == self.worker_id)
                .values(stopped_at=now, heartbeat_at=now)
            )
            clear_old_workers(connection, now)
        if self.paused_reason is not None or self.breaker.state(now) is not BreakerState.CLOSED:
            log.info(
                "worker %s stopped cleanly; exchange status still shows why delivery waits (%s)",
                self.worker_id,
                self.paused_reason or f"breaker {self.breaker.state(now).value}",
            )

    def idle(self) -> bool:
        """Nothing left that this service could move without a person (contract 6); an
        operator's pause is such a person's decision."""
        if self.source is not None and not self.source.idle:
            return False  # the broker had something ready at the last pull
        return self.operator_paused or is_idle(
            self.engine, self.staging_engine, self.kinds, [self.channel_id]
        )


def log_deliveries(outcomes: list[tuple[lease.Leased, Decision]], seconds: float) -> None:
    """One INFO line per batch for its deliveries (issue 13, item 7: a fast shop must cost
    little): how many, how long the batch took, the first and the last message_id. Each
    delivered message has its own line at DEBUG; every other outcome keeps its own line."""
    if not log.isEnabledFor(logging.INFO):
        return
    delivered = [m for m, d in outcomes if d.event is Event.DELIVERED]
    if not delivered:
        return
    log_event(
        log,
        logging.INFO,
        "deliveries",
        outcome=Event.DELIVERED.value,
        count=len(delivered),
        seconds=round(seconds, 3),
        first_message_id=delivered[0].message_id,
        last_message_id=delivered[-1].message_id,
    )


def log_outcome(message: lease.Leased, decision: Decision) -> None:
    """One line per outcome, the audit trail in the log (a delivery at DEBUG: its batch has
    one INFO line, ``log_deliveries``). Never the payload: the fields are named one by one,
    and the detail (the site's answer, for a failure) is capped."""
    delivered = decision.event is Event.DELIVERED
    if decision.event is Event.QUARANTINED:
        level = logging.WARNING
    else:
        level = logging.DEBUG if delivered else logging.INFO
    if not log.isEnabledFor(level):  # a delivery at INFO: not even the fields are gathered
        return
    log_event(
        log,
        level,
        "delivery",
        outcome=decision.event.value,
        message_id=message.message_id,
        kind=message.kind,
        aggregate=message.aggregate,
        version=message.version,
        attempt=message.attempt,
        http_status=decision.http_status,
        error_class=decision.error_class,
        delay_s=None if decision.delay_s is None else round(decision.delay_s, 3),
        reason=decision.reason,
        result_unknown=decision.result_unknown or None,
        detail=None if delivered else decision.detail[:DETAIL_CAP],
    )


def _outgoing(message: lease.Leased) -> OutgoingMessage:
    return OutgoingMessage(
        message.message_id,
        message.kind,
        message.aggregate,
        message.version,
        message.payload,
        message.created_at,
    )


class _SitePacer:
    """The worker's pace as a ``PacedTarget``'s requests use it (targets/base.py ``Pacer``):
    the same turn as the worker's own requests (``InFlightGate.enter``), and each answer learned
    (``_learn_request``)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    async def turn(self) -> float:
        await self._worker.gate.enter()
        self._worker.requests_sent += 1
        return self._worker.monotonic.now()

    def done(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        self._worker.gate.leave()
        self._worker._learn_request(sent_at, status, retry_after)
