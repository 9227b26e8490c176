"""A channel's delivery loop (River's producer): claim -> deliver -> record, for one target.

The loop owns what delivery to one site needs: its ``Target``, the site's ``Pace``, the
``CircuitBreaker``, the ``InFlightGate`` and the ``ProbeTurn``, the pause, and the
``RetryPolicy`` of its channel's settings. It never takes rows in or sweeps: the intake service
and the sweeper beside it do (exchange/worker/intake.py, sweeper.py), and the reporter writes
what it tells about the site (reporter.py). Between batches it asks them, through ``Beside``,
whether a take-in is due and whether to report; ``process.Worker`` wires them together.

Database work happens in short transactions between HTTP calls, never across one. While a
batch is out, a renewal task keeps its lease alive, so a slow site does not let a second
worker take the same aggregates. The circuit breaker and the 401/403 pause decide how much
may be claimed; what a batch could not send is handed back uncharged. Every call of the loop
into the queue (claim, record, renew) is in one place: "the queue" below.

The loop knows the shop only through its ``Target`` (exchange/targets/base.py): how a batch
travels, and one classification per message. What each classification means for the
message (charged or not, its next state, when it goes again) is ``domain.retry.decide``'s.

How fast and how many requests go is the site's pace (``domain.pace``, contract 5c): every
request waits its turn (the pace's hold, its rate, its limit on requests in flight); every
answer teaches the pace; a refusal that speaks about the site (429, 502-504 while others are
refused too, any temporary failure while the site's health check fails) slows the whole loop
and is not charged to the message. A target whose ``send`` is one request is paced around it;
a ``PacedTarget`` (WooCommerce, Bitrix: lookups, batches, read-backs, health checks, each step
of an exchange) takes one turn per request of its own through the loop's ``Pacer``
(``_SitePacer``), and the pace learns each of those requests' answers instead of the messages'.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import re
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.target_lock import DbLock
from exchange.delivery import withheld
from exchange.delivery.gate import InFlightGate
from exchange.delivery.probe import PROBE_TURN, ProbeTurn
from exchange.domain.breaker import BreakerState, CircuitBreaker
from exchange.domain.clock import Clock, Monotonic
from exchange.domain.pace import Cause, Pace
from exchange.domain.pause import READ_ONLY_NOTE, PauseCause, pause_cause
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
from exchange.errors import ConfigurationError, DatabaseUnavailable
from exchange.failpoints import failpoint
from exchange.logs import log_event
from exchange.queue import lease, record
from exchange.settings import Settings
from exchange.settings.marketplaces import MARKETPLACE_TARGETS
from exchange.targets.base import OutgoingMessage, PacedTarget, SharesAccount, Target
from exchange.targets.wire import STATUSES
from exchange.words import channel_subject, channels_named
from exchange.worker import common
from exchange.worker.common import CycleReport, Metrics, recent_seconds

log = logging.getLogger("exchange.worker")  # the name operators filter on (docs/monitoring.md)
DETAIL_CAP = 200  # characters of a failure's detail in its outcome line
STOPPING = "not sent: the worker is stopping"
PROBE_WAITS = "not sent: the circuit breaker is half-open and one message probes"
HEALTH_TTL = 1.0  # seconds a health check's answer stands for the failures that follow
HOLD_BASE = 0.25  # seconds: the first hold after a site refusal without Retry-After (at most)
# What an attempt leaves to be tried again, and how often one cycle may do that to one
# aggregate (``drain``): once more within the cycle when its backoff has already passed.
_AGAIN = frozenset({State.DELAYED, State.NEW})
TRIES_PER_CYCLE = 2


def _excluded(tried: Counter[int], probed: Iterable[int]) -> list[int]:
    return sorted({a for a, n in tried.items() if n >= TRIES_PER_CYCLE}.union(probed))


class Beside(Protocol):
    """What a loop asks of the services beside it between its batches."""

    def take_in_due(self) -> bool:
        """Whether the intake's poll interval passed since its last take-in."""
        ...

    async def take_in(self, report: CycleReport) -> bool:
        """Take rows in (and sweep when due); whether an operator paused delivery."""
        ...

    def batch_done(self) -> None:
        """A batch was recorded: the worker reports (and counts the others) when it is due."""
        ...


