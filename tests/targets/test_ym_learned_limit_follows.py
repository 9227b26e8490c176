"""Yandex Market's learned budget follows the limit Yandex names, both ways (research §3.3:
``X-RateLimit-Resource-Limit`` on every answer, Yandex's word on the cabinet's limit now).
A budget a 420 lowered was kept in the business's ``target_locks`` row and never raised by
the service: a seller whose cabinet was allowed more (Yandex raises limits with the seller's
tier) had to stop the workers and delete the row by SQL. Now an answer naming a higher limit
raises the kept one (never above ``ym_offers_per_minute``), and every running worker follows
the row before its next request, as it follows a lowered one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conformance import price
from sqlalchemy import Engine
from ym_shared import BUSINESS, shared_worker, ym_business

from exchange.db.target_lock import DbHold
from exchange.dev.ymsim import UPDATE_RESOURCE, ApiError, YmSimulator, _YmHandler
from exchange.targets.yandex_market.pace import PAST_UNTIL, learned_limit
from exchange.targets.yandex_market.target import YandexMarketTarget

SETTING = 60  # ym_offers_per_minute
ROW = f"ym spent:{BUSINESS}:offer-prices/updates"


def test_the_learned_limit_follows_the_named_one_both_ways_never_above_the_setting() -> None:
    """(kept, heard, setting) -> kept: a limit learned follows Yandex's named one up and down;
    one that reaches the setting is learned no more (None: the setting stands); none learned
    stays none whatever is heard (a scaled simulator names its limit in simulated minutes, far
    below the setting in real ones: the first is learned only below a request's offers)."""
    assert 50 == learned_limit(20, 50, 60), "a cabinet allowed more: raised"
    assert 10 == learned_limit(20, 10, 60), "allowed fewer: lowered"
    assert 20 == learned_limit(20, 20, 60)
    assert learned_limit(20, 60, 60) is None, "up to the setting: the setting stands"
    assert learned_limit(20, 10_000, 60) is None, "never above the setting"
    assert 20 == learned_limit(20, None, 60), "no limit named: kept"
    assert learned_limit(None, 200, 12_000) is None, "none learned: none (the bench's 200)"
    assert learned_limit(None, None, 60) is None


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A simulated minute lasts a real second; the cabinet allows the setting at first.
    with ym_business(SETTING, scale=60.0) as simulator:
        yield simulator


def worker(ym: YmSimulator, engine: Engine) -> YandexMarketTarget:
    # the simulator's Until is its window's exact end
    return shared_worker(ym, engine, SETTING, past_until=PAST_UNTIL / 60.0)


def test_two_running_workers_follow_a_raised_cabinet_limit_without_a_restart(
    ym: YmSimulator, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers of one business over one database (SQLite and PostgreSQL). The cabinet's
    limit is lowered to 20: A's request of 30 meets a 420 naming 20, both keep 20. Raised to
    50: B's next answer names 50, and both workers keep 50 (requests of 50 again) without a
    restart, A's next 25 offers sent at once with no 420. Raised past the setting: both are
    back at ``ym_offers_per_minute`` and the row keeps no limit."""
    refused: list[int] = []
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420:
            refused.append(420)
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    cabinet = ym.budgets[UPDATE_RESOURCE]
    row = DbHold(engine, ROW)

    async def scenario() -> None:
        a, b = worker(ym, engine), worker(ym, engine)
        try:
            cabinet.limit = 20
            await a.send([price(f"SKU-A{n}", 1, "10") for n in range(30)])
            assert refused, "the lowered cabinet refused A's request of 30"
            await b.send([price(f"SKU-B{n}", 1, "10") for n in range(10)])
            assert (20, 20, "20") == (a.budget.account, b.budget.account, row.read()[1])

            cabinet.limit = 50
            before = len(refused)
            # Raised at a minute's turn: the count a lower limit's answers left in this
            # simulated minute (``DbLeft``, the smaller of a minute's stays) ends with it.
            minute = ym.clock.wall(60.0)
            await asyncio.sleep(minute - ym.clock.wall_now() % minute + 0.05)
            await b.send([price(f"SKU-C{n}", 1, "10") for n in range(10)])
            accepted = ym.accepted
            found = await a.send([price(f"SKU-D{n}", 1, "10") for n in range(25)])
            assert (50, 50) == (b.budget.account, a.budget.account), "both follow the raise"
            assert (50, 50) == (a.per_request, b.per_request)
            assert "50" == row.read()[1], "the business's row keeps the raised limit"
            assert accepted + 25 == ym.accepted, [c.detail for c in found]
            assert before == len(refused), "no 420 after the raise"

            cabinet.limit = 10_000
            await a.send([price("SKU-E1", 1, "10")])
            await b.send([price("SKU-E2", 1, "10")])
            assert (SETTING, SETTING) == (a.budget.account, b.budget.account)
            assert (SETTING, SETTING) == (a.per_request, b.per_request)
            assert row.read()[1] is None, "past the setting: no limit kept"
            assert before == len(refused)
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(scenario())
