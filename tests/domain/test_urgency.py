"""The claim order's promises (domain/urgency.py), stated on a model of the queue: a shop that
takes ``CAPACITY`` messages a tick, the claim taking the lowest ranks first (ties: the older
message), and takes of new messages dealt in by a rule. Two bounds:

- freshness: a small take (a correction: at most a fifth of the shop's capacity arriving a
  tick) staged while a backlog of any size drains is claimed in the tick it arrives or the
  next, never behind the backlog;
- no starvation: the oldest message waiting when the backlog is ``B`` is claimed within
  1.2 × ``B`` ÷ ``CAPACITY`` ticks.

Today's id order breaks the first and newest-first breaks the second; the tests show both, so
that the checks are known to fail when the bound is broken."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain import urgency

CAPACITY = 10  # messages claimed a tick

Rule = Callable[[int | None, int, int], range]  # (head, count, next id) -> ranks


def dealt_from_the_head(head: int | None, count: int, next_id: int) -> range:
    return urgency.ranks(head, count)


def id_order(head: int | None, count: int, next_id: int) -> range:
    return range(next_id, next_id + count)


def newest_first(head: int | None, count: int, next_id: int) -> range:
    return range(-next_id, -next_id - count, -1)


@dataclass
class Queue:
    rule: Rule
    waiting: dict[int, int] = field(default_factory=dict)  # id -> rank
    arrived: dict[int, int] = field(default_factory=dict)  # id -> tick
    claimed: dict[int, int] = field(default_factory=dict)  # id -> tick
    next_id: int = 0

    def take(self, count: int, tick: int) -> list[int]:
        head = min(self.waiting.values(), default=None)
        ids = list(range(self.next_id, self.next_id + count))
        for message, rank in zip(ids, self.rule(head, count, self.next_id), strict=True):
            self.waiting[message] = rank
            self.arrived[message] = tick
        self.next_id += count
        return ids

    def claim(self, tick: int) -> None:
        for message in sorted(self.waiting, key=lambda m: (self.waiting[m], m))[:CAPACITY]:
            del self.waiting[message]
            self.claimed[message] = tick


def run(rule: Rule, backlog: int, takes: list[int]) -> tuple[Queue, list[int], list[str]]:
    """A backlog staged at tick 0, then ``takes[t]`` new messages at tick ``t + 1``; returns
    the queue, the messages of small takes, and every broken no-starvation bound."""
    queue = Queue(rule)
    queue.take(backlog, 0)
    small: list[int] = []
    watched: list[tuple[int, int, int]] = []  # (oldest waiting, at tick, backlog then)
    tick = 0
    while True:
        if 0 < tick <= len(takes) and takes[tick - 1]:
            ids = queue.take(takes[tick - 1], tick)
            if takes[tick - 1] * 5 <= CAPACITY:
                small += ids
        if not queue.waiting and tick > len(takes):
            break
        if queue.waiting:
            watched.append((min(queue.waiting), tick, len(queue.waiting)))
        queue.claim(tick)
        tick += 1
    starved = [
        f"message {oldest}, oldest of {size} at tick {at}, claimed at {queue.claimed[oldest]}"
        for oldest, at, size in watched
        if queue.claimed[oldest] - at > math.ceil(1.2 * size / CAPACITY)
    ]
    return queue, small, starved


def late(queue: Queue, small: list[int]) -> list[str]:
    return [
        f"message {m} staged at tick {queue.arrived[m]}, claimed at {queue.claimed[m]}"
        for m in small
        if queue.claimed[m] - queue.arrived[m] > 1
    ]


@settings(max_examples=200, deadline=None)
@given(
    backlog=st.integers(0, 400),
    takes=st.lists(st.integers(0, CAPACITY // 5), max_size=60),
)
def test_a_correction_is_claimed_at_once_and_the_backlog_never_starves(
    backlog: int, takes: list[int]
) -> None:
    queue, small, starved = run(dealt_from_the_head, backlog, takes)
    assert not late(queue, small)
    assert not starved


@settings(max_examples=100, deadline=None)
@given(
    backlog=st.integers(0, 400),
    takes=st.lists(st.integers(0, CAPACITY), max_size=40),
)
def test_the_oldest_message_is_never_starved_even_by_heavy_arrivals(
    backlog: int, takes: list[int]
) -> None:
    """New takes as large as the shop's whole capacity, every tick: the backlog's oldest
    message still goes within its bound (it stays at the head)."""
    _, _, starved = run(dealt_from_the_head, backlog, takes)
    assert not starved


def test_id_order_breaks_freshness() -> None:
    """Today's order: a correction staged at tick 2 behind 400 waits for all of them."""
    queue, small, _ = run(id_order, 400, [0, 1])
    assert late(queue, small) == ["message 400 staged at tick 2, claimed at 40"]


def test_newest_first_breaks_the_bound_on_waiting() -> None:
    """Fresh first, with no aging: takes of half the capacity every tick hold the oldest
    message of the backlog far past 1.2 x backlog / capacity; dealing in keeps it."""
    heavy = [CAPACITY // 2] * 40
    assert run(newest_first, 100, heavy)[2]
    assert not run(dealt_from_the_head, 100, heavy)[2]


def test_a_prioritized_rank_goes_before_everything_waiting() -> None:
    assert urgency.prioritized(7) < 7
    assert urgency.prioritized(None) < urgency.ranks(None, 1)[0]
