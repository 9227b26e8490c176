"""Review wb4xx34: several workers of one Wildberries account keep the wait a 4xx charged as
ten requests makes, whichever of them heard it (contract 14; research §2.3: one bucket per
seller account for the whole Prices category, 10 requests / 6 s, a burst of 5; "one request
with 4XX response codes is counted as 10 requests", for Prices UNCONFIRMED, §8; §2.4, §8: a
poll of a task not processed yet may be answered 400).

Two workers on one database (SQLite and PostgreSQL), one WB token, WB counting a 4xx as ten
and answering a pending task's poll 400: each worker's polls hear 400s. The worker that heard
one used to keep its charge alone, and the other's next request met a 429 (about one a 4xx):
now it writes the account's hold (a ``target_locks`` row) until its bucket says WB's holds a
request again, and the other reads it before its next request (and a worker's polls go one at
a time: a second one never goes before the first's 400 is heard). WB's clock and the budgets
run twice as fast as WB's own (a period of 3 s): faster, the few milliseconds between a
request and its hold reaching the database weigh more than they do at WB's pace.

On the old code: 7 × 429 of 43 requests (one a 400, nearly); now 1 of 35-38."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.target_lock import DbHold
from exchange.db.wb_store import DbWbStore
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, stage
from exchange.dev.wbsim import Switches, WbSimulator
from exchange.domain.clock import SystemClock
from exchange.targets.wildberries.budget import Budget
from exchange.targets.wildberries.target import WildberriesTarget
from exchange.targets.wildberries.token import account_key
from exchange.worker import Worker
from exchange.worker.process import Channel

# Two workers race in wall-clock time against WB's scaled limit: never beside another timing
# test.
pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.timeout(240)]

SCALE = 2.0  # WB's clock, and the budgets, twice as fast: a period of 3 s
GOODS = 40
messages = one_channel_messages()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    sim = WbSimulator(
        time_scale=SCALE,
        switches=Switches(
            four_xx_weight=10,
            pending_answer="400",
            pending_in_buffer=False,
            unchanged_in_mixed="whole-400",
            processing_delay=60,
        ),
    )
    for n in range(GOODS):
        sim.add_good(f"SKU-{n:03d}", price=1000)
    sim.start()
    yield sim
    sim.stop()


def make_worker(db_url: str, engine: Engine, sim: WbSimulator, token: str, name: str) -> Worker:
    """A worker as ``bootstrap.worker`` builds it for channel wildberries, around a target whose
    limits run at WB's scaled clock (constructor arguments, not settings), sharing the
    account's hold through the database as ``bootstrap.wildberries_target`` wires it."""
    settings = fast_settings(
        db_url,
        None,
        target="wildberries",
        wb_api_url=sim.url,
        wb_token=token,
        batch_size="5",
        max_attempts=10,
    ).model_copy(update={"worker_id": name})
    target = WildberriesTarget(
        sim.url,
        lambda: token,
        DbWbStore(engine, "wildberries"),
        budget=Budget(period=6.0 / SCALE),
        first_poll=3.0 / SCALE,
        poll_every=5.0 / SCALE,
        task_timeout=1800.0 / SCALE,
        account_hold=lambda key: DbHold(engine, f"wb budget:{account_key(key)}"),
    )
    (channel_id,) = bootstrap.registered_ids(engine, bootstrap.chosen_channels(settings, None))
    return Worker(
        settings,
        engine,
        [Channel(None, settings, target, channel_id)],
        SystemClock(),
        rng=random.Random(name),
    )


def states(engine: Engine) -> list[tuple[str, str]]:
    with transaction(engine, read_only=True) as connection:
        return [
            (str(a), str(s))
            for a, s in connection.execute(select(messages.c.aggregate, messages.c.state))
        ]


def test_a_4xx_one_worker_heard_holds_the_other_worker_too(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: with two workers of one account, WB refuses (429) at most 5 % of the requests
    however it counts a 4xx (the old code: about one 429 a 400, here some 16 %), and every
    price lands."""
    from exchange.worker import common

    # As ``exchange run`` does (the tests' default is none): each worker counts the other
    # before its first request, and keeps half the account.
    monkeypatch.setattr(common, "START_WAIT", 0.5)
    answers: list[int] = []
    serve = wb.serve

    def counted(*args: Any, **kwargs: Any) -> Any:
        answer = serve(*args, **kwargs)
        answers.append(answer.status)
        return answer

    wb.serve = counted  # type: ignore[method-assign]
    token = wb.token()
    stage(engine, [price_row(f"SKU-{n:03d}", 1, f"{1100 + n}.00") for n in range(GOODS)])
    workers = [make_worker(db_url, engine, wb, token, f"worker-{n}") for n in "ab"]

    def settled() -> bool:
        found = states(engine)
        return len(found) == GOODS and all(s == "delivered" for _, s in found)

    async def run(worker: Worker, ends: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < ends and not settled():
            report = await worker.cycle()
            if report.batches == 0:
                await asyncio.sleep(0.05)

    async def scenario() -> None:
        ends = asyncio.get_running_loop().time() + 120
        try:
            await asyncio.gather(*(run(w, ends) for w in workers))
        finally:
            for w in workers:
                await w.target.aclose()

    asyncio.run(scenario())

    refused = answers.count(429)
    fours = sum(1 for status in answers if 400 <= status < 500 and status != 429)
    said = f"{refused} × 429, {fours} × 4xx of {len(answers)} requests"
    assert settled(), (states(engine), said)
    for n in range(GOODS):
        good = wb.by_vendor_code(f"SKU-{n:03d}")
        assert good is not None and good.price == 1100 + n, said
    assert fours >= 5, f"WB answered too few 4xx to tell: {said}"
    # ~36 requests: one 429 is some 3 %; a 4xx still on its way back while the other worker's
    # request leaves (10-20 ms, more on a loaded machine) may cost a second one. The old code
    # met one a 4xx (7 of 43): two is the bound that tells them apart without flaking.
    assert refused <= max(2, 0.05 * len(answers)), said
