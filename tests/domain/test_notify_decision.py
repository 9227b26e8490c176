"""Issue 16 item 6: when to tell the operators, as a table (``domain.notify.decide``).

News (the quarantine gained an entry, delivery stopped for a new cause) goes out at most once per
period; a cause that has gone is forgotten, so that its return is news again, and when the last
told cause goes, "delivery runs again" is told at once, neither waiting for the period nor
starting one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain.notify import Decision, Situation, Stop, Told, decide

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def quarantine(count: int, newest_minutes: float) -> Situation:
    return Situation(count, at(newest_minutes), frozenset())


def stopped(*stops: Stop, count: int = 0, newest: float | None = None) -> Situation:
    return Situation(count, at(newest) if newest is not None else None, frozenset(stops))


NEVER = Told()
TOLD_AT_0 = Told(version=3, attempted_at=at(0), quarantine_mark=at(-1))


@pytest.mark.parametrize(
    ("case", "situation", "told", "now", "expected"),
    [
        ("all well, never told: nothing", Situation(), NEVER, at(0), Decision()),
        (
            "first entries ever: send, remember the newest",
            quarantine(2, -5),
            NEVER,
            at(0),
            Decision(True, True, frozenset(), Told(1, at(0), at(-5), frozenset())),
        ),
        (
            "an entry newer than the one told, within the period: nothing yet",
            quarantine(3, 10),
            TOLD_AT_0,
            at(30),
            Decision(gained=True),
        ),
        (
            "the same entry after the period: nothing (not news)",
            quarantine(1, -1),
            TOLD_AT_0,
            at(61),
            Decision(),
        ),
        (
            "an entry newer than the one told, after the period: send",
            quarantine(3, 10),
            TOLD_AT_0,
            at(60),
            Decision(True, True, frozenset(), Told(4, at(60), at(10), frozenset())),
        ),
        (
            "fewer entries (retried), none newer: nothing",
            quarantine(0, -1),
            TOLD_AT_0,
            at(90),
            Decision(),
        ),
        (
            "delivery stops, never told: send",
            stopped(Stop.BREAKER),
            NEVER,
            at(0),
            Decision(True, False, frozenset({Stop.BREAKER}), Told(1, at(0), None, {Stop.BREAKER})),
        ),
        (
            "a stop already told: nothing, even after the period",
            stopped(Stop.OPERATOR),
            Told(2, at(0), None, frozenset({Stop.OPERATOR})),
            at(600),
            Decision(),
        ),
        (
            "a second cause within the period: waits",
            stopped(Stop.OPERATOR, Stop.TOKEN),
            Told(2, at(0), None, frozenset({Stop.OPERATOR})),
            at(5),
            Decision(new_stops=frozenset({Stop.TOKEN})),
        ),
        (
            "the told causes have gone: delivery resumed, told at once, the period unchanged",
            Situation(workers=1),
            Told(2, at(0), at(-1), frozenset({Stop.BREAKER, Stop.OPERATOR})),
            at(5),
            Decision(
                send=True,
                remember=Told(3, at(0), at(-1), frozenset()),
                resumed=frozenset({Stop.BREAKER, Stop.OPERATOR}),
            ),
        ),
        (
            "a breaker gone with its worker (no worker reports): no resumption, forgotten",
            Situation(),
            Told(2, at(0), at(-1), frozenset({Stop.BREAKER})),
            at(5),
            Decision(remember=Told(3, at(0), at(-1), frozenset())),
        ),
        (
            "an operator's pause lifted while no worker reports: resumed (the operator's act)",
            Situation(),
            Told(2, at(0), at(-1), frozenset({Stop.OPERATOR})),
            at(5),
            Decision(
                send=True,
                remember=Told(3, at(0), at(-1), frozenset()),
                resumed=frozenset({Stop.OPERATOR}),
            ),
        ),
        (
            "one of two told causes gone: still stopped, forgotten without a message",
            stopped(Stop.TOKEN),
            Told(2, at(0), None, frozenset({Stop.BREAKER, Stop.TOKEN})),
            at(5),
            Decision(remember=Told(3, at(0), None, frozenset({Stop.TOKEN}))),
        ),
        (
            "resumed while a new entry waits for the period: resumed told, the entry still news",
            Situation(2, at(3), frozenset(), workers=1),
            Told(2, at(0), at(-1), frozenset({Stop.BREAKER})),
            at(5),
            Decision(
                send=True,
                remember=Told(3, at(0), at(-1), frozenset()),
                resumed=frozenset({Stop.BREAKER}),
            ),
        ),
        (
            "resumed and a new entry after the period: one message for both",
            Situation(2, at(50), frozenset(), workers=1),
            Told(2, at(0), at(-1), frozenset({Stop.TOKEN})),
            at(60),
            Decision(
                True,
                True,
                frozenset(),
                Told(3, at(60), at(50), frozenset()),
                resumed=frozenset({Stop.TOKEN}),
            ),
        ),
        (
            "a stop never told (it came within the period) has gone: nothing",
            Situation(),
            Told(2, at(0), at(-1), frozenset()),
            at(5),
            Decision(),
        ),
        (
            "one cause gone, a new one within the period: the gone is forgotten, the new waits",
            stopped(Stop.NO_WORKER),
            Told(2, at(0), None, frozenset({Stop.BREAKER})),
            at(5),
            Decision(
                new_stops=frozenset({Stop.NO_WORKER}),
                remember=Told(3, at(0), None, frozenset()),
            ),
        ),
        (
            "both news after the period: one message for both",
            stopped(Stop.TOKEN, count=4, newest=50),
            Told(7, at(0), at(-1), frozenset()),
            at(60),
            Decision(True, True, frozenset({Stop.TOKEN}), Told(8, at(60), at(50), {Stop.TOKEN})),
        ),
    ],
)
def test_decide(
    case: str, situation: Situation, told: Told, now: datetime, expected: Decision
) -> None:
    assert expected == decide(situation, told, now, HOUR), case


def test_a_cause_that_returns_after_it_was_forgotten_is_news_again() -> None:
    told = decide(stopped(Stop.BREAKER), NEVER, at(0), HOUR).remember
    assert told is not None
    closed = decide(Situation(), told, at(10), HOUR).remember
    assert closed is not None and closed.stops == frozenset()
    reopened = decide(stopped(Stop.BREAKER), closed, at(70), HOUR)
    assert reopened.send and reopened.new_stops == {Stop.BREAKER}


SITUATIONS = [
    Situation(),
    Situation(workers=1),
    Situation(1, at(0), frozenset(), workers=2),
    stopped(Stop.BREAKER),
    stopped(Stop.TOKEN),
    stopped(Stop.BREAKER, Stop.OPERATOR),
    stopped(Stop.NO_WORKER, count=1, newest=0),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SITUATIONS), st.integers(1, 90)), max_size=40))
def test_delivery_resumed_is_told_only_after_a_told_stop_and_only_when_nothing_stops_it(
    steps: list[tuple[Situation, int]],
) -> None:
    told, now = Told(), T0
    stop_messages = resumed_messages = 0
    for situation, minutes in steps:
        now += timedelta(minutes=minutes)
        decision = decide(situation, told, now, HOUR)
        if decision.send and decision.new_stops:
            stop_messages += 1
        if decision.resumed:
            assert decision.send and not situation.stops
            assert situation.workers > 0 or decision.resumed == {Stop.OPERATOR}
            assert decision.resumed <= told.stops  # only what was told
            resumed_messages += 1
            assert resumed_messages <= stop_messages
        if decision.remember is not None:
            if decision.send and not (decision.gained or decision.new_stops):
                assert decision.remember.attempted_at == told.attempted_at  # no new period
            told = decision.remember
