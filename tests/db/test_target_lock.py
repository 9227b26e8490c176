"""The lock row that keeps one exchange at a time with a 1C-Bitrix site across workers
(contract 10), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from exchange.db.target_lock import DbHold, DbLock, DbSlots
from exchange.domain.clock import FakeClock


def test_one_holder_at_a_time_renewed_by_its_holder_free_after_its_end_or_release(
    engine: Engine, clock: FakeClock
) -> None:
    first = DbLock(engine, "bitrix https://shop", "worker-1", clock)
    second = DbLock(engine, "bitrix https://shop", "worker-2", clock)
    elsewhere = DbLock(engine, "bitrix https://other", "worker-2", clock)

    taken = [first.acquire(30), second.acquire(30), first.acquire(30), elsewhere.acquire(30)]
    clock.advance(29)
    still = second.acquire(30)
    clock.advance(2)  # first's renewal at 0 s ends at 30 s
    after_end = second.acquire(30)
    second.release()
    after_release = first.acquire(30)

    assert [True, False, True, True] == taken
    assert (False, True, True) == (still, after_end, after_release)


def test_a_shared_hold_is_read_by_every_worker_and_never_shortened(engine: Engine) -> None:
    """``DbHold`` (Ozon's "Circle is open" across workers): none until one worker holds; each
    worker reads the end any worker wrote, and an earlier end written later never shortens it
    (two workers that heard it keep the later end)."""
    first, second = DbHold(engine, "ozon circle:1"), DbHold(engine, "ozon circle:1")
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)

    before = second.until()
    first.hold(at + timedelta(seconds=180))
    second.hold(at + timedelta(seconds=60))
    read = second.until()
    second.hold(at + timedelta(seconds=240))

    assert (None, at + timedelta(seconds=180)) == (before, read)
    assert at + timedelta(seconds=240) == first.until()
    assert DbHold(engine, "ozon circle:2").until() is None


def test_slots_are_shared_by_every_worker_and_a_dead_holders_place_frees_itself(
    engine: Engine,
) -> None:
    """Yandex Market's parallel requests a business (research §3.3): two workers' ``DbSlots``
    of 2 places hand out 2 at once in all; a place given back is free again; one never given
    back (its worker died) frees itself at its end. A hold's note is kept with it."""
    clock = FakeClock()
    first = DbSlots(engine, "ym parallel:1", 2, clock)
    second = DbSlots(engine, "ym parallel:1", 2, clock)
    a, b = first.take(30), second.take(30)
    assert a is not None and b is not None
    assert first.take(30) is None and second.take(30) is None
    first.give(a)
    c = second.take(30)
    assert c is not None and first.take(30) is None
    clock.advance(31)  # b and c never given back
    assert first.take(30) is not None and first.take(30) is not None
    hold = DbHold(engine, "ym spent:1:offer-prices/updates")
    hold.hold(clock.now() + timedelta(seconds=5), "1500")
    assert (clock.now() + timedelta(seconds=5), "1500") == hold.read()
