"""Review wb4xx34: what one worker learns of the Wildberries account's bucket (a 4xx charged as
ten requests, a 429), the channel's other workers keep too (contract 14; research §2.3: one
bucket per seller account; a 4xx counted as ten, for Prices UNCONFIRMED, §8), through a hold
the workers share (``SharedHold``; the database's ``DbHold`` in a worker). Two budgets on a
fake clock and a hold in memory here; two workers against the simulator in
tests/integration/test_wb_workers_share_the_4xx_wait.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exchange.dev.dbkit import SqliteTemplate
from exchange.targets.wildberries.budget import (
    FOUR_XX_WEIGHT,
    SAFETY,
    Budget,
    Later,
    after_hold,
    back_at,
)

RATE = 10 / 6.0 * SAFETY  # WB's 10 requests / 6 s, as the budget counts them


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + 1_700_000_000.0

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class MemoryHold:
    def __init__(self) -> None:
        self.end: datetime | None = None
        self.reads = 0

    def until(self) -> datetime | None:
        self.reads += 1
        return self.end

    def hold(self, until: datetime) -> None:
        if self.end is None or until > self.end:
            self.end = until


def budget(time: FakeTime, hold: MemoryHold, draw: float = 0.5) -> Budget:
    made = Budget(monotonic=time.monotonic, sleep=time.sleep, wall=time.wall, draw=lambda: draw)
    made.shared_with(lambda: hold)
    made.share(2)
    return made


def test_back_at_is_when_the_bucket_holds_a_request_and_no_bar_holds_it() -> None:
    assert 10.0 == back_at(10.0, 1.0, 2.0, 0.0)
    assert 14.5 == back_at(10.0, -8.0, 2.0, 0.0)  # nine tokens short at two a second
    assert 20.0 == back_at(10.0, -8.0, 2.0, 20.0)  # a 429's bar ends later
    # Another's hold: the bucket's next token comes 1 + draw tokens' time after it.
    assert -0.25 - 3.0 == after_hold(10.0, 11.5, 2.0, 0.25)


def test_a_4xx_one_worker_heard_holds_the_others_requests_until_the_account_is_back() -> None:
    """Two workers' budgets (each half the account): the first hears a 4xx charged as ten
    (``X-Ratelimit-Remaining: 0``) and writes the hold until its bucket says the account
    holds a request again; the second's next request waits for it (not refused, not sent
    into WB's empty bucket), and goes a token of its share after the first's."""
    time, hold = FakeTime(), MemoryHold()
    first, second = budget(time, hold), budget(time, hold)

    async def scenario() -> tuple[float, float, float]:
        await first.take("upload")
        first.answered_4xx(0)
        await first.tell_others()
        assert hold.end is not None
        ends = hold.end.timestamp() - time.wall() + time.now
        await second.take("upload")
        second_at = time.now
        time.now = ends
        await first.take("upload")  # its own hold: its bucket says as much
        return ends, second_at, time.now

    ends, second_at, first_at = asyncio.run(scenario())
    share = RATE / 2
    # The first worker's bucket: one token taken, then its half of the nine more.
    assert ends - 1000.0 == pytest.approx((1.0 + (FOUR_XX_WEIGHT - 1) / 2) / share)
    assert second_at == pytest.approx(ends + 1.5 / share), "a token and a half after the hold"
    assert first_at == pytest.approx(ends), "the worker that heard it goes first, at its end"
    assert second.refusals == 0


def test_a_429_one_worker_heard_holds_the_other_too_and_a_send_puts_it_off() -> None:
    """A 429 with ``X-Ratelimit-Retry: 60`` (another program spent the account): the other
    worker's request inside a send (``most``) is put off (``Later``), nothing taken."""
    time, hold = FakeTime(), MemoryHold()
    first, second = budget(time, hold), budget(time, hold)

    async def scenario() -> float:
        first.refused(60.0)
        await first.tell_others()
        try:
            await second.take("upload", most=5.0)
        except Later as later:
            return later.seconds
        raise AssertionError("the second worker's request went into the 429's minute")

    assert asyncio.run(scenario()) >= 60.0
    assert second.taken["upload"] == 0


def test_without_a_shared_hold_a_budget_reads_nothing() -> None:
    time, hold = FakeTime(), MemoryHold()
    alone = Budget(monotonic=time.monotonic, sleep=time.sleep, wall=time.wall)

    async def scenario() -> None:
        await alone.take("upload")
        alone.answered_4xx(0)
        await alone.tell_others()

    asyncio.run(scenario())
    assert hold.reads == 0 and hold.end is None


def test_the_worker_built_for_a_database_shares_the_tokens_hold_never_the_token(
    tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    """``bootstrap.wildberries_target`` with a database: the budget's hold is a
    ``target_locks`` row named by a digest of the token, the same for two workers' targets."""
    from sqlalchemy import select

    from exchange import app as bootstrap
    from exchange.db.engine import make_engine
    from exchange.db.schema import target_locks
    from exchange.dev.testing import fast_settings

    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    token = "header.payload-of-the-seller.signature"
    settings = fast_settings(
        url, None, target="wildberries", wb_api_url="http://127.0.0.1:9", wb_token=token
    )
    try:
        first = bootstrap.wildberries_target(settings, engine=engine)
        second = bootstrap.wildberries_target(settings, engine=engine)
        until = datetime(2030, 1, 1, tzinfo=UTC)
        first.budget._others().hold(until)
        assert until == second.budget._others().until()
        with engine.connect() as connection:
            names = list(connection.execute(select(target_locks.c.name)).scalars())
        assert len(names) == 1 and names[0].startswith("wb budget:"), names
        assert token not in names[0] and "payload" not in names[0]
    finally:
        engine.dispose()
