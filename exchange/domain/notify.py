"""Whether to tell the operators now (issue 16 item 6): a pure decision, tested by tables.

What needs a person (``Situation``) is compared with what they were last told (``Told``): the
quarantine gained entries (one quarantined after the newest entry already told), or delivery
stopped for a cause not yet told. Either is news, and news goes out at most once per period:
``every`` after the last attempt. A told cause that has gone is forgotten, so that its return is
news again; when the last of them goes and a worker reports, delivery runs again, and that is
told at once (whoever was told it stopped wants to know they need not act), once: it neither
waits for the period nor starts a new one, is never retried, and follows only a stop that was
told. A breaker that is gone because its worker stopped reporting is no resumption (no worker
while work waits is a stop of its own).

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
    # 1C's (the intake's) sign-ins refused in the last hour with none accepted since
    # (contract 15): prices cannot come in; delivery itself may run.
    SIGN_IN_1C = "sign-in-refused:1c"
    SIGN_IN_INTAKE = "sign-in-refused:intake"


# The stops that hold what comes in, not delivery: their presence never says delivery stopped.
SIGN_IN_STOPS = frozenset({Stop.SIGN_IN_1C, Stop.SIGN_IN_INTAKE})

# An operator's pause of one channel (``exchange pause --channel NAME``, contract 13) is that
# channel's stop: ``operator:NAME``, beside the ``Stop`` members (a stop is their text).
CHANNEL_PAUSE = f"{Stop.OPERATOR.value}:"


def channel_pause_stop(channel: str) -> str:
    """The stop of an operator's pause of ``channel`` alone."""
    return CHANNEL_PAUSE + channel


def paused_channel(stop: str) -> str | None:
    """The channel an operator's pause of one channel holds, or None for any other stop."""
    return stop[len(CHANNEL_PAUSE) :] if stop.startswith(CHANNEL_PAUSE) else None


# Work waiting on a registered channel no configured channel serves (a channel renamed in
# the settings: ``ops.attention.unserved``, ``status``'s ``unserved:NAME`` cause): a stop of
# that channel, ``unserved:NAME``, which no worker ends (a person configures it or drops it).
UNSERVED = "unserved:"


def unserved_stop(channel: str) -> str:
    """The stop of work waiting on ``channel``, which no configured channel serves."""
    return UNSERVED + channel


def unserved_channel(stop: str) -> str | None:
    """The channel of an ``unserved`` stop, or None for any other stop."""
    return stop[len(UNSERVED) :] if stop.startswith(UNSERVED) else None


# Messages of a kind no registered channel takes, kept with no delivery (contract 1: nothing is
# dropped silently; ``db.channels.kept_nowhere``, ``status``'s ``no-channel:KIND`` cause): a
# stop of that kind, ``no-channel:KIND``, which no worker ends (a person configures a channel
# that takes the kind).
NO_CHANNEL = "no-channel:"


def no_channel_stop(kind: str) -> str:
    """The stop of messages of ``kind``, which no channel takes."""
    return NO_CHANNEL + kind


def no_channel_kind(stop: str) -> str | None:
    """The kind of a ``no-channel`` stop, or None for any other stop."""
    return stop[len(NO_CHANNEL) :] if stop.startswith(NO_CHANNEL) else None


def is_stop(text: str) -> bool:
    """Whether ``text`` (as kept in the database) is a stop this version knows."""
    return (
        text in Stop.__members__.values()
        or bool(paused_channel(text))
        or bool(unserved_channel(text))
        or bool(no_channel_kind(text))
    )


def _a_person_ends(stop: str) -> bool:
    """A stop whose end needs no worker to report: an operator's pause (of every channel or
    of one) ends by the resume itself; the sign-ins by a sign-in; work on a channel no one
    serves by that channel configured again or dropped; messages no channel takes by a
    channel that takes their kind."""
    return (
        stop == Stop.OPERATOR
        or stop in SIGN_IN_STOPS
        or paused_channel(stop) is not None
        or unserved_channel(stop) is not None
        or no_channel_kind(stop) is not None
    )


@dataclass(frozen=True, slots=True)
class Situation:
    """What needs a person now."""

    quarantined: int = 0
    # The newest entry's quarantine time: an entry quarantined after the one last told is new.
    newest_quarantined_at: datetime | None = None
    stops: frozenset[str] = frozenset()
    # Workers that reported lately: a breaker or a refused token is gone when a worker says
    # so, not when the worker that had it stopped reporting.
    workers: int = 0
    # Contract 13: prices a channel took and withholds from buyers until a person confirms
    # them, and when the newest became withheld (one withheld after the mark told is news).
    withheld: int = 0
    newest_withheld_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Told:
    """What the operators were last told, as kept in the database (version 0: never)."""

    version: int = 0
    attempted_at: datetime | None = None
    quarantine_mark: datetime | None = None
    stops: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Decision:
    send: bool = False
    gained: bool = False  # the quarantine gained entries since the last message
    new_stops: frozenset[str] = field(default_factory=frozenset)
    # The state to write (with version + 1), or None: nothing changes.
    remember: Told | None = None
    # Told causes that have gone, leaving none: delivery runs again.
    resumed: frozenset[str] = field(default_factory=frozenset)
    # A channel withheld prices since the last message (contract 13).
    withheld_gained: bool = False


def decide(situation: Situation, told: Told, now: datetime, every: timedelta) -> Decision:
    """Send now, remember without sending, or do nothing."""
    mark = told.quarantine_mark
    gained = _after(situation.newest_quarantined_at, mark)
    # One mark for both (the told row's ``quarantine_mark``): the newest entry told, whether
    # quarantined or withheld; each moves forward in time, so what is after it is new.
    withheld_gained = _after(situation.newest_withheld_at, mark)
    newest = max(
        (t for t in (situation.newest_quarantined_at, situation.newest_withheld_at) if t),
        default=None,
    )
    new_stops = situation.stops - told.stops
    due = told.attempted_at is None or now >= told.attempted_at + every
    gone = told.stops - situation.stops
    runs = not (situation.stops - SIGN_IN_STOPS) and (
        situation.workers > 0 or all(_a_person_ends(stop) for stop in gone)
    )
    resumed = frozenset(gone) if gone and runs else frozenset[str]()
    if (gained or withheld_gained or new_stops) and due:
        if newest is not None and (mark is None or newest > mark):
            mark = newest
        return Decision(
            send=True,
            gained=gained,
            withheld_gained=withheld_gained,
            new_stops=frozenset(new_stops),
            remember=Told(told.version + 1, now, mark, situation.stops),
            resumed=resumed,
        )
    if gone:
        # Forgotten, so that its return is news again; told only when delivery runs again.
        kept = frozenset(told.stops & situation.stops)
        return Decision(
            send=bool(resumed),
            gained=gained and not resumed,
            withheld_gained=withheld_gained and not resumed,
            new_stops=frozenset(new_stops),
            remember=Told(told.version + 1, told.attempted_at, told.quarantine_mark, kept),
            resumed=resumed,
        )
    return Decision(gained=gained, withheld_gained=withheld_gained, new_stops=frozenset(new_stops))


def _after(newest: datetime | None, mark: datetime | None) -> bool:
    return newest is not None and (mark is None or newest > mark)
