"""A lock row in ``target_locks``: the database side of the Bitrix target's ``ExchangeLock``
port (exchange/targets/bitrix/lock.py), built by ``exchange.app``, and the site's probe turn
(``exchange.delivery.probe``: one worker at a time probes past its known-good rate,
contract 5c); and, as ``DbHold``, a channel-wide wait every worker keeps (the marketplaces'
``SharedHold`` port, exchange/targets/marketplace/hold.py: Ozon's "Circle is open"; its note,
Yandex Market's budget a minute learned from Yandex, changed only where it still says what
the writer read, ``renote``); and, as
``DbSlots``, so many places for requests at once shared by every worker (``SharedSlots``: Yandex
Market's parallel requests a business), a ``DbLock`` a place, and a row for the count a refusal
lowered them to (what count and for how long: the target's, ``yandex_market/pace.py``); and,
as ``DbLeft``, what is left of a budget until its window ends (``SharedLeft``: Yandex Market's
``X-RateLimit-Resource-Remaining``), each send taking its count from it.

Taken by one guarded UPDATE (free when its end has passed or when we hold it), so that two
workers never both get it, on SQLite and PostgreSQL alike; a holder that dies leaves it to
end by itself after ``seconds``.
"""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import (
    Engine,
    Integer,
    String,
    case,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from exchange.db.schema import target_locks
from exchange.domain.clock import Clock


class DbLock:
    def __init__(self, engine: Engine, name: str, holder: str, clock: Clock) -> None:
        self.engine, self.name, self.holder, self.clock = engine, name[:200], holder[:200], clock
        self._row_made = False  # the row exists (it is never deleted): one UPDATE per acquire

    def acquire(self, seconds: float, free_of: Sequence[str] = ()) -> bool:
        """Taken for ``seconds`` when free (or ours), and none of the rows ``free_of`` is
        held (a holder, its end not passed) in the same UPDATE."""
        now = self.clock.now()
        if not self._row_made:
            with contextlib.suppress(IntegrityError), self.engine.begin() as connection:
                found = connection.execute(
                    target_locks.select().where(target_locks.c.name == self.name)
                ).first()
                if found is None:
                    connection.execute(
                        target_locks.insert().values(name=self.name, holder=None, until=now)
                    )
            self._row_made = True
        guarded = (
            update(target_locks)
            .where(target_locks.c.name == self.name)
            .where(or_(target_locks.c.until <= now, target_locks.c.holder == self.holder))
        )
        if free_of:
            other = target_locks.alias("other")
            guarded = guarded.where(
                ~exists().where(
                    other.c.name.in_(list(free_of)),
                    other.c.holder.is_not(None),
                    other.c.until > now,
                )
            )
        with self.engine.begin() as connection:
            taken = connection.execute(
                guarded.values(holder=self.holder, until=now + timedelta(seconds=seconds))
            )
            return taken.rowcount == 1

    def release(self, after: float = 0.0) -> None:
        """Give the lock up; nobody may take it for ``after`` seconds more (a cool-down)."""
        with self.engine.begin() as connection:
            connection.execute(
                update(target_locks)
                .where(target_locks.c.name == self.name)
                .where(target_locks.c.holder == self.holder)
                .values(holder=None, until=self.clock.now() + timedelta(seconds=after))
            )


class DbHold:
    """A wait shared by every worker through the row ``name`` of ``target_locks``: its
    ``until`` is the moment the wait ends (no holder). Extended by one guarded UPDATE (never
    shortened: two workers that heard it each keep the later end), read by a SELECT."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name[:200]

    def until(self) -> datetime | None:
        return self.read()[0]

    def read(self) -> tuple[datetime | None, str | None]:
        """The wait's end and its note (kept in the row's ``holder``: a hold has no holder)."""
        # A read: SQLite's BEGIN, not the writers' BEGIN IMMEDIATE (every request reads it, and
        # four workers' requests queued on the write lock for a read, engine.py).
        with self.engine.connect().execution_options(read_only=True) as connection:
            found = connection.execute(
                select(target_locks.c.until, target_locks.c.holder).where(
                    target_locks.c.name == self.name
                )
            ).first()
        if found is None:
            return None, None
        return found[0], found[1]  # aware UTC (``UTCDateTime``)

    def hold(self, until: datetime, note: str | None = None) -> None:
        """The wait ends at ``until`` unless it already ends later, and its note becomes
        ``note`` (None: kept), in one UPDATE; the row is made on the first wait."""
        end = target_locks.c.until
        later = literal(until, end.type)
        with self.engine.begin() as connection:
            held = connection.execute(
                update(target_locks)
                .where(target_locks.c.name == self.name)
                .values(
                    until=case((end < later, later), else_=end),
                    holder=target_locks.c.holder if note is None else note[:200],
                )
            )
            made = held.rowcount == 1
        if not made:
            # The first wait: the row is made; another worker made it at once: this one's
            # UPDATE again, the later end kept.
            try:
                with self.engine.begin() as connection:
                    connection.execute(
                        target_locks.insert().values(
                            name=self.name, holder=None if note is None else note[:200], until=until
                        )
                    )
            except IntegrityError:
                self.hold(until, note)

    def renote(self, was: str | None, note: str | None) -> bool:
        """The note becomes ``note`` where it still is ``was``, in one guarded UPDATE (a note
        another worker wrote since stays); the wait's end as it is."""
        row = target_locks.c.name == self.name
        still = target_locks.c.holder.is_(None) if was is None else target_locks.c.holder == was
        with self.engine.begin() as connection:
            changed = connection.execute(
                update(target_locks)
                .where(row, still)
                .values(holder=None if note is None else note[:200])
            )
            return changed.rowcount == 1


