"""A lock row in ``target_locks``: the database side of the Bitrix target's ``ExchangeLock``
port (exchange/targets/bitrix/lock.py), built by ``exchange.app``, and the site's probe turn
(``exchange.delivery.probe``: one worker at a time probes past its known-good rate,
contract 5c); and, as ``DbHold``, a channel-wide wait every worker keeps (the marketplaces'
``SharedHold`` port, exchange/targets/marketplace/hold.py: Ozon's "Circle is open"); and, as
``DbSlots``, so many places for requests at once shared by every worker (``SharedSlots``: Yandex
Market's parallel requests a business), a ``DbLock`` a place.

Taken by one guarded UPDATE (free when its end has passed or when we hold it), so that two
workers never both get it, on SQLite and PostgreSQL alike; a holder that dies leaves it to
end by itself after ``seconds``.
"""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from datetime import datetime, timedelta

from sqlalchemy import Engine, or_, select, update
from sqlalchemy.exc import IntegrityError

from exchange.db.schema import target_locks
from exchange.domain.clock import Clock


class DbLock:
    def __init__(self, engine: Engine, name: str, holder: str, clock: Clock) -> None:
        self.engine, self.name, self.holder, self.clock = engine, name[:200], holder[:200], clock
        self._row_made = False  # the row exists (it is never deleted): one UPDATE per acquire

    def acquire(self, seconds: float) -> bool:
        now = self.clock.now()
        if not self._row_made:
            with contextlib.suppress(IntegrityError), self.engine.begin() as connection:
                exists = connection.execute(
                    target_locks.select().where(target_locks.c.name == self.name)
                ).first()
                if exists is None:
                    connection.execute(
                        target_locks.insert().values(name=self.name, holder=None, until=now)
                    )
            self._row_made = True
        with self.engine.begin() as connection:
            taken = connection.execute(
                update(target_locks)
                .where(target_locks.c.name == self.name)
                .where(or_(target_locks.c.until <= now, target_locks.c.holder == self.holder))
                .values(holder=self.holder, until=now + timedelta(seconds=seconds))
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
        with self.engine.connect() as connection:
            found = connection.execute(
                select(target_locks.c.until, target_locks.c.holder).where(
                    target_locks.c.name == self.name
                )
            ).first()
        if found is None:
            return None, None
        return found[0], found[1]  # aware UTC (``UTCDateTime``)

    def hold(self, until: datetime, note: str | None = None) -> None:
        with self.engine.begin() as connection:
            if note is not None:
                connection.execute(
                    update(target_locks)
                    .where(target_locks.c.name == self.name)
                    .values(holder=note[:200])
                )
            held = connection.execute(
                update(target_locks)
                .where(target_locks.c.name == self.name, target_locks.c.until < until)
                .values(until=until)
            )
            if held.rowcount:
                return
            exists = connection.execute(
                select(target_locks.c.name).where(target_locks.c.name == self.name)
            ).first()
        if exists is None:
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


class DbSlots:
    """``count`` places (the rows ``name:0`` … ``name:count-1``), each a ``DbLock``: a request
    takes a free one (its end passed, or released) and gives it back when it ends, so that the
    workers of an account together never have more than ``count`` requests in flight. Each
    request of this process holds a place under a holder of its own (``count`` of them: this
    process never has more in flight)."""

    def __init__(self, engine: Engine, name: str, count: int, clock: Clock) -> None:
        self.engine, self.name, self.count, self.clock = engine, name, max(1, count), clock
        me = uuid.uuid4().hex[:12]
        self._free = [f"{me}:{k}" for k in range(self.count)]
        self._locks: dict[tuple[int, str], DbLock] = {}
        self._mutex = threading.Lock()

    def _lock(self, place: int, holder: str) -> DbLock:
        with self._mutex:
            return self._locks.setdefault(
                (place, holder), DbLock(self.engine, f"{self.name}:{place}", holder, self.clock)
            )

    def take(self, seconds: float) -> str | None:
        with self._mutex:
            if not self._free:
                return None
            holder = self._free.pop()
        try:
            first = random.randrange(self.count)
            for step in range(self.count):
                place = (first + step) % self.count
                if self._lock(place, holder).acquire(seconds):
                    holder_kept = holder
                    holder = ""
                    return f"{place}|{holder_kept}"
            return None
        finally:
            if holder:
                with self._mutex:
                    self._free.append(holder)

    def give(self, token: str) -> None:
        place, _, holder = token.partition("|")
        try:
            self._lock(int(place), holder).release()
        finally:
            with self._mutex:
                self._free.append(holder)
