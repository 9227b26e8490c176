"""The in-flight gate (exchange/delivery/gate.py), driven by a fake monotonic clock: never
more requests in flight than the pace's limit, a request that ends lets exactly one waiter
go, the pace's hold is read on the injected clock and waited out on it (no real sleep), and a
stop lets every waiter through."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from exchange.delivery.gate import InFlightGate
from exchange.domain import clock as clocks
from exchange.domain.pace import Pace


class FakeClock:
    """A monotonic clock that moves only when the test moves it: its timers never fire."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def now(self) -> float:
        return self.now_s

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.Handle:
        return asyncio.get_running_loop().call_later(3600.0, callback)


def _pace(limit: int) -> Pace:
    return Pace(max_limit=limit, max_delay=30.0, hold_base=0.25, initial_limit=limit)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_no_more_requests_in_flight_than_the_limit_and_each_end_lets_one_waiter_go() -> None:
    async def run() -> tuple[int, int, int]:
        stopping = False
        gate = InFlightGate(_pace(2), monotonic=FakeClock(), stopping=lambda: stopping)
        entered = [asyncio.create_task(gate.enter()) for _ in range(4)]
        await _settle()
        at_limit = sum(t.done() for t in entered)
        gate.leave()
        await _settle()
        after_one_end = sum(t.done() for t in entered)
        in_flight = gate.in_flight
        stopping = True
        gate.wake_all()
        await asyncio.gather(*entered)
        return at_limit, after_one_end, in_flight

    assert (2, 3, 2) == asyncio.run(run())


def test_a_hold_is_read_on_the_injected_clock() -> None:
    async def run() -> tuple[bool, bool]:
        clock = FakeClock()
        pace = _pace(4)
        pace.hold_until = clock.now_s + 60.0  # a site refusal holds every request a minute
        gate = InFlightGate(pace, monotonic=clock, stopping=lambda: False)
        waiting = asyncio.create_task(gate.enter())
        await _settle()
        held = not waiting.done()
        clock.now_s += 61.0  # the hold ran out on the gate's clock, not on the real one
        gate.wake_all()
        await _settle()
        return held, waiting.done()

    assert (True, True) == asyncio.run(run())


def test_a_stop_lets_every_waiter_through_at_once() -> None:
    async def run() -> int:
        stopping = False
        gate = InFlightGate(_pace(1), monotonic=FakeClock(), stopping=lambda: stopping)
        await gate.enter()
        waiting = [asyncio.create_task(gate.enter()) for _ in range(3)]
        await _settle()
        assert not any(t.done() for t in waiting)
        stopping = True
        gate.wake_all()
        await asyncio.wait_for(asyncio.gather(*waiting), timeout=0.5)
        return gate.in_flight

    assert 4 == asyncio.run(run())


def test_a_hold_is_waited_out_on_the_injected_clock_not_slept() -> None:
    """A site's hold of a minute passes on a FakeMonotonic at once: the request goes within a
    real second (the margin: the loop's few turns take milliseconds), and the fake clock moved
    on by the hold, no less (the request did not jump the hold) and no more than a second's
    rounding past it."""

    async def run() -> timedelta:
        wall = clocks.FakeClock()
        started = wall.now()
        monotonic = clocks.FakeMonotonic(wall)
        pace = _pace(4)
        pace.hold_until = monotonic.now() + 60.0
        gate = InFlightGate(pace, monotonic=monotonic, stopping=lambda: False)
        await asyncio.wait_for(gate.enter(), timeout=1.0)
        return wall.now() - started

    moved = asyncio.run(run())
    assert timedelta(seconds=60) <= moved <= timedelta(seconds=61)


def test_a_hold_shorter_than_the_fake_clocks_microsecond_still_passes() -> None:
    """The FakeClock counts whole microseconds: a wait of a tenth of one (a rate's slot ends
    anywhere) moves it on by one, not by none, so the request goes instead of the waiter
    asking again forever (found by the model test: a cycle that never ended)."""

    async def run() -> None:
        monotonic = clocks.FakeMonotonic(clocks.FakeClock())
        pace = _pace(4)
        pace.hold_until = monotonic.now() + 1e-7
        gate = InFlightGate(pace, monotonic=monotonic, stopping=lambda: False)
        await asyncio.wait_for(gate.enter(), timeout=1.0)

    asyncio.run(run())
