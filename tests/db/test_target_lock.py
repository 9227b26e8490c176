"""The lock row that keeps one exchange at a time with a 1C-Bitrix site across workers
(contract 10), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from exchange.db.target_lock import DbHold, DbLeft, DbLock, DbSlots
from exchange.domain.clock import FakeClock
from exchange.targets.yandex_market.pace import (
    PARALLEL_KEPT,
    parallel_heard,
    parallel_kept,
    parallel_places,
)


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


def test_a_holds_note_is_written_even_where_its_end_is_not_later_and_kept_without_one(
    engine: Engine,
) -> None:
    """``DbHold.hold``'s note (Yandex's budget learned from Yandex) is the latest one told,
    whether or not that hold moves the end; a hold without a note keeps the note; one UPDATE
    does both."""
    hold = DbHold(engine, "ym budget:1")
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)

    hold.hold(at + timedelta(seconds=60), "2000/min")
    hold.hold(at + timedelta(seconds=30), "300/min")
    told = hold.read()
    hold.hold(at + timedelta(seconds=90))

    assert (at + timedelta(seconds=60), "300/min") == told
    assert (at + timedelta(seconds=90), "300/min") == hold.read()


def test_a_count_left_is_taken_by_one_guarded_update_and_the_smaller_of_a_window_stays(
    engine: Engine,
) -> None:
    """``DbLeft`` (Yandex Market's ``-Remaining`` until ``-Until``, research §3.3, shared):
    nothing known, a take goes; in one window the smaller count any answer said stays (an
    answer to an earlier request, come later, never raises it), each take lowers it and one
    larger than what is left takes nothing and names the window's end; a later window's count
    replaces it; a window that ended leaves the takes free."""
    first, second = DbLeft(engine, "ym left:1:u"), DbLeft(engine, "ym left:1:u")
    now = datetime(2026, 12, 6, 12, 0, 30, tzinfo=UTC)
    end, later = now + timedelta(seconds=31), now + timedelta(seconds=91)

    assert first.take(500, now) is None
    first.told(end, 550)
    second.told(end, 1050)
    assert [None, end, None] == [second.take(500, now), first.take(100, now), first.take(50, now)]
    assert end == second.take(1, now)
    first.told(later, 1500)
    assert (None, later) == (second.take(1500, now), first.take(1, now))
    assert first.take(1, later) is None


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


def test_a_parallel_refusal_lowers_every_workers_places_until_it_lapses(engine: Engine) -> None:
    """Review ym35: several workers, ``ym_parallel`` 4 above Yandex's cap. A 420 for parallel
    requests heard while 4 places were taken lowers the business's places to 3 for every
    worker (pace.py ``parallel_heard``), and a second worker's 420 of the same moment keeps 3
    (never one less each); the other worker's ``DbSlots`` takes none while a place beyond the
    3 is still in flight, and 3 at most in all; the next refusal at 3 makes 2. A request
    renews the lowering, which lapses ``PARALLEL_KEPT`` after the last one; another
    ``ym_parallel`` begins afresh."""
    clock = FakeClock()
    first = DbSlots(engine, "ym parallel:1", 4, clock)
    second = DbSlots(engine, "ym parallel:1", 4, clock)
    kept = timedelta(seconds=PARALLEL_KEPT)

    def places(slots: DbSlots) -> int:
        return parallel_places(4, *slots.lowered(), clock.now())

    def place(token: str | None) -> int:
        assert token is not None
        return int(token.split("|")[0])

    held = {first: [first.take(30), first.take(30)], second: [second.take(30), second.take(30)]}
    assert (4, 4, None) == (second.taken(), places(second), first.take(30))
    first.lower(parallel_heard(places(first), first.taken()), clock.now() + kept)
    second.lower(parallel_heard(places(second), second.taken()), clock.now() + kept)
    assert (3, 3) == (places(first), places(second))

    for slots, tokens in held.items():  # all but the one in place 3 end
        for token in [t for t in tokens if place(t) != 3]:
            assert token is not None
            slots.give(token)
    assert (1, None) == (first.taken(), second.take(30, places(second)))
    last = next(t for tokens in held.values() for t in tokens if place(t) == 3)
    assert last is not None
    (first if last in held[first] else second).give(last)
    three = [second.take(30, places(second)) for _ in range(2)] + [first.take(30, places(first))]
    assert None not in three and {0, 1, 2} == {place(t) for t in three}
    assert (None, 3) == (first.take(30, places(first)), first.taken())
    first.lower(parallel_heard(places(first), first.taken()), clock.now() + kept)
    assert 2 == places(second)

    clock.advance(PARALLEL_KEPT * 0.6)  # a request past half the lowering renews it
    assert parallel_kept(second.lowered()[1], clock.now() - kept / 2) is None
    renewed = parallel_kept(second.lowered()[1], clock.now())
    assert renewed is not None
    second.keep(renewed)
    clock.advance(PARALLEL_KEPT * 0.6)
    assert 2 == places(first)
    clock.advance(PARALLEL_KEPT)  # no request for that long: lapsed, ym_parallel again
    second.keep(clock.now() + kept)  # a lapsed one stays lapsed
    assert 4 == places(first)
    first.lower(3, clock.now() + kept)  # a new one replaces it
    assert 3 == places(second)
    assert (None, None) == DbSlots(engine, "ym parallel:1", 6, clock).lowered()


def test_a_place_given_back_with_a_cool_down_stays_taken_that_long(engine: Engine) -> None:
    """A request cut off by our timeout may still be in flight at Yandex: its place given back
    ``after`` 5 s is taken by nobody for those 5 s, then free."""
    clock = FakeClock()
    first = DbSlots(engine, "ym parallel:1", 1, clock)
    second = DbSlots(engine, "ym parallel:1", 1, clock)
    token = first.take(30)
    assert token is not None
    first.give(token, 5.0)
    clock.advance(4.9)
    assert second.take(30) is None
    clock.advance(0.2)
    assert second.take(30) is not None


def test_a_holds_note_changes_only_where_it_still_says_what_the_writer_read(
    engine: Engine,
) -> None:
    """Yandex Market's learned limit (the note of ``ym spent:``): a worker that heard a higher
    limit renotes the row from what it read; another worker's word written since stays (its
    renote from the old note changes nothing), and the wait's end is left as it is."""
    clock = FakeClock()
    hold = DbHold(engine, "ym spent:1:offer-prices/updates")
    assert not hold.renote(None, "50"), "no row: nothing to change"
    hold.hold(clock.now() + timedelta(seconds=5), "20")
    assert hold.renote("20", "50")
    assert not hold.renote("20", "40"), "another worker's 50 stays"
    assert (clock.now() + timedelta(seconds=5), "50") == hold.read()
    assert hold.renote("50", None)
    assert (clock.now() + timedelta(seconds=5), None) == hold.read()
