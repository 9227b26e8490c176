"""The workbench's sign-in throttle (contract 11, issue 21 item 7): a sign-in is judged before
its password is verified, so parallel guesses verify no more than the limits allow; 429 with
``Retry-After`` during a penalty; a name's penalty never refuses an address without recent
failures; behind the proxy the address is the right-most ``X-Forwarded-For`` entry; argon2
works on threads of its own, never on those that reach the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from web_helpers import running, web_settings
from workbench_helpers import PASSWORD, add_operator, log_in

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.ops import operators
from exchange.web.throttle import Limits, Record, Throttle, Verdict, decide

# The penalty tests wait real seconds for a held answer: never beside another timing test.
pytestmark = pytest.mark.timing

LIMITS = Limits(delay=1.0, delay_max=16.0, window=3600.0, per_name=2, per_address=1, overall=8)


# -- the rule, by table ----------------------------------------------------------------------

N, R, V = Record(), Record, Verdict
CASES = [
    # why: (name's record, address's record, busy for name/address/all, now, verdict)
    ("nothing against it", (N, N, (0, 0, 0), 100.0, V(True))),
    ("address waits 1 s after a failure", (N, R(1, 100.0), (0, 0, 0), 100.4, V(False, 0.6))),
    ("address's wait is over", (N, R(1, 100.0), (0, 0, 0), 101.0, V(True))),
    ("doubled for each failure", (N, R(3, 100.0), (0, 0, 0), 103.0, V(False, 1.0))),
    ("capped", (N, R(30, 100.0), (0, 0, 0), 110.0, V(False, 6.0))),
    ("forgotten after the window", (N, R(30, 100.0), (0, 0, 0), 3701.0, V(True))),
    ("name's wait spares a clean address", (R(9, 100.0), N, (0, 0, 0), 100.0, V(True))),
    ("... and one failed long ago", (R(9, 5000.0), R(4, 100.0), (0, 0, 0), 5000.0, V(True))),
    (
        "name's wait holds an address that failed twice",
        (R(9, 100.0), R(2, 99.0), (0, 0, 0), 100.5, V(False, 15.5)),
    ),
    # A stranger keeps the name's wait up: a single typo must not let them keep her out.
    ("... but spares one that failed once", (R(9, 100.0), R(1, 99.0), (0, 0, 0), 100.5, V(True))),
    ("one at a time per address", (N, N, (0, 1, 1), 100.0, V(False, 1.0))),
    ("two at a time per name", (N, N, (2, 0, 2), 100.0, V(False, 1.0))),
    ("eight at a time in all", (N, N, (0, 0, 8), 100.0, V(False, 1.0))),
    ("below every limit", (N, N, (1, 0, 7), 100.0, V(True))),
]


@pytest.mark.parametrize(("why", "case"), CASES)
def test_the_sign_in_rule(
    why: str, case: tuple[Record, Record, tuple[int, int, int], float, Verdict]
) -> None:
    name, address, busy, now, verdict = case
    got = decide(name, address, *busy, now, LIMITS)
    assert got.allowed == verdict.allowed, why
    assert got.retry_after == pytest.approx(verdict.retry_after), why


def test_the_throttle_counts_failures_and_a_success_clears_only_the_name() -> None:
    clock = [0.0]
    throttle = Throttle(LIMITS, clock=lambda: clock[0])
    assert throttle.admit("olga", "10.0.0.1").allowed
    assert not throttle.admit("olga", "10.0.0.1").allowed  # one at a time per address
    assert throttle.done("olga", "10.0.0.1", failed=True) == pytest.approx(1.0)
    assert throttle.admit("olga", "10.0.0.1").retry_after == pytest.approx(1.0)
    clock[0] = 1.0
    assert throttle.admit("olga", "10.0.0.1").allowed
    assert throttle.done("olga", "10.0.0.1", failed=True) == pytest.approx(2.0)
    clock[0] = 3.0
    assert throttle.admit("mine", "10.0.0.1").allowed  # the attacker's own account
    throttle.done("mine", "10.0.0.1", failed=False)
    assert throttle.admit("olga", "10.0.0.1").allowed  # address: 2 failures, 2 s: passed
    assert throttle.done("olga", "10.0.0.1", failed=True) == pytest.approx(4.0)  # not reset
    assert throttle.admit("olga", "10.0.0.2").allowed  # no failures there
    throttle.done("olga", "10.0.0.2", failed=None)  # the database failed: nothing counted
    assert throttle.busy == {} and throttle.busy_all == 0


def test_a_known_device_signs_in_through_a_strangers_flood_in_a_lane_of_its_own() -> None:
    """Issue 21 item 7, "nobody can lock a known operator out" (the R3-7 bypass): a stranger
    keeps the name's two slots and the overall eight busy with wrong guesses from fresh
    addresses, the name's penalty at its cap. Without a device cookie the operator waits like
    anyone; with one (``device``) she is judged by her device alone. The lane's own bounds keep
    a stolen device cookie from being a brute-force tool: one at a time per device, a penalty
    for the device's own failures, ``Limits.devices`` at once in all."""
    clock = [0.0]
    throttle = Throttle(LIMITS, clock=lambda: clock[0])
    for n in range(12):  # the name's penalty: 12 failures from 12 addresses
        assert throttle.admit("olga", f"stranger-{n}").allowed
        throttle.done("olga", f"stranger-{n}", failed=True)
    for n in range(2):  # slow wrong guesses hold the name's two slots ...
        assert throttle.admit("olga", f"fresh-{n}").allowed
    for n in range(6):  # ... and the overall eight
        assert throttle.admit(f"nobody-{n}", f"fresh-name-{n}").allowed
    assert throttle.busy_all == 8
    assert not throttle.admit("olga", "operator").allowed  # no device: the old rule
    assert not throttle.admit("anna", "operator").allowed  # another operator too (all eight)
    assert throttle.admit("olga", "operator", device="d1").allowed
    assert not throttle.admit("olga", "operator", device="d1").allowed  # one at a time
    assert throttle.done("olga", "operator", failed=True, device="d1") == pytest.approx(1.0)
    assert throttle.records["name:olga"].failures == 12  # her typo feeds no stranger's rule
    refused = throttle.admit("olga", "operator", device="d1")  # the device's own penalty
    assert not refused.allowed and refused.retry_after == pytest.approx(1.0)
    clock[0] += 1.0
    assert throttle.admit("olga", "operator", device="d1").allowed
    assert throttle.done("olga", "operator", failed=True, device="d1") == pytest.approx(2.0)
    clock[0] += 2.0
    for n in range(1, LIMITS.devices + 1):  # a small cap for the lane in all
        assert throttle.admit("olga", "operator", device=f"d{n}").allowed
    refused = throttle.admit("olga", "operator", device="d99")
    assert not refused.allowed and refused.retry_after == pytest.approx(LIMITS.busy_wait)
    throttle.done("olga", "operator", failed=False, device="d1")
    assert "device:d1" not in throttle.records and "name:olga" not in throttle.records
    for n in range(2, LIMITS.devices + 1):
        throttle.done("olga", "operator", failed=None, device=f"d{n}")
    assert throttle.busy_devices == 0 and throttle.busy_all == 8  # the strangers' own


