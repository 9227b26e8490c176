"""The workbench's sign-in throttle (contract 11, issue 21 item 7).

A sign-in is judged before its password is verified, so parallel guesses gain nothing: an
address or a name that failed lately waits (doubling with each failure, up to a cap) and is
answered 429 meanwhile; at most a few sign-ins per name, per address and in all are verified
at once.

A name's penalty applies only to an address that itself failed at least twice lately
(``Limits.shared``), so nobody can lock a known operator out by guessing their name from
elsewhere, not even one who mistyped once: the name's penalty is kept up by failures at any
address, so an address that met it after a single failure of its own would wait as long as a
stranger kept guessing (an hour, the window of that one failure). Two failures, not a share of
the name's: a stranger's addresses are each a small share, so a rule by share would spare them
and hold the operator. What the name's penalty still buys: an address that comes back after
two wrong guesses waits until the name has been quiet for its penalty (up to 16 s), so a few
addresses guessing in turn are held to the name's pace, not each to its own; an address that
never comes back was never refused (it has no failures), whatever the rule. The price: an
operator who mistyped twice within the hour can be kept out (her address's own wait long
over) while someone keeps guessing her name elsewhere; she signs in from another address or
when the guessing stops.

A known device has a lane of its own (OWASP's "device cookie"): a sign-in that carries a valid
device cookie for the name it signs into (the workbench sets one at each successful sign-in) is
judged by its device's record and slots alone, never by the name's penalty nor by the per-name
and overall slots that strangers can keep busy, so no flood of wrong guesses from fresh
addresses locks out an operator who signed in on that browser before. The lane has bounds of
its own, so a stolen device cookie is no brute-force tool: one sign-in at a time per device, a
penalty for the device's own failures (the same doubling), and ``Limits.devices`` at once in
all.

``decide`` is the rule, a pure function of the records and the time; ``Throttle`` keeps the
records (in memory, per serve process) with a clock that tests inject. Not in the database:
contract 9 says an unauthenticated request changes nothing there, so several serve processes
on one database each count their own (stated in ``exchange serve --help`` and
docs/deployment.md, "Wrong passwords: counted per serve process").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Limits:
    delay: float = 1.0  # the wait after one failure, doubled for each further one
    delay_max: float = 16.0
    window: float = 3600.0  # failures older than this are forgotten
    per_name: int = 2  # sign-ins verified at once for one name
    per_address: int = 1  # ... from one address
    overall: int = 8  # ... in all (the argon2 threads are few)
    busy_wait: float = 1.0  # what a 429 for "too many at once" asks the client to wait
    shared: int = 2  # an address's own recent failures from which the name's penalty holds it
    per_device: int = 1  # sign-ins with one device cookie verified at once
    devices: int = 4  # ... with any device cookie, in all (a lane apart from the eight)


@dataclass(frozen=True, slots=True)
class Record:
    failures: int = 0
    last: float = 0.0  # when the last failure was answered (the throttle's clock)


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    retry_after: float = 0.0  # seconds, when refused

    @property
    def retry_after_header(self) -> str:
        return str(max(1, math.ceil(self.retry_after)))


def recent(record: Record, now: float, limits: Limits) -> bool:
    return record.failures > 0 and now - record.last <= limits.window


def penalty(record: Record, now: float, limits: Limits) -> float:
    """Seconds ``record`` still refuses (0: none)."""
    if not recent(record, now, limits):
        return 0.0
    wait = min(limits.delay * 2.0 ** (record.failures - 1), limits.delay_max)
    return max(0.0, record.last + wait - now)


def wait(name: Record, address: Record, now: float, limits: Limits) -> float:
    """Seconds this address still waits before trying this name (0: none): its own penalty,
    and the name's once the address itself failed ``limits.shared`` times lately (see the
    module's docstring)."""
    own = penalty(address, now, limits)
    if recent(address, now, limits) and address.failures >= limits.shared:
        return max(own, penalty(name, now, limits))
    return own


def decide(
    name: Record,
    address: Record,
    busy_name: int,
    busy_address: int,
    busy_all: int,
    now: float,
    limits: Limits,
) -> Verdict:
    """Whether a sign-in may have its password verified now."""
    waiting = wait(name, address, now, limits)
    if waiting > 0:
        return Verdict(False, waiting)
    if (
        busy_address >= limits.per_address
        or busy_name >= limits.per_name
        or busy_all >= limits.overall
    ):
        return Verdict(False, limits.busy_wait)
    return Verdict(True)


