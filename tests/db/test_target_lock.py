"""The lock row that keeps one exchange at a time with a 1C-Bitrix site across workers
(contract 10), on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine

from exchange.db.target_lock import DbLock
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
