"""The site's probe turn (exchange/delivery/probe.py) between two workers, driven by a fake
monotonic clock and a fake turn row: one probes at a time, and a turn that ran out passes
to the other; and ``Pace`` owns who may probe: a worker alone without the turn, one of
several only with it."""

from __future__ import annotations

import asyncio
from typing import Any

from exchange.delivery.probe import TURN_ASK_EVERY, TURN_SECONDS, ProbeTurn
from exchange.domain.pace import Pace


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Row:
    """One turn row shared by the workers, on the fake clock (as ``DbLock``'s UPDATE)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.holder, self.until = clock, "", 0.0


class FakeLock:
    def __init__(self, row: Row, me: str) -> None:
        self.row, self.me = row, me

    def acquire(self, seconds: float) -> bool:
        now = self.row.clock()
        if self.row.until <= now or self.row.holder == self.me:
            self.row.holder, self.row.until = self.me, now + seconds
            return True
        return False

    def release(self, after: float = 0.0) -> None:
        if self.row.holder == self.me:
            self.row.holder, self.row.until = "", self.row.clock() + after


def _use_rate(pace: Pace, now: float) -> None:
    for n in range(20):  # 20 answers in the last second: the rate of 10 is used
        pace.answered(now - 1.0 + n / 20, 0.01)


def _wanting_pace(clock: FakeClock, workers: int) -> Pace:
    """A pace at its known-good rate that uses it: with others on the site, it wants to
    probe (``wants_probe``) and waits for the turn; alone, it starts probing at once."""
    pace = Pace(max_limit=8, max_delay=30.0, hold_base=0.25)
    pace.share(workers, turn_held=False)
    pace.rate = pace.good = 10.0
    _use_rate(pace, clock.now)
    assert pace.wants_probe(clock.now) == (workers > 1)
    return pace


def _turn(pace: Pace, row: Row, clock: FakeClock, me: str, reports: list[str]) -> ProbeTurn:
    report: dict[str, Any] = {"worker_id": me}
    return ProbeTurn(
        pace,
        FakeLock(row, me),
        monotonic=clock,
        live_workers=lambda: 2,
        report=lambda: report,
        write_report=lambda values: reports.append(values["worker_id"]),
    )


async def _answered(turn: ProbeTurn, now: float) -> None:
    turn.answered(now)
    task = turn.task
    if task is not None:
        await task


def test_of_two_workers_that_want_to_probe_only_one_may_at_a_time() -> None:
    async def run() -> list[tuple[bool, bool]]:
        clock = FakeClock()
        row = Row(clock)
        reports: list[str] = []
        a = _turn(_wanting_pace(clock, 2), row, clock, "a", reports)
        b = _turn(_wanting_pace(clock, 2), row, clock, "b", reports)
        seen = [(a.pace.may_probe, b.pace.may_probe)]  # nobody holds the turn
        await _answered(a, clock.now)
        await _answered(b, clock.now)
        seen.append((a.pace.may_probe, b.pace.may_probe))
        assert ["b"] == reports, "refused, the other worker reports itself"
        # A's turn runs out on the fake clock (a dead holder's ends by itself): B takes it.
        clock.now += TURN_SECONDS + TURN_ASK_EVERY
        await _answered(a, clock.now - TURN_ASK_EVERY)  # A sees its turn ran out
        _use_rate(b.pace, clock.now)  # B still sends at its known-good rate: it wants a turn
        await _answered(b, clock.now)
        seen.append((a.pace.may_probe, b.pace.may_probe))
        return seen

    assert [(False, False), (True, False), (False, True)] == asyncio.run(run())


def test_a_refused_claim_tells_a_worker_that_thought_itself_alone_it_is_not() -> None:
    async def run() -> tuple[bool, int, bool, bool]:
        clock = FakeClock()
        row = Row(clock)
        row.holder, row.until = "other", clock.now + TURN_SECONDS
        pace = _wanting_pace(clock, 1)
        turn = _turn(pace, row, clock, "me", [])
        assert pace.probing_since is not None  # alone, it probes and claims the turn as it starts
        await _answered(turn, clock.now)
        return pace.alone, pace.workers, pace.may_probe, turn.others_seen_within(1.0)

    assert (False, 2, False, True) == asyncio.run(run())


def test_a_worker_alone_may_probe_without_the_turn_one_of_several_only_with_it() -> None:
    pace = Pace(max_limit=4, max_delay=30.0, hold_base=0.25)
    pace.share(1, turn_held=False)
    alone = pace.may_probe
    pace.share(2, turn_held=False)
    with_another = pace.may_probe
    pace.turn_taken()
    holding = pace.may_probe
    pace.share(2, turn_held=True)  # a recount while the turn is held keeps it
    recounted_holding = pace.may_probe
    pace.turn_passed()
    passed_on = pace.may_probe
    pace.share(1, turn_held=False)
    pace.turn_passed()
    alone_again = pace.may_probe
    assert (True, False, True, True, False, True) == (
        alone,
        with_another,
        holding,
        recounted_holding,
        passed_on,
        alone_again,
    )
