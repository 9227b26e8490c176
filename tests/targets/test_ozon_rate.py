"""Ozon's requests a second kept by the target (exchange/targets/ozon/rate.py; research §1.3):
at most the rate's requests in any window, each counted from its answer, a request in flight
holding its place; and the target's every request takes a place. The clock is a fake one moved
by the waits (no test waits for real)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conformance import price

from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.domain.verdicts import Verdict
from exchange.targets.ozon.rate import RequestRate
from exchange.targets.ozon.target import OzonTarget


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_at_most_the_rates_requests_in_a_window_then_one_waits_for_the_oldest_to_age() -> None:
    clock = FakeTime()
    rate = RequestRate(5, monotonic=clock.monotonic, sleep=clock.sleep)

    async def scenario() -> list[float]:
        went = []
        for _ in range(7):
            slot = rate.slot()
            await slot.take()
            went.append(clock.now)
            clock.now += 0.01  # the answer comes a little later
            slot.done()
        return went

    went = asyncio.run(scenario())
    assert went[:5] == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])
    # The sixth waits until the first answer (at 0.01) is a window (5 / 5 per s) old.
    assert went[5] == pytest.approx(1.01) and went[6] == pytest.approx(1.02)


def test_a_request_in_flight_holds_its_place_and_counts_from_its_answer() -> None:
    clock = FakeTime()
    rate = RequestRate(1, monotonic=clock.monotonic, sleep=clock.sleep)

    async def scenario() -> float:
        first = rate.slot()
        await first.take()
        second = asyncio.create_task(rate.slot().take())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not second.done(), "one request a second: the second waits for the first"
        clock.now = 0.7  # the first travelled slowly: answered 0.7 s after it went
        first.done()
        await second
        return clock.now

    went = asyncio.run(scenario())
    assert went == pytest.approx(1.7), "a second after the first's answer, not its sending"


def test_a_slot_never_taken_gives_nothing_back_and_no_rate_keeps_nothing() -> None:
    rate = RequestRate(None)

    async def scenario() -> None:
        for _ in range(100):
            slot = rate.slot()
            await slot.take()
            slot.done()
        rate_one = RequestRate(1)
        rate_one.slot().done()  # failed before its turn: nothing was taken
        assert rate_one.wait(0.0) == 0.0

    asyncio.run(scenario())
    with pytest.raises(ValueError):
        RequestRate(0)


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    simulator = OzonSimulator("836741", "ozon-key", time_scale=0)
    simulator.limits.rps = None  # the simulator refuses nothing: the target keeps the rate
    simulator.start()
    yield simulator
    simulator.stop()


def test_the_target_sends_at_most_its_requests_a_second_before_it_waits(
    ozon: OzonSimulator,
) -> None:
    clock = FakeTime()
    sent_before_waiting: list[int] = []

    async def sleep(seconds: float) -> None:
        sent_before_waiting.append(ozon.requests[IMPORT_PRICES])
        await clock.sleep(seconds)

    made = OzonTarget(
        ozon.url,
        "836741",
        lambda: "ozon-key",
        price_types={"retail": "price"},
        clock=ozon.clock.now,
        requests_per_second=3,
        monotonic=clock.monotonic,
        sleep=sleep,
    )

    async def scenario() -> list[Verdict]:
        try:
            verdicts = []
            for n in range(7):
                (answer,) = await made.send([price(f"SKU-{n}", 1, "100.00")])
                verdicts.append(answer.verdict)
            return verdicts
        finally:
            await made.aclose()

    verdicts = asyncio.run(scenario())
    assert verdicts == [Verdict.DELIVERED] * 7
    assert sent_before_waiting == [3, 6], "three a second, then a wait for the window"
    assert ozon.requests[IMPORT_PRICES] == 7