def test_the_names_wait_holds_addresses_that_come_back_but_not_a_single_typo() -> None:
    """The name's penalty still paces addresses that guess in turn, once each failed twice,
    while the operator who mistyped once signs in as soon as her own wait is over."""
    clock = [0.0]
    throttle = Throttle(LIMITS, clock=lambda: clock[0])

    def fail(address: str) -> float:
        assert throttle.admit("olga", address).allowed
        return throttle.done("olga", address, failed=True)

    assert fail("operator") == pytest.approx(1.0)
    clock[0] = 1.0
    assert fail("stranger-1") == pytest.approx(1.0)  # its own wait, not the name's
    clock[0] = 2.0
    assert fail("stranger-1") == pytest.approx(4.0)  # twice: now the name's (4 failures)
    clock[0] = 3.0
    fail("stranger-2")
    clock[0] = 6.0  # stranger-1's own 2 s are over, the name's 8 s (from 3.0) are not
    refused = throttle.admit("olga", "stranger-1")
    assert not refused.allowed and refused.retry_after == pytest.approx(5.0)
    assert throttle.admit("olga", "operator").allowed
    assert throttle.done("olga", "operator", failed=False) == 0.0


# -- against a running serve -----------------------------------------------------------------


class CountingHasher:
    """The real argon2 hasher, counting verifications, how many run at once, and where."""

    def __init__(self, real: Any, hold: float) -> None:
        self.real, self.hold = real, hold
        self.calls = self.running = self.most = 0
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def hash(self, password: str) -> str:
        return str(self.real.hash(password))

    def verify(self, hashed: str, password: str) -> bool:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name)
        try:
            time.sleep(self.hold)  # a slow machine: the window parallel guesses aim at
            return bool(self.real.verify(hashed, password))
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def long_penalty(monkeypatch: pytest.MonkeyPatch) -> float:
    """A first failure's wait long enough for the test to act inside it on a slow machine."""
    made = bootstrap.web_config
    monkeypatch.setattr(
        bootstrap, "web_config", lambda s: replace(made(s), login_delay=5.0, login_delay_max=20.0)
    )
    return 5.0


