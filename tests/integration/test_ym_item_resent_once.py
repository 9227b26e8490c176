"""Review rev39y H3 (research §3.4, §3.5: Yandex accepts an update and applies it later, in no
promised order): one SKU's two prices (its value and its discountBase), sent together as one
item, accepted, and not shown within ``ym_apply_timeout``: each message is found not applied,
each charged once, and each is due again after its own retry delay (full jitter, drawn per
message: here 0.2 s and 2.5 s). The old code re-sent the whole item on each message's timer:
the first re-send carried both prices, and the second message, due a couple of seconds later,
sent the same item once more (Yandex logged the same update three times, each re-send
charged). Now the second sees that the update its SKU's first re-send carried holds its price
(the same version) and reads that update back: one re-send per item. Against the simulator on
a clock nobody moves (nothing is applied), on SQLite and PostgreSQL; one worker, and two
workers (the re-send made by one, the second message leased by the other)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import YM_BUSINESS, YM_KEY, ym_settings
from sqlalchemy import Engine, select
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.dev.simclock import SimClock
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.retry import RetryPolicy
from exchange.worker import Worker

SKU = "Y-7"
APPLY_TIMEOUT = 4.0  # real seconds
UPDATES = "offer-prices/updates"
# The retry delays drawn (full jitter), in turn: the pair's two "not applied" first.
DRAWS = [0.2, 2.5]


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    """Yandex on a clock nobody moves: it takes every update and applies none."""
    simulator = YmSimulator(
        YM_KEY, YM_BUSINESS, clock=SimClock(0), switches=YmSwitches(apply_delay=60)
    )
    simulator.start()
    yield simulator
    simulator.stop()


@pytest.fixture(autouse=True)
def draws(monkeypatch: pytest.MonkeyPatch) -> None:
    left = list(DRAWS)

    def backoff(self: RetryPolicy, attempt: int, rng: random.Random) -> float:
        return left.pop(0) if left else 0.2

    monkeypatch.setattr(RetryPolicy, "backoff", backoff)


def _workers(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, *names: str
) -> list[Worker]:
    out = []
    for n, name in enumerate(names):
        settings = ym_settings(
            db_url,
            ym,
            tmp_path,
            ym_price_types={"retail": "value", "old": "discountBase"},
            ym_apply_timeout=str(APPLY_TIMEOUT),
            retry_base_delay="3",
            retry_max_delay="3",
            max_attempts="10",
        ).model_copy(update={"worker_id": name})
        out.append(bootstrap.worker(settings, engine, rng=random.Random(n)))
    return out


def _charged(engine: Engine) -> list[tuple[str, int | None]]:
    """The pair's charged failures: (aggregate, attempt)."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, history.c.attempt)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(history.c.event == "retry-scheduled", history.c.channel_id.is_not(None))
            .order_by(history.c.id)
        )
        return [(str(a), n) for a, n in rows]


async def _cycles(workers: list[Worker], seconds: float, done: Callable[[], bool]) -> None:
    """The workers' cycles in turn for ``seconds`` (or until ``done()``)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends and not done():
        for worker in workers:
            await worker.cycle()
        await asyncio.sleep(0.02)


def _run(scenario: Callable[[], Any], workers: list[Worker]) -> None:
    async def go() -> None:
        try:
            await scenario()
        finally:
            for w in workers:
                await w.target.aclose()

    asyncio.run(go())


def _scenario(
    engine: Engine, ym: YmSimulator, first: list[Worker], resend: list[Worker], then: list[Worker]
) -> None:
    """The pair goes as one item and is found not applied by ``first`` (each message charged
    once, due again 0.2 s and 2.5 s later); ``resend`` sends it again; ``then`` cycle well
    past the second message's retry: Yandex got the item twice, not three times."""

    seen: dict[str, int] = {}

    async def scenario() -> None:
        stage_pair(engine)
        await _cycles(first, 15, lambda: ym.requests[UPDATES] == 1)
        assert ym.requests[UPDATES] == 1, ym.requests
        await _cycles(first, 15, lambda: len(_charged(engine)) == 2)
        assert sorted(a for a, _ in _charged(engine)) == [f"{SKU}/old", f"{SKU}/retail"], _charged(
            engine
        )
        await _cycles(resend, 15, lambda: ym.requests[UPDATES] == 2)
        assert ym.requests[UPDATES] == 2, ym.requests
        # The second message is due 2.3 s after the first: cycle past it (not past the
        # re-send's own ym_apply_timeout).
        await _cycles(then, 3.0, lambda: False)
        seen["sent"] = ym.requests[UPDATES]
        # Yandex applies what it took: both prices are delivered by the read-back.
        ym.clock.advance(61)
        await _cycles(then, 15, lambda: _ended(engine) == ["delivered", "delivered"])

    _run(scenario, list({id(w): w for w in [*first, *resend, *then]}.values()))
    assert seen["sent"] == 2, (
        "the item went once more per message, not once per item",
        seen["sent"],
        _charged(engine),
    )
    assert ym.requests[UPDATES] == 2, ym.requests
    assert _ended(engine) == ["delivered", "delivered"], states(engine)
    assert ym.live(SKU) is not None
    assert (ym.live(SKU).value, ym.live(SKU).discount_base) == (Decimal(1000), Decimal(1200))
    assert len(_charged(engine)) == 2, ("one failure charged per message", _charged(engine))


def _ended(engine: Engine) -> list[str]:
    found = states(engine)
    return [found[(f"{SKU}/{t}", 1)][0] for t in ("retail", "old")]


def stage_pair(engine: Engine) -> None:
    from exchange.dev.testing import stage

    stage(engine, [row(SKU, "retail", 1, "1000"), row(SKU, "old", 1, "1200")])


def test_an_item_not_applied_in_time_is_sent_again_once_not_once_per_message(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """One worker: the value's retry sends the item again (both prices); the discountBase's,
    2.3 s later, reads that update back instead of sending it a third time."""
    (worker,) = _workers(db_url, engine, ym, tmp_path, "w1")
    _scenario(engine, ym, [worker], [worker], [worker])


def test_a_second_worker_reads_back_the_item_the_first_sent_again(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Two workers: A found the pair not applied; B sends the item again on the first
    message's retry; the second message, leased by A, which never saw that re-send, reads it
    back from the database's receipts instead of sending it again."""
    a, b = _workers(db_url, engine, ym, tmp_path, "w1", "w2")
    _scenario(engine, ym, [a], [b], [a])
