"""Issue 31: whatever moves a message or an aggregate moves its delivery and cursor on the
one channel (``deliveries``, ``channel_aggregates``), and nothing else. After any sequence of
intake (new versions, gaps, late and stale versions, duplicates, rows refused as records),
claims, records (delivered, a temporary failure, a terminal one, stale at the site, handed
back), renewals, expiry, the sweep (coalescing, gaps, exhausted leases), an operator's
quarantine retry and cancel, prioritizing, pause and resume, and prune, every accepted message
is one delivery there with its message's copies, every aggregate has its cursor, a rejected
record has none, and every history row of a delivery names the channel
(``tests/support/mirror.py``), on SQLite and PostgreSQL. (Until migration 0026 it also proved
the dual write of step 2: the delivery columns equal to the one channel's copy on ``messages``
and ``aggregates``.)
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from mirror import differences
from sqlalchemy import Engine, delete, select

from exchange.db import schema
from exchange.db.engine import transaction
from exchange.db.schema import (
    channel_aggregates,
    deliveries,
    delivery_pause,
    history,
    price_owners,
    staging,
)
from exchange.dev.testing import (
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    raw_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision, not_sent
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops import prioritize, prune, quarantine
from exchange.queue import coalesce, control, lease, record
from exchange.settings import Settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

pytestmark = pytest.mark.timeout(600)

AGGREGATES = ("S1", "S2", "D1", "D2")  # two prices (latest wins), two postings (strict)
LEASE_S = 30.0
MAX_ATTEMPTS = 2
GAP_S = 60.0
OUTCOMES = ("delivered", "temporary", "terminal", "stale-at-site", "handed-back")


def decision(outcome: str, leased: lease.Leased, clock: FakeClock) -> Decision:
    if outcome == "delivered":
        return Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="R")
    if outcome == "temporary":
        return Decision(
            Event.RETRY_SCHEDULED,
            State.DELAYED,
            "503 Service Unavailable",
            next_try_at=clock.now() + timedelta(seconds=5),
            delay_s=5.0,
            http_status=503,
        )
    if outcome == "terminal":
        return Decision(
            Event.QUARANTINED,
            State.QUARANTINED,
            "422 Unprocessable",
            reason="http-422",
            http_status=422,
        )
    if outcome == "stale-at-site":
        return Decision(
            Event.STALE_AT_SITE,
            State.CANCELLED,
            "409 stale",
            reason=Reason.STALE_AT_SITE.value,
            http_status=409,
            site_version=leased.version + 1,
        )
    return not_sent("held back: stopping", leased.attempt)


class Mirror(RuleBasedStateMachine):
    engine: Engine
    settings: Settings

    def __init__(self) -> None:
        super().__init__()
        with transaction(self.engine) as connection:  # each example starts from nothing
            for table in (
                history,
                deliveries,
                schema.messages,
                channel_aggregates,
                price_owners,
                schema.aggregates,
                staging,
                delivery_pause,
            ):
                connection.execute(delete(table))
        self.clock = FakeClock()
        self.kinds = self.settings.policies
        self.versions: dict[str, int] = dict.fromkeys(AGGREGATES, 0)
        self.batches: list[lease.Batch] = []

    @rule(
        writes=st.lists(
            st.tuples(st.sampled_from(AGGREGATES), st.sampled_from([1, 1, 2, 0, -1])),
            min_size=1,
            max_size=5,
        ),
        refused=st.booleans(),
    )
    def intake(self, writes: list[tuple[str, int]], refused: bool) -> None:
        """1C writes the next version, a gap, the same version again or an older one; maybe a
        row intake refuses (a record)."""
        rows = []
        for aggregate, step in writes:
            version = max(1, self.versions[aggregate] + step)
            self.versions[aggregate] = max(self.versions[aggregate], version)
            made = price_row if aggregate.startswith("S") else posting_row
            rows.append(made(aggregate, version))
        if refused:
            rows.append(raw_row("price", "BAD", 1, '{"sku": "BAD", "price": "дорого"}'))
        stage(self.engine, rows)
        intake.take(self.engine, None, self.settings.kinds, self.clock.now())

    @rule(limit=st.integers(1, 4))
    def claim(self, limit: int) -> None:
        with transaction(self.engine) as connection:
            batch = lease.claim(
                connection,
                worker=f"w{len(self.batches)}",
                now=self.clock.now(),
                limit=limit,
                lease_seconds=LEASE_S,
                kinds=self.kinds,
                max_attempts=MAX_ATTEMPTS,
            )
        if batch.messages:
            self.batches.append(batch)

    @precondition(lambda self: self.batches)
    @rule(pick=st.integers(0, 9), outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1))
    def record(self, pick: int, outcomes: list[str]) -> None:
        """A worker records its batch (perhaps after its lease expired and another took it);
        handing back part of it keeps the rest in flight."""
        batch = self.batches.pop(pick % len(self.batches))
        part = outcomes[0] == "handed-back" and len(batch.messages) > 1
        answered = batch.messages[:1] if part else batch.messages
        with transaction(self.engine) as connection:
            record.record(
                connection,
                token=batch.token,
                worker="w",
                now=self.clock.now(),
                outcomes=[
                    (m, decision(outcomes[i % len(outcomes)], m, self.clock))
                    for i, m in enumerate(answered)
                ],
                kinds=self.kinds,
                release_all=not part,
            )
        if part:
            self.batches.append(lease.Batch(batch.token, batch.until, batch.messages[1:]))

    @precondition(lambda self: self.batches)
    @rule(pick=st.integers(0, 9))
    def renew(self, pick: int) -> None:
        batch = self.batches[pick % len(self.batches)]
        with transaction(self.engine) as connection:
            lease.renew(connection, batch.token, self.clock.now() + timedelta(seconds=LEASE_S))

    @rule(seconds=st.sampled_from([1.0, LEASE_S + 1, GAP_S + 1]))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def sweep(self) -> None:
        """The worker's sweep: coalescing, the gap check, exhausted leases."""
        now = self.clock.now()
        with transaction(self.engine) as connection:
            coalesce.coalesce(connection, self.kinds, now)
            coalesce.quarantine_gaps(connection, self.kinds, now, GAP_S)
            lease.expire_exhausted(connection, now=now, max_attempts=MAX_ATTEMPTS)

    @rule(cancel=st.booleans(), pick=st.integers(0, 9))
    def operator_acts_on_quarantine(self, cancel: bool, pick: int) -> None:
        with transaction(self.engine, read_only=True) as connection:
            quarantined = connection.execute(
                select(messages.c.message_id, messages.c.rejected)
                .where(messages.c.state == State.QUARANTINED.value)
                .order_by(messages.c.id)
            ).all()
        if not quarantined:
            return
        message_id, rejected = quarantined[pick % len(quarantined)]
        with transaction(self.engine) as connection:
            if cancel:
                quarantine.cancel(
                    connection,
                    [message_id],
                    operator="op",
                    note="gone",
                    now=self.clock.now(),
                    kinds=self.kinds,
                )
            elif not rejected:
                quarantine.retry(
                    connection,
                    [message_id],
                    quarantine.Filters(),
                    operator="op",
                    note="again",
                    now=self.clock.now(),
                    dry_run=False,
                )

    @rule(pick=st.integers(0, 9))
    def operator_prioritizes(self, pick: int) -> None:
        with transaction(self.engine, read_only=True) as connection:
            waiting = connection.execute(
                select(messages.c.message_id)
                .where(
                    messages.c.state.in_([State.NEW.value, State.DELAYED.value]),
                    messages.c.rejected.is_(False),
                )
                .order_by(messages.c.id)
            ).scalars()
            ids = list(waiting)
        if ids:
            with transaction(self.engine) as connection:
                prioritize.prioritize(
                    connection,
                    [ids[pick % len(ids)]],
                    operator="op",
                    note="first",
                    now=self.clock.now(),
                )

    @rule(paused=st.booleans())
    def operator_pauses_or_resumes(self, paused: bool) -> None:
        with transaction(self.engine) as connection:
            if paused:
                control.pause(connection, operator="op", note="n", now=self.clock.now())
            else:
                control.resume(connection, operator="op", now=self.clock.now())

    @rule()
    def prune(self) -> None:
        """Prune what ended before now (retention 0): deleting a message deletes its delivery."""
        prune.prune(
            self.engine,
            None,
            now=self.clock.now() + timedelta(seconds=1),
            retention_days=0,
            kinds=self.kinds,
        )

    @invariant()
    def every_message_is_its_delivery(self) -> None:
        with transaction(self.engine, read_only=True) as connection:
            found = differences(connection)
        assert found == [], "\n".join(found)


def test_every_accepted_message_stays_one_delivery_with_its_cursor_on_the_channel(
    engine: Engine,
) -> None:
    Mirror.engine = engine
    Mirror.settings = fast_settings(
        str(engine.url.render_as_string(hide_password=False)),
        lease_seconds=LEASE_S,
        max_attempts=MAX_ATTEMPTS,
        gap_timeout=GAP_S,
    )
    run_state_machine_as_test(
        Mirror,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_the_check_notices_a_delivery_left_behind(engine: Engine, clock: FakeClock) -> None:
    """The check above can fail: a message whose delivery went is named."""
    settings_ = fast_settings(str(engine.url.render_as_string(hide_password=False)))
    stage(engine, [price_row("S1", 1)])
    intake.take(engine, None, settings_.kinds, clock.now())
    with transaction(engine) as connection:
        assert differences(connection) == []
        connection.execute(deliveries.delete())
        found = differences(connection)
    assert len(found) == 1 and found[0].startswith("delivery (") and "missing" in found[0], found
