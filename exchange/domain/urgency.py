"""The claim order (issue 23): who goes first when more is waiting than the shop takes at once.

The rule, in one sentence: **each take of new messages is dealt in from the head of the
queue, one message per place, beside the backlog already waiting.** Every message gets a
``claim_rank`` when intake stores it: the take's ``k``-th message (in staging order) gets
``head + k``, where ``head`` is the lowest rank still waiting (``queue.order.head_rank``); the
claim takes the lowest ranks first (ties: the older message). So a reload of 6,000 staged at
once gets the places ``head .. head + 5,999`` in its own order, and a correction staged 8 s
later gets the place at the head: it is claimed with the next batch, whatever the backlog's
size, while the reload goes on in its order right behind it. Two reloads share the shop one
for one (each in its order).

Why this rule, against the alternatives the issue names (and today's id order):

- **Id order** (first staged, first claimed) holds a correction behind the whole backlog:
  65 s behind 6,000 prices at 100 requests/s, 80 min behind 100,000 at 20/s.
- **Fresh first with aging by wall time** (a message younger than a bound goes before older
  ones; one older than it, first) fails as soon as the backlog itself is older than the bound:
  from then on every correction waits behind all of it again.
- **Lanes by package size** need a size that separates "small" from "reload", and 1C's own
  rows arrive one by one (a reload is many takes of 5,000); a lane per source does not help a
  correction that comes the same way as the reload.
- **Corrections of delivered aggregates first** misses a new SKU, which is as urgent.

Dealing in from the head needs no rate, no clock and no threshold, and its bounds are stated
in messages: a message taken when the head is at ``h`` waits only for the messages already
placed at ranks up to ``h`` (at most one per take still draining, plus what is delayed and
due again), so with ``t`` takes draining it is claimed within ``t`` places; the oldest
message of a backlog of ``B`` waits behind at most the ``B`` before it and whatever later
takes were dealt in ahead of it, so while new arrivals use at most a sixth of the shop's
capacity it is delivered within ``B / (C - λ)`` ≤ 1.2 × ``B / C``. The backlog's own order
(and so its pace) is unchanged: ranks only interleave.

An operator's ``exchange prioritize`` gives one pending message the rank before the head
(``prioritized``): it is the next claimed, and the rank belongs to that message, so priority
ends with it. It changes nothing else: the claim still takes only what is due (``Retry-After``),
in order (strict kinds), and only while the pace, the breaker and a pause let the worker claim.
"""

from __future__ import annotations

from collections.abc import Mapping


def ranks(head: int | None, count: int) -> range:
    """The ranks of a take of ``count`` messages, in staging order, dealt in from ``head``
    (the lowest rank still waiting; ``None`` when nothing waits)."""
    start = 0 if head is None else head
    return range(start, start + count)


def prioritized(head: int | None) -> int:
    """The rank that puts one message before everything waiting (an operator's priority)."""
    return (0 if head is None else head) - 1


def shifts(heads: Mapping[int, int | None]) -> tuple[int | None, dict[int, int]]:
    """Dealing one take in on every channel (contract 13), each from its own head: ``heads``
    is each channel's lowest rank waiting (channel id -> rank or None), in the order the
    channels were registered. Returns the head the take's ranks are dealt from (the first
    channel's, whose ranks the message's own ``claim_rank`` keeps) and each channel's shift:
    what to add to a message's rank to have its rank on that channel (``head + k`` there)."""
    if not heads:
        return None, {}
    first = heads[next(iter(heads))]
    base = ranks(first, 0).start
    return first, {channel: ranks(head, 0).start - base for channel, head in heads.items()}