class DbLeft:
    """What is left of a budget until its window ends (``SharedLeft``), the row ``name`` of
    ``target_locks``: ``until`` the window's end, ``holder`` the count left. Each send takes
    its count by one guarded UPDATE, so that two workers never both spend the last of it."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name[:200]

    def told(self, until: datetime, left: int) -> None:
        left = max(0, left)
        with self.engine.begin() as connection:
            row = target_locks.c.name == self.name
            later = connection.execute(
                update(target_locks)
                .where(row, target_locks.c.until < until)
                .values(until=until, holder=str(left))
            )
            fewer = connection.execute(
                update(target_locks)
                .where(
                    row, target_locks.c.until == until, cast(target_locks.c.holder, Integer) > left
                )
                .values(holder=str(left))
            )
            if later.rowcount or fewer.rowcount:
                return
            exists = connection.execute(select(target_locks.c.name).where(row)).first()
        if exists is None:
            try:
                with self.engine.begin() as connection:
                    connection.execute(
                        target_locks.insert().values(name=self.name, holder=str(left), until=until)
                    )
            except IntegrityError:  # another worker made it at once
                self.told(until, left)

    def take(self, count: int, now: datetime) -> datetime | None:
        row = target_locks.c.name == self.name
        with self.engine.begin() as connection:
            left = cast(target_locks.c.holder, Integer)
            taken = connection.execute(
                update(target_locks)
                .where(row, target_locks.c.until > now, left >= count)
                .values(holder=cast(left - count, String))
            )
            if taken.rowcount:
                return None
            found = connection.execute(
                select(target_locks.c.until).where(row, target_locks.c.until > now)
            ).first()
        return None if found is None else found[0]


class DbSlots:
    """``count`` places (the rows ``name:0`` … ``name:count-1``), each a ``DbLock``: a request
    takes a free one (its end passed, or released) and gives it back when it ends, so that the
    workers of an account together never have more than ``count`` requests in flight. Each
    request of this process holds a place under a holder of its own (``count`` of them: this
    process never has more in flight).

    Fewer places when a refusal lowered them (``lower``): the row ``name:of count`` holds the
    count (in ``holder``) and the end of the lowering (``until``); a request then takes one of
    the first ``places`` only, and none while a place beyond them is still held. Its name
    carries ``count``: another ``ym_parallel`` begins afresh."""

    def __init__(self, engine: Engine, name: str, count: int, clock: Clock) -> None:
        self.engine, self.name, self.count, self.clock = engine, name, max(1, count), clock
        self._places = [f"{name}:{k}"[:200] for k in range(self.count)]
        self._lowered = DbHold(engine, f"{name}:of {self.count}")
        me = uuid.uuid4().hex[:12]
        self._free = [f"{me}:{k}" for k in range(self.count)]
        self._locks: dict[tuple[int, str], DbLock] = {}
        self._mutex = threading.Lock()

    def _lock(self, place: int, holder: str) -> DbLock:
        with self._mutex:
            return self._locks.setdefault(
                (place, holder), DbLock(self.engine, f"{self.name}:{place}", holder, self.clock)
            )

    def take(self, seconds: float, places: int | None = None) -> str | None:
        within = self.count if places is None else max(1, min(self.count, places))
        beyond = self._places[within:]
        with self._mutex:
            if not self._free:
                return None
            holder = self._free.pop()
        try:
            first = random.randrange(within)
            for step in range(within):
                place = (first + step) % within
                if self._lock(place, holder).acquire(seconds, beyond):
                    holder_kept = holder
                    holder = ""
                    return f"{place}|{holder_kept}"
            return None
        finally:
            if holder:
                with self._mutex:
                    self._free.append(holder)

    def give(self, token: str, after: float = 0.0) -> None:
        place, _, holder = token.partition("|")
        try:
            self._lock(int(place), holder).release(after)
        finally:
            with self._mutex:
                self._free.append(holder)

    def taken(self) -> int:
        with self.engine.connect().execution_options(read_only=True) as connection:
            held = connection.execute(
                select(func.count())
                .select_from(target_locks)
                .where(
                    target_locks.c.name.in_(self._places),
                    target_locks.c.holder.is_not(None),
                    target_locks.c.until > self.clock.now(),
                )
            ).scalar_one()
        return int(held)

    def lowered(self) -> tuple[int | None, datetime | None]:
        until, note = self._lowered.read()
        if note is None or not note.isdigit():
            return None, None
        return int(note), until

    def lower(self, places: int, until: datetime) -> None:
        row, now = self._lowered.name, self.clock.now()
        with self.engine.begin() as connection:
            replaced = connection.execute(
                update(target_locks)
                .where(
                    target_locks.c.name == row,
                    or_(
                        target_locks.c.until <= now,
                        cast(target_locks.c.holder, Integer) > places,
                    ),
                )
                .values(holder=str(places), until=until)
            )
            if replaced.rowcount:
                return
            kept = connection.execute(
                update(target_locks)
                .where(target_locks.c.name == row, target_locks.c.until < until)
                .values(until=until)
            )
            if kept.rowcount:
                return
            found = connection.execute(
                select(target_locks.c.name).where(target_locks.c.name == row)
            ).first()
        if found is None:
            try:  # the first lowering: the row is made (another worker's at once: lowered again)
                with self.engine.begin() as connection:
                    connection.execute(
                        target_locks.insert().values(name=row, holder=str(places), until=until)
                    )
            except IntegrityError:
                self.lower(places, until)

    def keep(self, until: datetime) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                update(target_locks)
                .where(
                    target_locks.c.name == self._lowered.name,
                    target_locks.c.until > self.clock.now(),
                    target_locks.c.until < until,
                )
                .values(until=until)
            )
