"""A channel-wide wait every worker of a marketplace account keeps (contract 14): a moment
before which no request of a method goes, whichever worker heard why (Ozon's "Circle is open",
research §1.3: the method blocked for a few minutes after "a lot of requests"; a second worker
sending into it would only prolong the block). ``SharedHold`` is the port the target reads and
extends it through (``exchange.db.target_lock.DbHold``: a ``target_locks`` row);
``NO_SHARED_HOLD``, its no-database default (``exchange check``, the tests of one process):
none, this process's own wait only. ``note``: a word kept with the wait (Yandex Market's
budget a minute as the workers learned it from Yandex's named limit, so that every worker
divides that one; ``renote`` changes it when Yandex names another).
``SharedTurn``: the one request of the account that goes first when such a wait ends (the
wait's end is a moment every worker reads alike, so each would send at it), the others once
it is answered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class SharedHold(Protocol):
    def until(self) -> datetime | None:
        """The moment the wait ends (UTC; it may have passed); None: never held."""
        ...

    def hold(self, until: datetime, note: str | None = None) -> None:
        """The wait lasts at least until ``until`` (a later one already held stays); ``note``,
        when given, is kept with it."""
        ...

    def read(self) -> tuple[datetime | None, str | None]:
        """``until`` and the note kept with the wait (None: none)."""
        ...

    def renote(self, was: str | None, note: str | None) -> bool:
        """The note becomes ``note`` (None: none) if it still is ``was`` (another worker's
        word since stays), the wait as it is: False when it was not (or never held)."""
        ...


class _NoSharedHold:
    def until(self) -> datetime | None:
        return None

    def hold(self, until: datetime, note: str | None = None) -> None:
        return None

    def read(self) -> tuple[datetime | None, str | None]:
        return None, None

    def renote(self, was: str | None, note: str | None) -> bool:
        return False


NO_SHARED_HOLD: SharedHold = _NoSharedHold()


class SharedLeft(Protocol):
    """What is left of a budget until its window ends, as the account's last answers said it
    (Yandex Market's ``X-RateLimit-Resource-Remaining`` and ``-Until``, research §3.3), each
    send of any worker taking its share from it first: ``exchange.db.target_lock.DbLeft``."""

    def told(self, until: datetime, left: int) -> None:
        """An answer said ``left`` until ``until``: a later window's count replaces the one
        kept; in the same window the smaller stays (an answer sent earlier counts less)."""
        ...

    def take(self, count: int, now: datetime) -> datetime | None:
        """``count`` taken from what is left (None: taken, or no window in force is known);
        a moment: fewer are left until then, nothing taken."""
        ...


class _NoSharedLeft:
    def told(self, until: datetime, left: int) -> None:
        return None

    def take(self, count: int, now: datetime) -> datetime | None:
        return None


NO_SHARED_LEFT: SharedLeft = _NoSharedLeft()


class SharedSlots(Protocol):
    """At most so many requests at once, whichever worker of the account sends them (Yandex
    Market's parallel requests a business, research §3.3): ``exchange.db.target_lock.DbSlots``,
    one ``target_locks`` row a place, and one row for the count a refusal lowered them to
    (the target decides it: ``exchange.targets.yandex_market.pace.parallel_heard``)."""

    def take(self, seconds: float, places: int | None = None) -> str | None:
        """A place for one request among the first ``places`` (None: all of them), held
        ``seconds`` at most (a holder that dies leaves it to end by itself): its token, or None
        when every one is taken, or one beyond ``places`` is still held (a lowering's
        requests in flight end first)."""
        ...

    def give(self, token: str, after: float = 0.0) -> None:
        """The request ended: its place is free ``after`` seconds from now (a request cut off
        by our timeout may still be in flight)."""
        ...

    def taken(self) -> int:
        """The places held now, by every worker."""
        ...

    def lowered(self) -> tuple[int | None, datetime | None]:
        """The count the places were lowered to and until when that holds (None: never)."""
        ...

    def lower(self, places: int, until: datetime) -> None:
        """At most ``places`` from now on until ``until``: a lower count already in force
        stays, and the later end; one that lapsed is replaced."""
        ...

    def keep(self, until: datetime) -> None:
        """A lowering still in force holds until ``until`` at least (one that lapsed stays
        lapsed)."""
        ...


class _NoSharedSlots:
    def take(self, seconds: float, places: int | None = None) -> str | None:
        return ""

    def give(self, token: str, after: float = 0.0) -> None:
        return None

    def taken(self) -> int:
        return 0

    def lowered(self) -> tuple[int | None, datetime | None]:
        return None, None

    def lower(self, places: int, until: datetime) -> None:
        return None

    def keep(self, until: datetime) -> None:
        return None


NO_SHARED_SLOTS: SharedSlots = _NoSharedSlots()


class SharedTurn(Protocol):
    """One worker of the account at a time (``exchange.db.target_lock.DbLock``): the request
    that goes first after a shared wait ends (Ozon's "Circle is open": one request probes
    whether the method works again, the others go once it is answered)."""

    def acquire(self, seconds: float) -> bool:
        """The turn, held ``seconds`` at most (a holder that dies leaves it to end by
        itself); False: another worker holds it."""
        ...

    def release(self, after: float = 0.0) -> None:
        """The turn given back."""
        ...


class _NoSharedTurn:
    def acquire(self, seconds: float) -> bool:
        return True

    def release(self, after: float = 0.0) -> None:
        return None


NO_SHARED_TURN: SharedTurn = _NoSharedTurn()
