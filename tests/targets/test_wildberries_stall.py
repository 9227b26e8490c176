"""Review wbstall: a newer price never waits long behind a Wildberries task that has ended, polls
answered 4xx never break the account's limit, and a card renamed in WB's cabinet after the map
was read gets 1C's price once its task names the change (contract 14; research §2.3, §2.4,
§8), against the Wildberries simulator over HTTP."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from conformance import price
from sqlalchemy import Engine
from test_wildberries import make, nm, send

from exchange.db.wb_store import DbWbStore
from exchange.dev.wbsim import Limits, Switches, WbSimulator
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage
from exchange.targets.wildberries.budget import Budget
from exchange.targets.wildberries.target import WildberriesTarget


class OnePoll(Budget):
    """A worker's budget whose polls' share holds one poll begun, then none (uploads pressed
    through a busy feed): a poll put off is looked at again only much later."""

    def __init__(self) -> None:
        super().__init__(period=1.0, requests=1000, burst=100)
        self.begun = 0

    async def take_poll(
        self, *, wait: bool = False, most: float | None = None, rest: bool = False
    ) -> bool:
        if not wait:
            self.begun += 1
            if self.begun > 1:
                return False
        return await super().take_poll(wait=wait, most=most, rest=rest)


def test_a_newer_price_goes_at_once_once_any_poll_found_its_goods_task_ended(
    engine: Engine,
) -> None:
    """Finding 1: goods SKU-1..5 uploaded in one task, which WB processes; each then gets a
    newer price while its first delivery is superseded. Two workers (two targets, one database:
    SQLite and PostgreSQL), each with a poll share of one poll: the first newer price each
    worker sends polls the task and finds it ended; every later one goes at once on that
    outcome, never waiting («waits for Wildberries' task …») for a poll of its own."""
    sim = WbSimulator(switches=Switches(processing_delay=0.0))
    sim.start()
    try:
        sim.limits = Limits(period=1.0, requests=1000, burst=100)
        for n in range(1, 6):
            sim.add_good(f"SKU-{n}", price=1000)
        store = DbWbStore(engine, "wb")
        first = send(
            make(sim, store, budget=Budget(period=1.0, requests=1000, burst=100)),
            *(price(f"SKU-{n}", 1, "900.00") for n in range(1, 6)),
        )
        workers = [make(sim, store, budget=OnePoll()) for _ in range(2)]

        async def scenario() -> list[Classification]:
            said: list[Classification] = []
            try:
                for n in range(1, 6):
                    target = workers[n % 2]
                    said += await target.send([price(f"SKU-{n}", 2, "800.00")])
            finally:
                for target in workers:
                    await target.aclose()
            return said

        newer = asyncio.run(scenario())
    finally:
        sim.stop()

    assert [Verdict.AWAITING] * 5 == [a.verdict for a in first], first
    assert all("waits for" not in (a.detail or "") for a in newer), newer
    assert [Verdict.AWAITING] * 5 == [a.verdict for a in newer], newer
    assert 6 == len(sim.tasks), "each newer price uploaded at its first send"
    for n in range(1, 6):
        assert [900, 800] == sim.applied[nm(sim, f"SKU-{n}")]
    assert sim.requests["/api/v2/history/tasks"] <= 2, "one poll of the ended task a worker"


def test_polls_answered_400_at_ten_requests_never_meet_a_429_and_every_price_lands() -> None:
    """Finding 2 (research §2.3, §8; contract 14: right under both settings of each
    unconfirmed point): WB answers a pending task's poll 400 (no buffer) and counts a 4xx as
    ten requests; six goods staged 4 s apart, their tasks processed a minute after upload, one
    worker at WB's own limit. The budget counts each 4xx at ten: no 429 (at most one), and every
    price lands. Simulated time: the budget sleeps on the simulator's clock."""
    sim = WbSimulator(
        switches=Switches(
            pending_answer="400", pending_in_buffer=False, four_xx_weight=10, processing_delay=60
        ),
        time_scale=0,
    )
    sim.start()
    try:
        for n in range(1, 7):
            sim.add_good(f"SKU-{n}", price=1000)

        async def sleep(seconds: float) -> None:
            sim.clock.advance(seconds)

        budget = Budget(monotonic=sim.clock.elapsed, sleep=sleep)
        target = make(sim, budget=budget, clock=sim.clock.datetime)
        due: dict[str, tuple[float, OutgoingMessage]] = {
            f"SKU-{n}": (4.0 * n, price(f"SKU-{n}", 1, f"{900 + n}.00")) for n in range(1, 7)
        }
        said: dict[str, Classification] = {}

        async def scenario() -> None:
            try:
                while due and sim.clock.elapsed() < 900:
                    sku, (at, message) = min(due.items(), key=lambda kv: kv[1][0])
                    if at > sim.clock.elapsed():
                        sim.clock.advance(at - sim.clock.elapsed())
                    (answer,) = await target.send([message])
                    said[sku] = answer
                    if answer.verdict is Verdict.DELIVERED:
                        del due[sku]
                        continue
                    again = answer.again_in or float(answer.retry_after or 1)
                    receipt: Any = answer.receipt or message.receipt
                    due[sku] = (sim.clock.elapsed() + again, _with(message, receipt))
            finally:
                await target.aclose()

        asyncio.run(scenario())
    finally:
        sim.stop()

    assert budget.refusals <= 1, (budget.refusals, said)
    assert {} == due, said
    for n in range(1, 7):
        assert 900 + n == sim.goods[nm(sim, f"SKU-{n}")].price


def _with(message: OutgoingMessage, receipt: str | None) -> OutgoingMessage:
    from dataclasses import replace

    return replace(message, receipt=receipt)


def test_a_card_renamed_within_the_refresh_gets_the_price_once_its_task_names_the_change(
    engine: Engine,
) -> None:
    """Finding 3 (research §2.4: a task's lines in ``history/goods/task`` carry each good's
    ``vendorCode``; §2.1, §2.6 item 1): SKU-1 delivered at 1100; then in WB's cabinet its card
    is renamed "SKU-1-OLD" and a new card made for "SKU-1", within ``wb_catalogue_refresh``.
    1200 goes to the old card (the map is not due yet), and its task ends without errors; its
    line names "SKU-1-OLD": the map is read again and 1200 goes to the card bearing SKU-1 now,
    never "delivered" on the old card alone (SQLite and PostgreSQL)."""
    sim = WbSimulator(switches=Switches(processing_delay=0.0))
    sim.start()
    try:
        sim.limits = Limits(period=1.0, requests=1000, burst=100)
        sim.add_good("SKU-1", price=1000)
        store = DbWbStore(engine, "wb")

        def target() -> WildberriesTarget:
            return make(
                sim,
                store,
                budget=Budget(period=1.0, requests=1000, burst=100),
                poll_at_once=True,
                catalogue_refresh=10_000,
            )

        old = nm(sim, "SKU-1")
        (first,) = send(target(), price("SKU-1", 1, "1100.00"))
        sim.vendor_code_in_cabinet(old, "SKU-1-OLD")
        new = sim.add_good("SKU-1", price=1000).nm_id
        (second,) = send(target(), price("SKU-1", 2, "1200.00"))
    finally:
        sim.stop()

    assert Verdict.DELIVERED == first.verdict, first
    assert Verdict.DELIVERED == second.verdict, second
    assert 1200 == sim.goods[new].price, "1C's price on the card bearing SKU-1 now"
    assert new == store.nm_ids(["SKU-1"])["SKU-1"]


def test_a_poll_the_budget_put_off_looks_again_within_thirty_seconds_never_minutes() -> None:
    """Review wbwords34 finding 3 (docs/marketplaces.md: "looks at the task a few seconds
    later, and again until WB shows its outcome"): WB answers a pending task's poll 400
    (research §8) and a 4xx may count as ten requests (§2.3); three such polls while uploads
    are pressed leave the polls' share owing minutes. A price whose poll is put off then was
    due again only when that debt was paid (256-316 s seen), and stayed "waiting for the
    marketplace" long after the uploads had ended and WB held it. It looks again within
    ``LATER_AT_MOST`` (30 s), and once the uploads have ended its poll goes then. Simulated
    time: the budget sleeps on the simulator's clock."""
    sim = WbSimulator(
        switches=Switches(
            pending_answer="400", pending_in_buffer=False, four_xx_weight=10, processing_delay=600
        ),
        time_scale=0,
    )
    sim.start()
    try:
        sim.add_good("SKU-1", price=1000)

        async def sleep(seconds: float) -> None:
            sim.clock.advance(seconds)

        budget = Budget(monotonic=sim.clock.elapsed, sleep=sleep)
        target = make(sim, budget=budget, clock=sim.clock.datetime)
        message = price("SKU-1", 1, "900.00")

        async def scenario() -> tuple[Classification, Classification, int]:
            try:
                (upload,) = await target.send([message])
                sim.clock.advance(upload.again_in or 0)
                waiting = replace(message, receipt=upload.receipt)
                for _ in range(3):  # three polls answered 400, each counted as ten requests
                    budget.answered_4xx(0, poll=True)
                for _ in range(2):  # uploads pressed: the second waits for its token
                    await budget.take("upload")
                assert budget.uploads_going()
                (put_off,) = await target.send([waiting])
                polls = sim.requests["/api/v2/history/tasks"]
                sim.clock.advance(put_off.again_in or 0)
                (again,) = await target.send([waiting])
                return put_off, again, sim.requests["/api/v2/history/tasks"] - polls
            finally:
                await target.aclose()

        put_off, again, polled = asyncio.run(scenario())
    finally:
        sim.stop()

    assert Verdict.AWAITING == put_off.verdict, put_off
    assert put_off.again_in is not None and put_off.again_in <= 30, put_off
    assert Verdict.AWAITING == again.verdict, again
    assert 1 == polled, "the uploads ended: the look due within 30 s polls the task"
