"""``exchange status``'s backlog (issue 23, item 5; contract 6): the messages still to deliver
(new less held, plus delayed and in progress) and when they will be done at the pace of the
last minute of all live workers. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, insert

from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops.backlog import backlog, backlog_words
from exchange.queue import lease, record

DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200)
LIVE = timedelta(seconds=max(60, 3 * 5))  # Settings.live_within of lease 60 s, poll 5 s


def test_the_backlog_counts_what_waits_and_divides_it_by_the_last_minutes_pace(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    """50 prices; 20 delivered by a live worker in the last minute, 5 more claimed: 30
    messages wait (25 new, 5 in progress), at 20 a minute about 90 s."""
    settings = fast_settings(db_url)
    stage(engine, [price_row(f"SKU-{n:02d}", 1) for n in range(50)])
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as c:
        c.execute(
            insert(workers).values(worker_id="w1", started_at=clock.now(), heartbeat_at=clock.now())
        )
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=20,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )
    assert len(batch.messages) == 20
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, DELIVERED) for m in batch.messages],
            kinds=settings.policies,
        )
        lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=5,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )
        now = clock.now() + timedelta(seconds=10)
        figures = backlog(c, now, settings.policies, LIVE)
        assert figures == {
            "messages": 30,
            "eta_s": 90.0,
            "due_s": None,
            "awaiting_person": 0,
            "hold_s": None,
        }
        assert (
            backlog_words(figures) == "backlog: 30 messages, about 1 min 30 s at the current pace"
        )

        # A minute later nothing was delivered: no pace to extrapolate from.
        later = clock.now() + timedelta(seconds=61)
        assert backlog(c, later, settings.policies, LIVE) == {
            "messages": 30,
            "eta_s": None,
            "due_s": None,
            "awaiting_person": 0,
            "hold_s": None,
        }


def test_deliveries_of_a_worker_that_is_no_longer_live_are_not_the_current_pace(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    settings = fast_settings(db_url)
    stage(engine, [price_row(f"SKU-{n:02d}", 1) for n in range(10)])
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as c:
        c.execute(
            insert(workers).values(
                worker_id="w1",
                started_at=clock.now(),
                heartbeat_at=clock.now() - LIVE - timedelta(seconds=1),
            )
        )
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=4,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, DELIVERED) for m in batch.messages],
            kinds=settings.policies,
        )
        assert backlog(c, clock.now(), settings.policies, LIVE) == {
            "messages": 6,
            "eta_s": None,
            "due_s": None,
            "awaiting_person": 0,
            "hold_s": None,
        }


def test_the_backlog_line_says_nothing_waits_for_none_and_no_estimate_while_paused() -> None:
    """The fresh review: «0 messages, about 0 s» for nothing, and an estimate while delivery
    was paused. ``eta_s`` stays the contract's figure (the last minute's pace); only the words
    change."""
    assert backlog_words({"messages": 0, "eta_s": 0.0}) == "backlog: none"
    paused = backlog_words({"messages": 632, "eta_s": 632.0}, paused=True)
    assert paused == "backlog: 632 messages, delivery is paused (no estimate)"
    assert "about" in backlog_words({"messages": 632, "eta_s": 632.0})


def test_a_delivery_held_for_its_channels_hour_is_in_the_estimate_by_its_due_time(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    """Promise (issue 32, mpminor item 8): a price Ozon's hourly limit holds for 59 minutes
    (delayed, due then, not charged) is in the estimate by its due time: «about 59 min», never
    the few seconds the pace of the others gives; ``eta_s`` stays the pace's figure and
    ``due_s`` says when the last delayed one is due."""
    settings = fast_settings(db_url)
    stage(engine, [price_row(f"SKU-{n:02d}", 1) for n in range(4)])
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as c:
        c.execute(
            insert(workers).values(worker_id="w1", started_at=clock.now(), heartbeat_at=clock.now())
        )
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=4,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )
    held_hour = Decision(
        Event.AWAITING_OUTCOME,
        State.DELAYED,
        "Ozon: 10 price updates of this product within the hour",
        charged=False,
        next_try_at=clock.now() + timedelta(minutes=59),
        delay_s=59 * 60.0,
    )
    *sent, held = batch.messages
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[*((m, DELIVERED) for m in sent), (held, held_hour)],
            kinds=settings.policies,
        )
        figures = backlog(c, clock.now(), settings.policies, LIVE)
    assert figures == {
        "messages": 1,
        "eta_s": 20.0,
        "due_s": 3540.0,
        "awaiting_person": 0,
        "hold_s": None,
    }
    said = backlog_words(figures)
    assert said == "backlog: 1 message, about 59 min 0 s: the last of them is due then"
    ru = backlog_words(figures, lang="ru")
    assert "59 мин" in ru, ru