class Reports(Protocol):
    """The reporter as the loop's probe turn uses it (exchange/delivery/probe.py)."""

    def live_workers(self, now: datetime) -> int: ...

    def values(self) -> dict[str, Any]: ...

    def write(self, values: dict[str, Any]) -> None: ...


class DeliveryLoop:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        target: Target,
        clock: Clock,
        monotonic: Monotonic,
        *,
        reports: Reports,
        metrics: Metrics,
        rng: random.Random | None = None,
        channel: str | None = None,
        channel_id: int,
        probe_turn: str = PROBE_TURN,
        holder: str | None = None,
    ) -> None:
        # The channel's name (None: the one channel of a configuration without
        # EXCHANGE_CHANNELS, whichever is registered) and its id in the registry, which the
        # composition root read (``app.registered_ids``).
        self.channel = channel
        self.channel_id = channel_id
        # The loop's channel's settings: the global ones with the channel's over them
        # (exchange/settings/channels.py), so its retry policy, breaker and pace are its own.
        self.settings = settings
        self.engine = engine
        self.target = target
        self.clock = clock
        # Seconds for the pace, the write retry and the health check's answer, and the clock
        # the requests wait their turn on (the gate).
        self.monotonic = monotonic
        self.rng = rng or random.Random()
        self.metrics = metrics
        self.reports = reports
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
            DbLock(engine, probe_turn, holder or settings.worker_id, clock),
            monotonic=self.monotonic.now,
            live_workers=lambda: reports.live_workers(self.clock.now()),
            report=reports.values,
            write_report=reports.write,
        )
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
        self.operator_paused = False  # an operator's pause (the take-in reads it)
        self.kinds = settings.policies
        # Set by request_stop, one for each batch out (``drain``: more than one at once for a
        # target that asks for it).
        self._stop_requested: set[asyncio.Event] = set()
        self.requests_sent = 0
        # The waits decided without sending this loop's channel is in, each told once at INFO
        # while it lasts (``log_outcome``).
        self.waits_told = WaitsTold()
        # A target that makes requests of its own within one send takes a turn for each.
        self._paced_inside = isinstance(target, PacedTarget)
        if isinstance(target, PacedTarget):
            target.pace_with(_SitePacer(self))
        self._rechecked_at = -math.inf  # when the channel was last asked about withheld prices
        self._counted_at_start = False  # ``share_site_at_start`` ran

    @property
    def _busy_subject(self) -> str:
        """What a 429 says is busy in the history (English, as details are written; said in
        Russian by ``words.detail_words``): the channel or the marketplace
        (``words.channel_subject``), else "site" as always. A loop knows its channel is named
        by EXCHANGE_CHANNELS alone (``words.channels_named``), not the registry's others."""
        named = channels_named(self.channel is not None, 0)
        said = channel_subject(self.channel, self.settings.target, "en", named=named)
        return said or "site"

    @property
    def name(self) -> str:
        """The channel's name, as the logs say it."""
        return self.channel or self.settings.target

    def request_stop(self) -> None:
        """Let the requests in flight finish (each within EXCHANGE_HTTP_TIMEOUT) and record
        them; hand the batch's unsent messages back at once (uncharged); stop claiming."""
        self.stopping = True
        for stop_requested in self._stop_requested:
            stop_requested.set()
        self.gate.wake_all_threadsafe()

    @property
    def paused(self) -> bool:
        """Contract 15, one pause, one truth: what ``status`` calls ``delivery_paused``, as this
        loop sees it (an operator's pause, or the site's refusal it met)."""
        return self.operator_paused or self.paused_reason is not None

    # -- the cycle -----------------------------------------------------------------------

    async def drain(self, report: CycleReport, beside: Beside) -> None:
        """Claim, deliver, record, until nothing is due for this loop (or it stops, or an
        operator pauses delivery, or the site or the breaker holds it).

        A target that paces every request of its own against the marketplace's account
        (``batches_at_once`` above 1: Wildberries) has the next batch claimed and sent while
        the current one is still out, each batch's claim and record in a thread: its budget
        never idles through the loop's turn between batches, nor through a batch whose
        messages only poll (issue 32 item 6). Only while delivery runs freely: half-open, a
        write turn or a pause, one batch at a time as for every other target."""
        # Aggregates whose attempts in this cycle left them to be tried again: a cycle gives
        # each at most TRIES_PER_CYCLE such attempts, so that a failure the backoff makes due
        # at once (or one charged to nobody: the site's own trouble) ends the cycle instead of
        # looping in it; the next cycle's intake and coalescing come first.
        tried: Counter[int] = Counter()
        at_once = max(1, int(getattr(self.target, "batches_at_once", 1)))
        out: set[asyncio.Task[None]] = set()
        try:
            while not self.stopping and not self.operator_paused:
                # A backlog keeps a cycle going until it is drained: new staging rows are taken
                # in every poll interval meanwhile, so that a correction staged during a reload
                # gets its place at the head of the claim order (domain/urgency.py) within one
                # interval, not after the whole reload.
                # While the breaker probes, the cycle ends instead: the next one takes rows in
                # (a probe's cool-down can be shorter than a take, and a cycle of probes would
                # never end while the site is down).
                if report.batches and beside.take_in_due():
                    if self.breaker.state(self.clock.now()) is not BreakerState.CLOSED:
                        break
                    if await beside.take_in(report):
                        break
                if out and not self._overlapping(at_once):
                    await _settle(out, everything=True)  # one batch at a time from here
                    continue
                if self.paused_reason is not None and not await self._site_accepts_again():
                    break
                now = self.clock.now()
                allowance = (
                    1
                    if self._trying_write
                    else self.breaker.allowance(now, self.settings.batch_size)
                )
                if allowance == 0:
                    break
                probing = self.breaker.state(now) is BreakerState.HALF_OPEN
                exclude = _excluded(tried, self.breaker.probed if probing else ())
                if out:  # another batch is out: the claim must not hold up its requests
                    batch = await asyncio.to_thread(self._claim, now, allowance, exclude)
                else:
                    batch = self._claim(now, allowance, exclude)
                self.metrics.claimed(batch)
                failpoint("after-lease-commit")
                if not batch.messages and probing and self.breaker.probed:
                    self.breaker.start_probing_again()
                    continue
                if not batch.messages:
                    if out:  # what is out may make more due (its polls): claim again after
                        await _settle(out, everything=True)
                        continue
                    # A write turn that found nothing to send is over: left set, no later turn
                    # would come (``_write_turn``) and a paused channel would stay paused.
                    self._trying_write = False
                    break
                report.batches += 1
                if at_once == 1:
                    await self._batch(batch, report, tried, beside, threaded=False)
                    continue
                out.add(
                    asyncio.create_task(self._batch(batch, report, tried, beside, threaded=True))
                )
                if len(out) >= at_once or not self._overlapping(at_once):
                    await _settle(out, everything=not self._overlapping(at_once))
        finally:
            if out:
                await _settle(out, everything=True)

    def _overlapping(self, at_once: int) -> bool:
        """Whether another batch may go out while one is: the target asks for it, and delivery
        runs freely (no pause, no write turn, the breaker closed)."""
        return (
            at_once > 1
            and not self._trying_write
            and self.paused_reason is None
            and not self.breaker.is_open()
        )

    async def _batch(
        self,
        batch: lease.Batch,
        report: CycleReport,
        tried: Counter[int],
        beside: Beside,
        *,
        threaded: bool,
    ) -> None:
        """One claimed batch delivered and recorded (``threaded``: its record in a thread,
        while another batch is out)."""
        batch_started = time.perf_counter()
        outcomes = await self._deliver(batch)
        tried.update(m.aggregate_id for m, d in outcomes if d.to_state in _AGAIN)
        if threaded:
            recorded = await asyncio.to_thread(self._record, batch.token, outcomes)
        else:
            recorded = self._record(batch.token, outcomes)
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
        beside.batch_done()
        for _, decision in outcomes:
            report.outcomes[decision.event.value] += 1
        report.sent += sum(1 for _, d in outcomes if d.event is not Event.RELEASED)

    # -- the queue: every call of the loop into exchange/queue -----------------------------

    def _claim(self, now: datetime, limit: int, exclude: list[int]) -> lease.Batch:
        with transaction(self.engine) as connection:
            return lease.claim(
                connection,
                worker=self.worker_id,
                now=now,
                limit=limit,
                lease_seconds=self.settings.lease_seconds,
                kinds=self.kinds,
                max_attempts=self.settings.max_attempts,
                exclude=exclude,
                clock=self.clock.now,
                channel_id=self.channel_id,
                one_per_sku=self.settings.target in MARKETPLACE_TARGETS,
            )

    def _record(
        self,
        token: str,
        outcomes: list[tuple[lease.Leased, Decision]],
        *,
        release_all: bool = True,
    ) -> int:
        with transaction(self.engine) as connection:
            return record.record(
                connection,
                token=token,
                worker=self.worker_id,
                now=self.clock.now(),
                outcomes=outcomes,
                kinds=self.kinds,
                release_all=release_all,
            )

    def _renew_now(self, token: str, until: datetime) -> int:
        with transaction(self.engine) as connection:
            return lease.renew(connection, token, until)

    def _record_now(self, token: str, unsent: list[lease.Leased]) -> int:
        """Hand the unsent messages of a stopping batch back, uncharged."""
        return self._record(
            token, [(m, not_sent(STOPPING, m.attempt)) for m in unsent], release_all=False
        )

    # -- delivery ----------------------------------------------------------------------

    async def _deliver(self, batch: lease.Batch) -> list[tuple[lease.Leased, Decision]]:
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        renewal = asyncio.create_task(self._renew(batch))
        started: set[int] = set()  # pks of this batch that went to the site
        stop_requested = asyncio.Event()
        self._stop_requested.add(stop_requested)
        if self.stopping:
            stop_requested.set()
        hand_back = asyncio.create_task(self._hand_back_on_stop(batch, stop_requested, started))
        handed_back: set[int] = set()
        by_id = {m.message_id: m for m in batch.messages}
        try:
            requests = self.target.requests([_outgoing(m) for m in batch.messages])
            answered = await asyncio.gather(
                *(
                    self._request([by_id[o.message_id] for o in r], r, semaphore, started)
                    for r in requests
                )
            )
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            self._stop_requested.discard(stop_requested)
            if not stop_requested.is_set():
                hand_back.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                handed_back = await hand_back
        decided = {m.pk: d for pairs in answered for m, d in pairs}
        return [(m, decided[m.pk]) for m in batch.messages if m.pk not in handed_back]

    async def _hand_back_on_stop(
        self, batch: lease.Batch, stop: asyncio.Event, started: set[int]
    ) -> set[int]:
        """On a stop request, record the messages not sent yet as released (uncharged) and
        free their aggregates at once, so that another worker need not wait for the lease.
        Returns their pks (none when the record failed: they go back with the batch)."""
        await stop.wait()
        # Nothing is sent once stopping is set: the messages not started now never will be.
        unsent = [m for m in batch.messages if m.pk not in started]
        if not unsent:
            return set()
        try:
            recorded = await asyncio.to_thread(self._record_now, batch.token, unsent)
        except Exception as exc:  # the batch's own record hands them back instead
            log.warning("handing back %d unsent messages failed: %s", len(unsent), exc)
            return set()
        log.info("stopping: %d unsent messages handed back", recorded)
        return {m.pk for m in unsent}

    async def _request(
        self,
        leased: list[lease.Leased],
        outgoing: list[OutgoingMessage],
        semaphore: asyncio.Semaphore,
        started: set[int],
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
                        started.add(m.pk)
                    probing = self.breaker.is_open()
                    sent = len(leased)
                    if probing:
                        leased, outgoing, sent = self._probe_first(leased, outgoing)
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
                for n, (m, c) in enumerate(zip(leased[:sent], answers, strict=True)):
                    if c.verdict is Verdict.TEMPORARY:  # may speak about the site: _learn
                        site_delay = await self._learn(m, c, sent_at, answered_at, probing)
                    else:  # the pace learns the answer; no coroutine for the usual case
                        self._learn_answer(c, sent_at, answered_at)
                        site_delay = None
                    # A probe's item is one probe: its first message speaks for the breaker.
                    decisions.append(self._judge(m, c, probing, site_delay, told=n > 0))
                for m, c in zip(leased[:sent], answers, strict=True):
                    # Only now: the items of one request do not corroborate each other.
                    self.pace.noticed(answered_at, m.aggregate, c.http_status)
                decisions += [not_sent(PROBE_WAITS, m.attempt) for m in leased[sent:]]
        outcomes = list(zip(leased, decisions, strict=True))
        now = self.monotonic.now()
        for message, decision in outcomes:
            log_outcome(message, decision, self.waits_told, now)
        return outcomes

    def _probe_first(
        self, leased: list[lease.Leased], outgoing: list[OutgoingMessage]
    ) -> tuple[list[lease.Leased], list[OutgoingMessage], int]:
        """The breaker's probe: the request's first message, with those of the request that go
        in one item with it (the target's ``item_of``: a marketplace's SKU, whose price and
        old price are one item), first, and how many they are. Alone, a marketplace's old
        price went without its price and was quarantined for a rule 1C's pair keeps (review
        rev37: Ozon answered the old price beside no price ``discount_too_big``)."""
        item_of = getattr(self.target, "item_of", None)
        if item_of is None or len(outgoing) < 2:
            return leased, outgoing, 1
        first = item_of(outgoing[0])
        order = sorted(range(len(outgoing)), key=lambda i: item_of(outgoing[i]) != first)
        together = sum(1 for o in outgoing if item_of(o) == first)
        return [leased[i] for i in order], [outgoing[i] for i in order], together

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
        if classification.about_item:  # the site answered: about that item alone
            self._learn_answer(classification, sent_at, answered_at)
            return None
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
        elif status == 420:  # Yandex Market's pace, waited out by its target (counted only)
            self.pace.noted(answered_at, Cause.MARKETPLACE_LIMIT)
            self.metrics.refused(Cause.MARKETPLACE_LIMIT)
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
        line = self.pace.report(now, self.gate.in_flight, self._busy_subject)
        if line is not None:
            log.warning("%s", line)
        self.metrics.pace(self.pace_figures(now))

    def pace_figures(self, now: float) -> dict[str, float | int | None]:
        """What the operator sees of the pace (metrics, ``exchange status``)."""
        rate = self.pace.effective_rate()
        refused = self.pace.refused_last_minute(now)
        # A target that keeps fewer requests in flight than the worker would (Yandex's
        # ym_parallel): its cap is the limit the operator sees, not EXCHANGE_CONCURRENCY.
        cap = getattr(self.target, "requests_at_once", None)
        of = getattr(self.target, "requests_at_once_of", None)
        limit, most = self.pace.limit, self.pace.max_limit
        shared: dict[str, float | int | None] = {}
        if isinstance(cap, int) and isinstance(of, int):
            # The channel's workers' requests together (Yandex's places in the database): the
            # business's limit, the same on every worker's line, never to be summed
            # (``status.site_pace``), and said to be every worker's (``status.pace_words``).
            limit, most = cap, of
            shared = {"limit_shared": 1}
        elif isinstance(cap, int):
            limit, most = min(limit, cap), min(most, cap)
        return {
            "limit": limit,
            "max_limit": most,
            **shared,
            "in_flight": self.gate.in_flight,
            "paced_rate": None if rate is None else round(rate, 3),
            "accepted_rate": round(self.pace.accepted_rate(now, 5.0), 3),
            "hold_s": round(max(0.0, self.pace.hold_until - now), 3),
            "refused_last_minute": sum(refused.values()),
            **{f"refused_{cause.name.lower()}": n for cause, n in refused.items()},
        }

    async def recheck_withheld(self) -> None:
        """Every ``RECHECK_EVERY`` seconds, ask the channel which of its withheld prices buyers
        see now (contract 13; a target without the hooks is not asked): those end delivered."""
        now = self.monotonic.now()
        if now - self._rechecked_at < withheld.RECHECK_EVERY or self.paused_reason is not None:
            return
        self._rechecked_at = now
        live = await withheld.recheck(
            self.engine, self.target, self.clock.now, channel_id=self.channel_id
        )
        if live:
            log.info("%d withheld price(s) went live on the channel: delivered", live)

    async def share_site_at_start(self) -> None:
        """``share_site`` before the loop's first request (each drain's start calls this).

        A marketplace's limits are the seller account's (``SharesAccount``), and a worker
        learns of the others only from their rows: two started at the same moment would each
        count itself alone until its next count and spend the whole account meanwhile (a 429
        from Wildberries, a 420 from Yandex Market for its 4 requests at once). So the first
        time, such a loop writes its row, waits ``START_WAIT`` on the worker's clock and only
        then counts: of two workers whose rows were written within ``START_WAIT`` of each
        other, each counts the other before its first request. Other targets (a shop: its
        pace learns its limits) count at once, as always."""
        wait = common.START_WAIT
        if not self._counted_at_start and isinstance(self.target, SharesAccount) and wait > 0:
            values = self.reports.values()
            await asyncio.to_thread(self.reports.write, values)
            waited = asyncio.Event()
            timer = self.monotonic.call_later(wait, waited.set)
            try:
                await waited.wait()
            finally:
                timer.cancel()
        self._counted_at_start = True  # (a failed write or wait: the next drain again)
        self.share_site(self.clock.now())

    def share_site(self, now: datetime) -> None:
        """Tell the pace who shares the site, at the start of each cycle and every
        SHARE_EVERY seconds of a long one (a backlog keeps a cycle going for as long as it
        lasts, and a worker that came meanwhile must count): the live workers, this one
        included, split EXCHANGE_SITE_MAX_RATE and the site's queue (``domain.pace``), and a
        marketplace's account limits (``SharesAccount``); a worker alone probes without
        waiting for the turn."""
        live = self.reports.live_workers(now)
        # Another worker's heartbeat may be late (the first comes after its first batch): a
        # turn it held (``ProbeTurn``) says it is there, for as long as a heartbeat would.
        if self.probe.others_seen_within(recent_seconds(self.settings)):
            live = max(live, 2)
        self.pace.share(live, turn_held=self.probe.held)
        if self.settings.site_max_rate is not None:
            self.pace.max_rate = self.settings.site_max_rate / live
        if isinstance(self.target, SharesAccount):
            # A marketplace's limit per seller account, split the same way (contract 14).
            self.target.share(live)

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
        *,
        told: bool = False,
    ) -> Decision:
        """One message's classified answer -> its decision; the breaker and the pause learn
        from it. ``told``: probing, another message of the probe's item (``_probe_first``)
        told the breaker of the answer already (two failures of one probe re-opened it twice,
        its cool-down two steps longer)."""
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
                    else "the channel accepts a write again",
                )
                self._end_pause()
            return delivered(classification)
        now = self.clock.now()
        self._heard(classification, now)
        if (
            verdict is Verdict.AWAITING
            and classification.http_status is not None
            and self._trying_write
            and self.paused_reason is not None
        ):
            # The channel answered the write and took it (its outcome is read later, contract
            # 14): the key may write. A wait without an answer (Ozon's own count of its hourly
            # limit) proves nothing.
            log.warning("delivery resumed: the channel accepts a write again")
            self._end_pause()
        match verdict:
            case Verdict.TEMPORARY if classification.http_status == 429 and not probing:
                pass  # the site asks to slow down: the pace's business, not an outage
            case Verdict.TEMPORARY if classification.about_item:
                self._site_answers()  # the site answered well; this item alone must wait
            case Verdict.TEMPORARY if probing and told:
                # One probe: its item's first message re-opened the breaker; this one only
                # probed with it (the next probe takes another item, as for the first).
                self.breaker.probed.add(message.aggregate_id)
            case Verdict.TEMPORARY:
                # A refusal that speaks about the site (``_learn``: its health check fails,
                # or 502-504 while others are refused) counts whatever its aggregate: a site
                # down with fewer aggregates waiting than the threshold opens the breaker too.
                site_wide = site_delay is not None
                if self.breaker.record_temporary_failure(
                    message.aggregate_id, now, probe=probing, site_wide=site_wide
                ):
                    threshold = self.settings.breaker_threshold
                    spread = probing or len(self.breaker.failing_aggregates) >= threshold
                    log.warning(
                        "circuit breaker open until %s: %s (last: %s)",
                        self.breaker.opened_until,
                        f"temporary failures on {threshold} aggregates in a row"
                        if spread
                        else f"{threshold} temporary failures in a row while the site is down",
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
                Verdict.DELIVERED
                | Verdict.STALE_AT_SITE
                | Verdict.TERMINAL
                | Verdict.WITHHELD
                | Verdict.AWAITING
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
            # a marketplace is no site (contract 14), nor is a channel of several "the site"
            # (contract 13): the history row names what is busy, in the words' own way
            busy=f"{self._busy_subject} busy",
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

    async def _site_accepts_again(self) -> bool:
        """Whether delivery may go on (or one message try a write) after a pause."""
        if self.write_refused:
            # A new key in its file is tried at once, as a refused one's is (its health check
            # below): the operator mends the file and delivery goes on, without waiting for
            # the next turn, nor for `exchange resume` (review wbwords34 finding 1).
            if self._credentials_replaced():
                self._write_try_at = self.monotonic.now()
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
        self._credentials_replaced()
        health = await self.target.health()
        if health.verdict is not Verdict.DELIVERED:
            self._tell_pause()
            return False
        if self._pause_told:  # reads were refused too, and are accepted now: fixed
            log.warning("delivery resumed: the channel accepts the token again")
            self._end_pause()
            return True
        # Every pause comes from a write (a delivery), and the site accepts at once the same
        # credentials for a read: they may read but not write (a WooCommerce key with Read
        # permission, a Bitrix user without the right to import). Resuming on this GET is
        # what looped (issue 22).
        self.write_refused = True
        # the target's own cause (Wildberries' token, Yandex Market's read-only key), else
        # READ_ONLY_KEY (pause.pause_cause); the cause's words quote the refusal inside the note
        self.pause_cause = self._pause_cause(health)
        self._write_try_at = self.monotonic.now() + self.settings.retry_max_delay
        self.paused_reason = f"{READ_ONLY_NOTE} ({self.paused_reason})"
        self._pause_told = True
        log.error(
            "delivery paused: %s; one write is tried every %s s, or run `exchange resume`",
            self.paused_reason,
            self.settings.retry_max_delay,
        )
        return False

    def _credentials_replaced(self) -> bool:
        """The target's credentials read again from their files: whether they changed."""
        try:
            return self.target.reload_credentials()
        except ConfigurationError as exc:
            log.error("%s", exc)
            return False

    def _tell_pause(self) -> None:
        if not self._pause_told:
            self._pause_told = True
            log.error(
                "delivery paused: %s; it resumes by itself when the channel accepts again",
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

    # -- what the loop tells about the site ------------------------------------------------

    def heartbeat_values(self, now: datetime) -> dict[str, Any]:
        """The loop's part of the worker's row at ``now``: its pause, breaker and pace."""
        return {
            "paused_reason": self.paused_reason,
            "paused_at": self._paused_at if self.paused_reason is not None else None,
            "pause_cause": self.pause_cause.value if self.pause_cause is not None else None,
            "unreachable_since": self.unreachable_since,
            "breaker_state": self.breaker.state(now).value,
            "breaker_until": self.breaker.opened_until,
            "pace": json.dumps(self.pace_figures(self.monotonic.now())),
        }

    def resumed(self, resumed_at: datetime) -> None:
        """An operator resumed delivery (``exchange resume``) at ``resumed_at``: a pause this
        loop met before that ends."""
        if self._paused_at is not None and resumed_at > self._paused_at:
            log.warning("delivery resumed by an operator (exchange resume)")
            self._end_pause()

    def tell_stopped(self, now: datetime) -> None:
        """A clean stop: say why delivery still waits, if it does (the row keeps it)."""
        if self.paused_reason is not None or self.breaker.state(now) is not BreakerState.CLOSED:
            log.info(
                "worker %s stopped cleanly; exchange status still shows why delivery waits (%s)",
                self.worker_id,
                self.paused_reason or f"breaker {self.breaker.state(now).value}",
            )

    async def aclose(self) -> None:
        """Close the target's connections."""
        await self.target.aclose()


async def _settle(out: set[asyncio.Task[None]], *, everything: bool) -> None:
    """Wait for the batches out (``everything``: all of them, else the first to end); each
    ended one leaves ``out``, and the first failure is raised once every batch waited for
    has ended (none is left running unseen)."""
    done, _ = await asyncio.wait(
        out, return_when=asyncio.ALL_COMPLETED if everything else asyncio.FIRST_COMPLETED
    )
    out.difference_update(done)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    for task in done:
        if task.cancelled():
            raise asyncio.CancelledError


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


# The countdown in a wait's words ("sent in 17 s"): the same wait, whatever it says.
_COUNTDOWN = re.compile(r"\b\d+ s\b")


class WaitsTold:
    """The waits decided without sending (``outcome=waiting``: Yandex Market's per-minute
    budget, Ozon's hour, Wildberries' catalogue not read again yet) one loop, so one channel,
    is in: each is told at INFO when it starts or changes, its repeats at DEBUG while it lasts
    (review ymlog 35: one worker held by the budget wrote ~6,750 INFO lines in 5 minutes, one
    per message per cycle). A wait is the same while its error class and words (less a
    countdown) are; it lasts while it is met again within its delay and ``GRACE`` seconds
    (``now``: the loop's monotonic seconds)."""

    GRACE = 60.0

    def __init__(self) -> None:
        self._until: dict[tuple[str | None, str], float] = {}

    def first(self, decision: Decision, now: float) -> bool:
        """Whether this wait starts now (told at INFO); it lasts from now on."""
        key = (decision.error_class, _COUNTDOWN.sub("# s", decision.detail))
        lasting = self._until.get(key, -math.inf) >= now
        if not lasting and len(self._until) >= 1000:  # many different waits: never unbounded
            self._until = {k: t for k, t in self._until.items() if t >= now}
        self._until[key] = now + (decision.delay_s or 0.0) + self.GRACE
        return not lasting


def _waiting(decision: Decision) -> bool:
    """A wait the target decided without asking the channel (no HTTP status: Wildberries'
    catalogue not read again yet, Ozon's own count of a product's hour, a companion price):
    nothing was sent, so it is a wait, with no attempt (mpminor 5)."""
    return decision.event is Event.AWAITING_OUTCOME and decision.http_status is None


def log_outcome(
    message: lease.Leased,
    decision: Decision,
    waits: WaitsTold | None = None,
    now: float = 0.0,
) -> None:
    """One line per outcome, the audit trail in the log (a delivery at DEBUG: its batch has
    one INFO line, ``log_deliveries``). Never the payload: the fields are named one by one,
    and the detail (the site's answer, for a failure) is capped. ``waits``: the loop's waits
    told already (``now``: its monotonic seconds): a wait decided without sending is at INFO
    once while it lasts, its repeats at DEBUG."""
    delivered = decision.event is Event.DELIVERED
    unsent = _waiting(decision)
    if decision.event is Event.QUARANTINED:
        level = logging.WARNING
    elif unsent and waits is not None:
        level = logging.INFO if waits.first(decision, now) else logging.DEBUG
    else:
        level = logging.DEBUG if delivered else logging.INFO
    if not log.isEnabledFor(level):  # a delivery at INFO: not even the fields are gathered
        return
    log_event(
        log,
        level,
        "delivery",
        outcome="waiting" if unsent else decision.event.value,
        message_id=message.message_id,
        kind=message.kind,
        aggregate=message.aggregate,
        version=message.version,
        attempt=None if unsent else message.attempt,
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
        message.receipt,
        message.taken_at,
    )


class _SitePacer:
    """The loop's pace as a ``PacedTarget``'s requests use it (targets/base.py ``Pacer``):
    the same turn as the loop's own requests (``InFlightGate.enter``), and each answer learned
    (``_learn_request``)."""

    def __init__(self, worker: DeliveryLoop) -> None:
        self._worker = worker

    async def turn(self) -> float:
        await self._worker.gate.enter()
        self._worker.requests_sent += 1
        return self._worker.monotonic.now()

    def done(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        self._worker.gate.leave()
        self._worker._learn_request(sent_at, status, retry_after)