@pytest.fixture
def hasher(monkeypatch: pytest.MonkeyPatch) -> CountingHasher:
    counting = CountingHasher(operators._hasher, hold=0.3)
    monkeypatch.setattr(operators, "_hasher", counting)
    return counting


def _sign_in(base: str, password: str, address: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": address} if address else {}
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        return log_in(client, "olga", password)


def _at_once(base: str, guesses: list[tuple[str, str | None]]) -> list[httpx.Response]:
    start = threading.Barrier(len(guesses))

    def one(guess: tuple[str, str | None]) -> httpx.Response:
        start.wait()
        return _sign_in(base, *guess)

    with ThreadPoolExecutor(len(guesses)) as pool:
        return list(pool.map(one, guesses))


def test_twenty_parallel_guesses_from_one_address_verify_one_password(
    db_url: str, db: Engine, tmp_path: Path, hasher: CountingHasher
) -> None:
    add_operator(db, "olga", "operator")
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        answers = _at_once(base, [(f"guess number {i}", None) for i in range(20)])
    codes = sorted(a.status_code for a in answers)
    assert codes == [401] + [429] * 19
    assert hasher.calls == 1
    for answer in answers:
        if answer.status_code == 429:
            assert int(answer.headers["Retry-After"]) >= 1
    assert all(name.startswith("exchange-argon2") for name in hasher.threads), hasher.threads


def test_parallel_guesses_from_many_addresses_verify_two_at_a_time_for_one_name(
    db_url: str, db: Engine, tmp_path: Path, hasher: CountingHasher
) -> None:
    add_operator(db, "olga", "operator")
    settings = web_settings(db_url, tmp_path / "1c", http_behind_proxy=True)
    with running(settings) as base:
        answers = _at_once(base, [(f"guess {i}", f"10.0.1.{i}") for i in range(20)])
    assert hasher.most <= 2
    assert {a.status_code for a in answers} == {401, 429}


def test_during_the_penalty_even_the_right_password_is_answered_429(
    db_url: str, db: Engine, tmp_path: Path, long_penalty: float
) -> None:
    add_operator(db, "olga", "operator")
    with running(web_settings(db_url, tmp_path / "1c")) as base, ThreadPoolExecutor(1) as pool:
        wrong = pool.submit(_sign_in, base, "a wrong guess")  # held 5 s once failed
        time.sleep(1.0)
        right = _sign_in(base, PASSWORD)
        assert right.status_code == 429 and 1 <= int(right.headers["Retry-After"]) <= 5
        assert wrong.result().status_code == 401
        assert "exchange_wb" not in right.cookies
        # One at a time, the failed answer is slowed instead, so the next try is judged.
        assert _sign_in(base, PASSWORD).status_code == 303


def test_a_names_penalty_never_locks_out_an_address_without_failures(
    db_url: str, db: Engine, tmp_path: Path, long_penalty: float
) -> None:
    add_operator(db, "olga", "operator")
    settings = web_settings(db_url, tmp_path / "1c", http_behind_proxy=True)
    attacker, operator = "203.0.113.7", "198.51.100.20"
    with running(settings) as base, ThreadPoolExecutor(1) as pool:
        guessing = pool.submit(_sign_in, base, "a wrong guess", attacker)
        time.sleep(1.0)  # the name "olga" and the attacker's address are under a penalty
        assert _sign_in(base, PASSWORD, attacker).status_code == 429
        # The attacker cannot step out of its address by writing another one to the left:
        # the proxy's own entry, the right-most, is the address.
        assert _sign_in(base, PASSWORD, f"{operator}, {attacker}").status_code == 429
        assert _sign_in(base, PASSWORD, operator).status_code == 303
        assert guessing.result().status_code == 401
