"""One cycle of the service: intake -> coalesce -> (claim -> deliver -> record)*.

Database work happens in short transactions between HTTP calls, never across one. While a
batch is out, a renewal task keeps its lease alive, so a slow site does not let a second
worker take the same aggregates. The circuit breaker and the 401/403 pause decide how much
may be claimed; what a batch could not send is handed back uncharged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import workers
from exchange.domain.breaker import BreakerState, CircuitBreaker
from exchange.domain.clock import Clock
from exchange.domain.policy import Policy
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision, RetryPolicy, decide, not_sent
from exchange.domain.states import Event, State
from exchange.domain.verdicts import Verdict
from exchange.errors import ConfigurationError, DatabaseUnavailable
from exchange.failpoints import failpoint
from exchange.intake import staging_table as intake
from exchange.logs import log_event
from exchange.ops.metrics import Metrics
from exchange.queue import coalesce, lease, record
from exchange.queue.idle import is_idle
from exchange.settings import Settings
from exchange.targets.shop_api import batch as batch_api
from exchange.targets.shop_api.answers import classify
from exchange.targets.shop_api.client import (
    BATCH_PATH,
    OutgoingMessage,
    Response,
    SiteClient,
    SiteResult,
)

log = logging.getLogger(__name__)
DETAIL_CAP = 200  # characters of a failure's detail in its outcome line


@dataclass
class CycleReport:
    taken: int = 0
    cancelled: int = 0
    batches: int = 0
    sent: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost_leases: int = 0


class Worker:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        site: SiteClient,
        clock: Clock,
        *,
        staging_engine: Engine | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.staging_engine = staging_engine
        self.site = site
        self.clock = clock
        self.rng = rng or random.Random()
        self.metrics = metrics or Metrics()  # the base records nothing: metrics off
        self.worker_id = settings.worker_id
        self.policy = RetryPolicy(
            settings.max_attempts, settings.retry_base_delay, settings.retry_max_delay
        )
        self.breaker = CircuitBreaker(
            settings.breaker_threshold, settings.retry_base_delay, settings.retry_max_delay
        )
        self.paused_reason: str | None = None
        self.strict = settings.kinds_with(Policy.STRICT)
        self.latest_wins = settings.kinds_with(Policy.LATEST_WINS)
        self.stopping = False
        self._stop_requested: asyncio.Event | None = None  # set by request_stop during a batch
        self._started: set[int] = set()  # pks of the batch in flight that went to the site
        self.started_at = clock.now()
        self.requests_sent = 0
        self.batch_endpoint_missing = False  # the site answered 404 to a batch: singles only
        self._claim_after = 0  # where the next claim's sweep over aggregates goes on

    def request_stop(self) -> None:
        """Let the requests in flight finish (each within EXCHANGE_HTTP_TIMEOUT) and record
        them; hand the batch's unsent messages back at once (uncharged); stop claiming."""
        self.stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()

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
            paused=self.paused_reason is not None,
        )
        return report

    async def _cycle(self) -> CycleReport:
        report = CycleReport()
        now = self.clock.now()
        taken = intake.take(self.engine, self.staging_engine, self.settings.kinds, now)
        report.taken = taken.taken
        self.metrics.intake(taken)
        with transaction(self.engine) as connection:
            report.cancelled += coalesce.coalesce(connection, self.latest_wins, now)
            gaps = coalesce.quarantine_gaps(connection, self.strict, now, self.settings.gap_timeout)
            expired = lease.expire_exhausted(
                connection, now=now, max_attempts=self.settings.max_attempts
            )
        report.cancelled += gaps
        self.metrics.quarantined(Reason.SEQUENCE_GAP, gaps)
        self.metrics.quarantined(Reason.RETRY_LIMIT, expired)
        while not self.stopping:
            if self.paused_reason is not None and not await self._site_accepts_again():
                break
            now = self.clock.now()
            allowance = self.breaker.allowance(now, self.settings.batch_size)
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
                    strict=self.strict,
                    max_attempts=self.settings.max_attempts,
                    exclude=sorted(self.breaker.probed) if probing else (),
                    after=self._claim_after,
                )
                self._claim_after = batch.cursor
                self.metrics.claimed(connection, batch, now)
            failpoint("after-lease-commit")
            if not batch.messages and probing and self.breaker.probed:
                self.breaker.start_probing_again()
                continue
            if not batch.messages:
                break
            report.batches += 1
            outcomes = await self._deliver(batch)
            with transaction(self.engine) as connection:
                recorded = record.record(
                    connection,
                    token=batch.token,
                    worker=self.worker_id,
                    now=self.clock.now(),
                    outcomes=outcomes,
                    strict=self.strict,
                )
            report.lost_leases += len(outcomes) - recorded
            self.metrics.recorded(decision for _, decision in outcomes)
            if recorded < len(outcomes):
                log.warning(
                    "%d outcomes not recorded: their lease passed to another worker",
                    len(outcomes) - recorded,
                )
            for _, decision in outcomes:
                report.outcomes[decision.event.value] += 1
            report.sent += sum(1 for _, d in outcomes if d.event is not Event.RELEASED)
        self._heartbeat()
        return report

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
        try:
            if self.settings.site_batch_size > 1 and not self.batch_endpoint_missing:
                decisions = await self._send_in_chunks(batch.messages, semaphore)
            else:
                decisions = await asyncio.gather(
                    *(self._send_one(message, semaphore) for message in batch.messages)
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
        outcomes = zip(batch.messages, decisions, strict=True)
        return [(m, d) for m, d in outcomes if m.pk not in handed_back]

    async def _hand_back_on_stop(self, batch: lease.Batch, stop: asyncio.Event) -> set[int]:
        """On a stop request, record the messages not sent yet as released (uncharged) and
        free their aggregates at once, so that another worker need not wait for the lease.
        Returns their pks (none when the record failed: they go back with the batch)."""
        await stop.wait()
        # Nothing is sent once stopping is set: the messages not started now never will be.
        unsent = [m for m in batch.messages if m.pk not in self._started]
        if not unsent:
            return set()
        decision = not_sent("not sent: the worker is stopping")
        try:
            recorded = await asyncio.to_thread(self._record_now, batch.token, unsent, decision)
        except Exception as exc:  # the batch's own record hands them back instead
            log.warning("handing back %d unsent messages failed: %s", len(unsent), exc)
            return set()
        log.info("stopping: %d unsent messages handed back", recorded)
        return {m.pk for m in unsent}

    def _record_now(self, token: str, unsent: list[lease.Leased], decision: Decision) -> int:
        with transaction(self.engine) as connection:
            return record.record(
                connection,
                token=token,
                worker=self.worker_id,
                now=self.clock.now(),
                outcomes=[(m, decision) for m in unsent],
                strict=self.strict,
                release_all=False,
            )

    async def _send_one(self, message: lease.Leased, semaphore: asyncio.Semaphore) -> Decision:
        decision = await self._attempt(message, semaphore)
        log_outcome(message, decision)
        return decision

    async def _attempt(self, message: lease.Leased, semaphore: asyncio.Semaphore) -> Decision:
        async with semaphore:
            held = self._held_back()
            if held is not None:
                return held
            self._started.add(message.pk)
            probing = self.breaker.is_open()
            self.requests_sent += 1
            result = await self.site.send(_outgoing(message))
        failpoint("after-answer")
        return self._judge(message, result, probing)

    def _held_back(self) -> Decision | None:
        """Why nothing may be sent now (stopping, paused, breaker open), or None."""
        if self.stopping:
            return not_sent("not sent: the worker is stopping")
        if self.paused_reason is not None:
            return not_sent(f"not sent: delivery paused ({self.paused_reason})")
        if self.breaker.state(self.clock.now()) is BreakerState.OPEN:
            return not_sent("not sent: the circuit breaker is open (site-wide failures)")
        return None

    def _judge(self, message: lease.Leased, result: SiteResult, probing: bool) -> Decision:
        """One message's answer -> its decision; the breaker and the pause learn from it."""
        now = self.clock.now()
        classification = classify(result, message.version)
        self.metrics.attempt(classification.verdict)
        match classification.verdict:
            case Verdict.TEMPORARY:
                if self.breaker.record_temporary_failure(message.aggregate_id, now, probe=probing):
                    log.warning(
                        "circuit breaker open until %s: temporary failures on %d "
                        "aggregates in a row (last: %s)",
                        self.breaker.opened_until,
                        self.settings.breaker_threshold,
                        classification.detail,
                    )
                if probing:  # a failed probe is not charged
                    return Decision(
                        Event.RELEASED,
                        State.NEW,
                        f"probe failed, not charged: {classification.detail}",
                        charged=False,
                        http_status=classification.http_status,
                        error_class=classification.error_class,
                    )
            case Verdict.PAUSE:
                if self.paused_reason is None:
                    log.error(
                        "delivery paused: the site answered %s (token refused); "
                        "it resumes by itself when the site accepts again",
                        classification.http_status,
                    )
                self.paused_reason = classification.detail
            case Verdict.DELIVERED | Verdict.STALE_AT_SITE | Verdict.TERMINAL:
                if self.breaker.is_open():
                    log.info("circuit breaker closed: the site answers again")
                self.breaker.record_success()
            case Verdict.UNKNOWN:
                pass
        return decide(
            classification, attempt=message.attempt, now=now, policy=self.policy, rng=self.rng
        )

    async def _send_in_chunks(
        self, messages: list[lease.Leased], semaphore: asyncio.Semaphore
    ) -> list[Decision]:
        """Contract 5b: the batch in requests of at most site_batch_size items, several in
        flight (the semaphore bounds requests, not items); decisions in the batch's order."""
        chunks = batch_api.chunks(messages, self.settings.site_batch_size)
        answered = await asyncio.gather(*(self._send_chunk(c, semaphore) for c in chunks))
        by_pk = {
            m.pk: d
            for chunk, decisions in zip(chunks, answered, strict=True)
            for m, d in zip(chunk, decisions, strict=True)
        }
        return [by_pk[message.pk] for message in messages]

    async def _send_chunk(
        self, chunk: list[lease.Leased], semaphore: asyncio.Semaphore
    ) -> list[Decision]:
        decisions = await self._attempt_chunk(chunk, semaphore)
        if decisions is None:  # no batch endpoint: singles, with no attempt charged for the 404
            return list(await asyncio.gather(*(self._send_one(m, semaphore) for m in chunk)))
        for message, decision in zip(chunk, decisions, strict=True):
            log_outcome(message, decision)
        return decisions

    async def _attempt_chunk(
        self, chunk: list[lease.Leased], semaphore: asyncio.Semaphore
    ) -> list[Decision] | None:
        """One batch request; each item is judged as its single answer would be. None when
        the site has no batch endpoint."""
        async with semaphore:
            held = self._held_back()
            if held is not None:
                return [held] * len(chunk)
            self._started.update(m.pk for m in chunk)
            if self.batch_endpoint_missing:
                return None
            probing = self.breaker.is_open()
            # Half-open: one message probes, as with single requests; the others wait uncharged.
            sent = chunk[:1] if probing else chunk
            self.requests_sent += 1
            result = await self.site.send_batch([_outgoing(m) for m in sent])
        failpoint("after-answer")
        if batch_api.endpoint_missing(result):
            if not self.batch_endpoint_missing:
                self.batch_endpoint_missing = True
                log.warning(
                    "the site answered 404 to %s: it has no batch endpoint; "
                    "sending single requests from now on",
                    BATCH_PATH,
                )
            return None
        answers = batch_api.split(result, [m.message_id for m in sent])
        decisions = [self._judge(m, answers[m.message_id], probing) for m in sent]
        waiting = not_sent("not sent: the circuit breaker is half-open and one message probes")
        return decisions + [waiting] * (len(chunk) - len(sent))

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
        # The token may have been replaced meanwhile (EXCHANGE_SITE_TOKEN_FILE): read it again,
        # so that fixing the file is all an operator has to do.
        try:
            self.site.set_token(self.settings.token())
        except ConfigurationError as exc:
            log.error("%s", exc)
        result = await self.site.health()
        if isinstance(result, Response) and 200 <= result.status < 300:
            log.warning("delivery resumed: the site accepts the token again")
            self.paused_reason = None
            return True
        return False

    # -- what the worker tells about itself ------------------------------------------------

    def _heartbeat(self) -> None:
        now = self.clock.now()
        values = {
            "worker_id": self.worker_id,
            "started_at": self.started_at,
            "heartbeat_at": now,
            "paused_reason": self.paused_reason,
            "breaker_state": self.breaker.state(now).value,
            "breaker_until": self.breaker.opened_until,
        }
        with transaction(self.engine) as connection:
            dialect_insert = postgresql.insert if is_postgres(connection) else sqlite.insert
            statement = dialect_insert(workers).values(values)
            connection.execute(
                statement.on_conflict_do_update(
                    index_elements=["worker_id"],
                    set_={k: statement.excluded[k] for k in values if k != "worker_id"},
                )
            )

    def idle(self) -> bool:
        """Nothing left that this service could move without a person (contract 6)."""
        return is_idle(self.engine, self.staging_engine, self.strict)


def log_outcome(message: lease.Leased, decision: Decision) -> None:
    """One line per outcome, the audit trail in the log. Never the payload: the fields are
    named one by one, and the detail (the site's answer, for a failure) is capped."""
    delivered = decision.event is Event.DELIVERED
    log_event(
        log,
        logging.WARNING if decision.event is Event.QUARANTINED else logging.INFO,
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
