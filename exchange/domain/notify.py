"""Whether to tell the operators now (issue 16 item 6): a pure decision, tested by tables.

What needs a person (``Situation``) is compared with what they were last told (``Told``): the
quarantine gained entries (one quarantined after the newest entry already told), or delivery
stopped for a cause not yet told. Either is news, and news goes out at most once per period:
``every`` after the last attempt. A cause that has gone (the breaker closed again) is forgotten
without a message, so that its return is news again.

The decision names the state to write; the caller writes it with one conditional statement
(``version`` must still be the one read), so that of several processes sharing the database
only one sends in a period (exchange/ops/notify.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


class Stop(StrEnum):
    """Why delivery stopped: what only a person (or the site's people) can end."""

    BREAKER = "breaker"  # a worker's circuit breaker is open: the site keeps failing
    TOKEN = "token"  # the site refused the token (401/403): delivery paused
    OPERATOR = "operator"  # an operator paused delivery in the workbench
    NO_WORKER = "no-worker"  # work waits and no worker has reported for a while


@dataclass(frozen=True, slots=True)
class Situation:
    """What needs a person now."""

    quarantined: int = 0
    # The newest entry's quarantine time: an entry quarantined after the one last told is new.
    newest_quarantined_at: datetime | None = None
    stops: frozenset[Stop] = frozenset()


@dataclass(frozen=True, slots=True)
class Told:
    """What the operators were last told, as kept in the database (version 0: never)."""

    version: int = 0
    attempted_at: datetime | None = None
    quarantine_mark: datetime | None = None
    stops: frozenset[Stop] = frozenset()


@dataclass(frozen=True, slots=True)
class Decision:
    send: bool = False
    gained: bool = False  # the quarantine gained entries since the last message
    new_stops: frozenset[Stop] = field(default_factory=frozenset)
    # The state to write (with version + 1), or None: nothing changes.
    remember: Told | None = None


def decide(situation: Situation, told: Told, now: datetime, every: timedelta) -> Decision:
    """Send now, remember without sending, or do nothing."""
    newest = situation.newest_quarantined_at
    gained = newest is not None and (told.quarantine_mark is None or newest > told.quarantine_mark)
    new_stops = situation.stops - told.stops
    due = told.attempted_at is None or now >= told.attempted_at + every
    if (gained or new_stops) and due:
        mark = told.quarantine_mark
        if newest is not None and (mark is None or newest > mark):
            mark = newest
        return Decision(
            send=True,
            gained=gained,
            new_stops=frozenset(new_stops),
            remember=Told(told.version + 1, now, mark, situation.stops),
        )
    gone = told.stops - situation.stops
    if gone:
        # Forgotten without a message: when the cause returns, it is news again.
        kept = frozenset(told.stops & situation.stops)
        return Decision(
            gained=gained,
            new_stops=frozenset(new_stops),
            remember=Told(told.version + 1, told.attempted_at, told.quarantine_mark, kept),
        )
    return Decision(gained=gained, new_stops=frozenset(new_stops))