class Throttle:
    """The records of one serve process. ``admit`` before verifying; ``done`` after."""

    KEPT = 10_000  # records kept at most (the oldest go first)

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.records: dict[str, Record] = {}
        self.busy: dict[str, int] = {}
        self.busy_all = 0
        self.busy_devices = 0
        # The device lane's rule is ``decide`` with the device as the address, no name.
        self._device_limits = replace(
            limits, per_address=limits.per_device, overall=limits.devices, per_name=1
        )

    @staticmethod
    def _keys(name: str, address: str) -> tuple[str, str]:
        return f"name:{name}", f"addr:{address}"

    def admit(self, name: str, address: str, *, device: str | None = None) -> Verdict:
        """``device``: the device a valid device cookie for ``name`` names (its own lane, see
        the module's docstring); None: none, or not valid for this name."""
        if device is not None:
            return self._admit_device(f"device:{device}")
        by_name, by_address = self._keys(name, address)
        verdict = decide(
            self.records.get(by_name, Record()),
            self.records.get(by_address, Record()),
            self.busy.get(by_name, 0),
            self.busy.get(by_address, 0),
            self.busy_all,
            self.clock(),
            self.limits,
        )
        if verdict.allowed:
            for key in (by_name, by_address):
                self.busy[key] = self.busy.get(key, 0) + 1
            self.busy_all += 1
        return verdict

    def _admit_device(self, key: str) -> Verdict:
        verdict = decide(
            Record(),
            self.records.get(key, Record()),
            0,
            self.busy.get(key, 0),
            self.busy_devices,
            self.clock(),
            self._device_limits,
        )
        if verdict.allowed:
            self.busy[key] = self.busy.get(key, 0) + 1
            self.busy_devices += 1
        return verdict

    def done(
        self, name: str, address: str, *, failed: bool | None, device: str | None = None
    ) -> float:
        """Ends an admitted sign-in; after a failure, the seconds this address now waits for
        this name (the failed answer is held that long, so a client that tries one at a time
        is slowed, never refused). ``failed=None``: not judged (the database failed).
        ``device``: as given to ``admit``."""
        if device is not None:
            return self._done_device(name, f"device:{device}", failed)
        by_name, by_address = self._keys(name, address)
        self._release(by_name, by_address)
        self.busy_all -= 1
        now = self.clock()
        if failed is None:
            return 0.0
        if not failed:
            # The name's record only: signing in to one's own account must not wipe the
            # address's failures on other names.
            self.records.pop(by_name, None)
            return 0.0
        self._fail(now, by_name, by_address)
        return wait(self.records[by_name], self.records[by_address], now, self.limits)

    def _done_device(self, name: str, key: str, failed: bool | None) -> float:
        self._release(key)
        self.busy_devices -= 1
        now = self.clock()
        if failed is None:
            return 0.0
        if not failed:
            self.records.pop(f"name:{name}", None)
            self.records.pop(key, None)
            return 0.0
        # The device's own failures only: its owner's mistakes never feed the name's penalty
        # (strangers'), and strangers' never reach this lane.
        self._fail(now, key)
        return penalty(self.records[key], now, self.limits)

    def _release(self, *keys: str) -> None:
        for key in keys:
            left = self.busy.get(key, 0) - 1
            if left > 0:
                self.busy[key] = left
            else:
                self.busy.pop(key, None)

    def _fail(self, now: float, *keys: str) -> None:
        for key in keys:
            old = self.records.pop(key, Record())
            count = old.failures + 1 if recent(old, now, self.limits) else 1
            self.records[key] = Record(count, now)  # re-inserted: the dict's order is by age
        self._forget(now)

    def _forget(self, now: float) -> None:
        if len(self.records) <= self.KEPT:
            return
        for key in [k for k, r in self.records.items() if not recent(r, now, self.limits)]:
            del self.records[key]
        while len(self.records) > self.KEPT:
            del self.records[next(iter(self.records))]


# A shared secret (1C's password, the intake's token) is checked in microseconds, so nothing
# is gained by bounding how many checks run at once: only the penalty after a wrong one counts.
GUESS_LIMITS = Limits(per_name=10_000, per_address=10_000, overall=10_000)


class Guesses:
    """Wrong credentials at one way in that checks a shared secret (contract 9: an
    unauthenticated request is rate-limited). The workbench's rule, with the way in as the
    name: an address that sent a wrong secret waits 1 s, doubled for each further one (up to
    16 s), and its failed answer is held that long, so guessing one at a time is slowed and
    guessing in parallel is refused; an address with fewer than two recent failures is never
    refused for the failures of others, so an attacker elsewhere cannot lock 1C out after
    one wrong password of its own (the rule's price, 1C failing twice, is in the module's
    docstring)."""

    def __init__(self, door: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.door = door
        self.throttle = Throttle(GUESS_LIMITS, clock)

    def admit(self, address: str) -> Verdict:
        return self.throttle.admit(self.door, address)

    def judged(self, address: str, *, right: bool) -> float:
        """Ends an admitted check; the seconds to hold a wrong one's answer."""
        return self.throttle.done(self.door, address, failed=not right)

    def judge(self, address: str, check: Callable[[], bool]) -> tuple[bool, float]:
        """Runs ``check`` for an admitted request and ends it whatever happens: whether the
        secret was right, and the seconds to hold a wrong one's answer. A check that raises
        counts as a wrong secret and its slot is released before the error goes on (a slot
        kept by each failed check locked the way in for everyone: issue 33 item 8)."""
        right = False
        try:
            right = check()
        finally:
            hold = self.judged(address, right=right)
        return right, hold
