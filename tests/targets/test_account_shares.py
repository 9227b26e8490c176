"""A marketplace's limits are the seller account's, and the channel's live workers split them
(contract 14; research §1.3, §2.3, §3.3), as they split EXCHANGE_SITE_MAX_RATE: each worker's
target keeps its share (``SharesAccount.share``), which ``DeliveryLoop.share_site`` sets from
the same count of live workers (review 32: two ``exchange run --channel wb`` workers on one
database drew 14 HTTP 429 where one drew none; two on Yandex Market, a 420).

The budgets' division on a fake clock moved by the waits; then two Wildberries targets, as two
workers' are, against the simulator at WB's limit (scaled to a second), and the worker's loop
telling its target the live workers it counted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conformance import price
from test_wildberries import make

from exchange.db.engine import make_engine
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.testing import fast_settings
from exchange.dev.wbsim import Limits, Switches, WbSimulator
from exchange.domain.clock import FakeClock, FakeMonotonic
from exchange.domain.verdicts import Classification
from exchange.targets.base import SharesAccount
from exchange.targets.ozon.rate import RequestRate
from exchange.targets.ozon.target import OzonTarget
from exchange.targets.wildberries.budget import SAFETY, Budget
from exchange.targets.wildberries.store import MemoryWbStore
from exchange.targets.wildberries.target import WildberriesTarget
from exchange.targets.yandex_market.pace import OfferBudget, Parallel
from exchange.targets.yandex_market.target import YandexMarketTarget
from exchange.worker import DeliveryLoop, Metrics


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _most_in_any(window: float, sent: list[tuple[float, int]]) -> int:
    """The most counted in any ``window`` seconds of ``sent`` (moment, count)."""
    return max(sum(n for at, n in sent if start <= at < start + window) for start, _ in sent)


# -- Wildberries: 10 requests / 6 s, burst 5, per seller account (§2.3) --------------------------


def test_wb_budget_shared_by_two_keeps_half_the_rate_and_burst() -> None:
    """Promise: two live workers each keep half the account's bucket: 5 requests / 6 s, a
    burst of 2 (whole tokens, never more than the account's between them)."""
    clock = FakeTime()
    budget = Budget(monotonic=clock.monotonic, sleep=clock.sleep)
    clock.now = 6.0  # the bucket refilled whole
    budget.share(2)
    assert (budget.rate, budget.shared.burst) == (pytest.approx(5 / 6 * SAFETY), 2.0)

    async def scenario() -> list[tuple[float, int]]:
        went = []
        while clock.now < 60.0:
            await budget.take("upload")
            went.append((clock.now, 1))
        return went

    went = asyncio.run(scenario())
    assert [6.0, 6.0] == [at for at, _ in went[:2]], "the burst: two at once"
    assert went[2][0] == pytest.approx(6 + 6 / 5 / SAFETY), "then one a share's interval"
    # The two workers together never pass the account's 10 a period after its burst of 5.
    assert 2 * _most_in_any(6.0, went) <= 5 + 10, went
    assert len(went) <= 2 + 54 * 5 / 6 + 1


def test_wb_budget_keeps_at_least_one_request_a_period_and_a_burst_of_one() -> None:
    clock = FakeTime()
    budget = Budget(monotonic=clock.monotonic, sleep=clock.sleep)
    budget.share(30)
    assert (budget.rate, budget.shared.burst) == (pytest.approx(1 / 6 * SAFETY), 1.0)
    assert budget.polls.burst >= 1.0
    budget.share(1)  # the others stopped: the whole account again
    assert (budget.rate, budget.shared.burst) == (pytest.approx(10 / 6 * SAFETY), 5.0)


def test_wb_budget_shared_keeps_no_more_tokens_than_its_burst() -> None:
    """A worker that had the whole burst when another came spends only its share of it."""
    clock = FakeTime()
    budget = Budget(monotonic=clock.monotonic, sleep=clock.sleep)
    clock.now = 6.0
    budget.share(2)
    assert 2.0 == budget.shared.tokens


def test_wb_budget_starts_with_one_token_not_the_accounts_burst() -> None:
    """A process that starts does not know what the account's bucket holds (another worker,
    not counted yet, or this one before a restart may have spent the burst): one request at
    once, then the rate, never a burst of 5 into a bucket someone else emptied."""
    clock = FakeTime()
    budget = Budget(monotonic=clock.monotonic, sleep=clock.sleep)

    async def scenario() -> list[float]:
        went = []
        for _ in range(3):
            await budget.take("upload")
            went.append(clock.now)
        return went

    assert asyncio.run(scenario()) == pytest.approx([0.0, 0.6 / SAFETY, 1.2 / SAFETY])


# -- Yandex Market: 10 000 offers a minute, 4 requests at once, per business (§3.3) ---------------


def test_ym_offer_budget_shared_by_two_keeps_half_the_minute() -> None:
    """Promise: two live workers each send at most 5 000 offers in any minute (together the
    business's 10 000), in requests of 500."""
    clock = FakeTime()
    budget = OfferBudget(10_000, window=3.0, monotonic=clock.monotonic, sleep=clock.sleep)
    budget.share(2, 500)
    assert (budget.per_minute, budget.window, budget.limit) == (5_000, 6.0, 500)

    async def scenario() -> list[tuple[float, int]]:
        went = []
        while clock.now < 180.0:
            await budget.take(500)
            went.append((clock.now, 500))
        return went

    went = asyncio.run(scenario())
    assert _most_in_any(60.0, went) <= 5_000, went


def test_ym_offer_budget_share_keeps_at_least_one_offer_and_the_lowered_account() -> None:
    budget = OfferBudget(10_000, window=3.0)
    budget.share(3, 500)
    assert (budget.per_minute, budget.limit) == (3_333, 500)
    budget.share(100_000, 500)
    assert (budget.per_minute, budget.limit) == (1, 1)
    budget.share(2, 500)
    budget.lower(4_000, 500)  # Yandex named the business's budget: 4 000 a minute
    assert (budget.per_minute, budget.window, budget.limit) == (2_000, 15.0, 500)
    budget.share(1, 500)
    assert (budget.per_minute, budget.window, budget.limit) == (4_000, 7.5, 500)


def test_ym_parallel_shared_divides_the_requests_at_once() -> None:
    parallel = Parallel(4)
    parallel.share(2)
    assert 2 == parallel.limit
    parallel.lower()  # a 420 for parallel requests: one fewer
    assert 1 == parallel.limit
    parallel.share(1)
    assert 3 == parallel.limit
    parallel.share(9)
    assert 1 == parallel.limit, "never below one"


def test_ym_parallel_shared_holds_requests_to_the_share() -> None:
    parallel = Parallel(4)
    parallel.share(2)

    async def one() -> None:
        async with parallel:
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        await asyncio.gather(*(one() for _ in range(6)))

    asyncio.run(scenario())
    assert 2 == parallel.most


def test_ym_target_share_makes_its_requests_fit_its_share_of_the_minute() -> None:
    """A share below a request's 500 offers (a small cabinet, a scaled simulator): requests of
    at most the share, never one larger than a worker's minute."""
    t = YandexMarketTarget(
        "http://127.0.0.1:9", 1, lambda: "key", price_types={}, offers_per_minute=600
    )
    assert isinstance(t, SharesAccount)
    assert (t.per_request, t.per_read) == (500, 200)
    t.share(3)
    assert (t.per_request, t.budget.per_minute, t.budget.limit) == (200, 200, 200)
    assert (t.per_read, t.read_budget.per_minute, t.parallel.limit) == (200, 200, 1)
    t.share(1)
    assert (t.per_request, t.budget.per_minute, t.budget.window) == (500, 600, 50.0)
    assert (t.per_read, t.parallel.limit) == (200, 4)


# -- Ozon: 50 requests a second per Client-Id (§1.3) ---------------------------------------------


def test_ozon_rate_shared_by_two_keeps_half_the_requests_a_second() -> None:
    clock = FakeTime()
    rate = RequestRate(50, monotonic=clock.monotonic, sleep=clock.sleep)
    rate.share(2)
    assert (rate.per_second, rate.most, rate.window) == (25.0, 25, 1.0)

    async def scenario() -> list[tuple[float, int]]:
        went = []
        while clock.now < 5.0:
            slot = rate.slot()
            await slot.take()
            went.append((clock.now, 1))
            slot.done()
        return went

    went = asyncio.run(scenario())
    assert _most_in_any(1.0, went) <= 25
    rate.share(200)
    assert (rate.per_second, rate.most, rate.window) == (0.25, 1, 4.0), "one in a longer window"
    rate.share(1)
    assert (rate.per_second, rate.most) == (50.0, 50)


def test_ozon_rate_without_a_limit_stays_without() -> None:
    rate = RequestRate(None)
    rate.share(3)
    assert (rate.per_second, rate.most) == (None, 0)


# -- two Wildberries workers against the simulator ---------------------------------------------


@pytest.fixture
def sim() -> Iterator[WbSimulator]:
    simulator = WbSimulator(switches=Switches(processing_delay=0.0))
    simulator.start()
    for n in range(1, 25):
        simulator.add_good(f"SKU-{n}", price=1000)
    # WB's limit, 10 requests a period with a burst of 5, its period scaled to a second.
    simulator.limits = Limits(period=1.0, requests=10, burst=5)
    yield simulator
    simulator.stop()


@pytest.mark.timing
def test_two_workers_targets_sharing_the_account_draw_no_429(sim: WbSimulator) -> None:
    """Promise (contract 14, research §2.3): the service keeps within WB's per-account limit
    whatever the number of workers. Two workers' targets, each told it shares the account
    with one other, upload 12 goods each at once: WB refuses none (each keeping the whole
    budget, as before, they drew 429s)."""
    refused: list[float] = []
    too_many = sim._too_many

    def counted(bucket: Any, now: float) -> Any:
        refused.append(now)
        return too_many(bucket, now)

    sim._too_many = counted  # type: ignore[method-assign]
    token = sim.token()
    targets = [
        make(
            sim,
            MemoryWbStore(),
            token=token,
            budget=Budget(requests=10, period=1.0, burst=5),
            max_goods=1,
        )
        for _ in range(2)
    ]
    for t in targets:
        t.share(2)

    async def worker(t: WildberriesTarget, skus: range) -> list[Classification]:
        messages = [price(f"SKU-{n}", 1, f"{900 + n}.00") for n in skus]
        answers = await asyncio.gather(*(t.send(r) for r in t.requests(messages)))
        return [a for batch in answers for a in batch]

    async def scenario() -> list[Classification]:
        try:
            halves = await asyncio.gather(
                worker(targets[0], range(1, 13)), worker(targets[1], range(13, 25))
            )
        finally:
            for t in targets:
                await t.aclose()
        return [a for half in halves for a in half]

    answers = asyncio.run(scenario())

    assert [] == refused, f"WB refused {len(refused)} request(s): the account's limit passed"
    assert 24 == sim.requests["/api/v2/upload/task"], answers


# -- the worker tells its target who shares the account ----------------------------------------


class Reports:
    def __init__(self, live: int) -> None:
        self.live = live

    def live_workers(self, now: datetime) -> int:
        return self.live

    def values(self) -> dict[str, Any]:
        return {}

    def write(self, values: dict[str, Any]) -> None:
        pass


@pytest.mark.parametrize("live", [1, 3])
def test_the_loop_shares_each_marketplaces_account_among_the_live_workers(
    tmp_path: Path, sqlite_template: SqliteTemplate, live: int
) -> None:
    """Promise: ``share_site`` tells a marketplace's target the channel's live workers it
    counted (the count that splits EXCHANGE_SITE_MAX_RATE), so each keeps its share."""
    from exchange import app as bootstrap

    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    settings = fast_settings(url, "https://site.test")
    channel_id = bootstrap.registered_ids(engine, bootstrap.chosen_channels(settings, None))[0]
    nowhere = "http://127.0.0.1:9"
    wb = WildberriesTarget(nowhere, lambda: "token", MemoryWbStore())
    ym = YandexMarketTarget(nowhere, 1, lambda: "key", price_types={})
    ozon = OzonTarget(nowhere, "1", lambda: "key", price_types={"retail": "price"})
    clock = FakeClock()
    try:
        for target in (wb, ym, ozon):
            loop = DeliveryLoop(
                settings,
                engine,
                target,
                clock,
                FakeMonotonic(clock),
                reports=Reports(live),
                metrics=Metrics(),
                channel_id=channel_id,
            )
            loop.share_site(clock.now())
    finally:
        engine.dispose()

    assert wb.budget.rate == pytest.approx(10 / 6 / live * SAFETY)
    assert (ym.budget.per_minute, ym.parallel.limit) == (10_000 // live, 4 // live)
    assert ozon.rate.per_second == 50.0 / live


# -- two workers started together count each other before their first request ------------------


class Rows:
    """The ``workers`` rows two workers' loops write and count (``Reporter.live_workers``), and
    when (on ``now``)."""

    def __init__(self, now: Any) -> None:
        self.now = now
        self.written: dict[str, float] = {}
        self.counted: list[tuple[str, float, int]] = []


class RowReports(Reports):
    def __init__(self, rows: Rows, worker: str) -> None:
        super().__init__(1)
        self.rows, self.worker = rows, worker

    def live_workers(self, now: datetime) -> int:
        live = 1 + sum(1 for w in self.rows.written if w != self.worker)
        self.rows.counted.append((self.worker, self.rows.now(), live))
        return live

    def values(self) -> dict[str, Any]:
        return {"worker_id": self.worker}

    def write(self, values: dict[str, Any]) -> None:
        self.rows.written[values["worker_id"]] = self.rows.now()


@pytest.fixture
def loop_of(tmp_path: Path, sqlite_template: SqliteTemplate) -> Iterator[Any]:
    """``loop_of(target, reports, clock, monotonic)``: a channel's delivery loop."""
    from exchange import app as bootstrap

    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    settings = fast_settings(url, "https://site.test")
    channel_id = bootstrap.registered_ids(engine, bootstrap.chosen_channels(settings, None))[0]

    def loop(target: Any, reports: Reports, clock: Any, monotonic: Any) -> DeliveryLoop:
        return DeliveryLoop(
            settings,
            engine,
            target,
            clock,
            monotonic,
            reports=reports,
            metrics=Metrics(),
            channel_id=channel_id,
        )

    yield loop
    engine.dispose()


def test_two_workers_started_together_count_each_other_before_their_first_request(
    loop_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise (contract 14): two workers of a marketplace channel started at the same moment
    each keep their share of the account from their first request. Each loop writes its row,
    waits ``START_WAIT``, then counts: both count two, their targets keep half the account
    (counting at once, as before, each counted itself alone and spent the whole of it)."""
    from exchange.domain.clock import SYSTEM_MONOTONIC, SystemClock
    from exchange.worker import common

    monkeypatch.setattr(common, "START_WAIT", 0.2)
    rows = Rows(SYSTEM_MONOTONIC.now)
    targets = [WildberriesTarget("http://127.0.0.1:9", lambda: "t", MemoryWbStore()) for _ in "ab"]
    loops = [
        loop_of(t, RowReports(rows, f"w{n}"), SystemClock(), SYSTEM_MONOTONIC)
        for n, t in enumerate(targets)
    ]

    async def scenario() -> None:
        await asyncio.gather(*(one.share_site_at_start() for one in loops))

    asyncio.run(scenario())

    assert [("w0", 2), ("w1", 2)] == sorted((w, live) for w, _, live in rows.counted)
    assert all(at - rows.written[w] >= 0.2 for w, at, _ in rows.counted), rows.__dict__
    assert [2, 2] == [t.budget.workers for t in targets]


def test_the_start_wait_is_on_the_workers_clock_once_and_for_a_marketplace_only(
    loop_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait is the worker's clock's (a fake one passes it at once); the loop's next drain
    counts at once; a shop's loop (no account it shares) never waits."""
    from exchange.worker import common

    monkeypatch.setattr(common, "START_WAIT", 1.0)
    clock = FakeClock()
    monotonic = FakeMonotonic(clock)
    rows = Rows(monotonic.now)
    wb = WildberriesTarget("http://127.0.0.1:9", lambda: "t", MemoryWbStore())
    market = loop_of(wb, RowReports(rows, "w0"), clock, monotonic)
    shop = loop_of(object(), RowReports(rows, "shop"), clock, monotonic)
    start = monotonic.now()

    async def scenario() -> None:
        await market.share_site_at_start()
        await market.share_site_at_start()  # its next drain
        await shop.share_site_at_start()

    asyncio.run(scenario())

    assert {"w0": start} == rows.written
    assert [("w0", start + 1.0, 1), ("w0", start + 1.0, 1), ("shop", start + 1.0, 2)] == (
        rows.counted
    )


def test_ym_parallel_shared_in_the_database_rounds_the_share_up() -> None:
    """Review ym36: with the business's places in the database (``DbSlots``, every worker's
    requests together), a worker's own share rounds up, never leaving a place idle (4 among 3:
    two each, the places holding the sum at 4); a 420's lowering still takes one off; alone
    (no database), the share rounds down (one each: nothing else holds the sum)."""
    shared = Parallel(4, shared=True)
    shared.share(3)
    assert 2 == shared.limit
    shared.share(5)
    assert 1 == shared.limit
    shared.share(3)
    shared.lower()
    assert 1 == shared.limit
    shared.share(1)
    assert 3 == shared.limit
    alone = Parallel(4)
    alone.share(3)
    assert 1 == alone.limit
