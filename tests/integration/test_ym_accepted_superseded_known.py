"""Review rev40y H1 (docs/marketplaces.md: "On Yandex Market a new `value` the marketplace has
already accepted is not sent again meanwhile: it is read back on its own schedule"; research
§3.4: a 200 is accepted, not applied): 1C's pair 1000/1400 is accepted by Yandex, and 1-4 s
later, before its read-back, 1C's next `value` of the SKU never goes: refused before sending
(0, ``invalid-for-channel``) or quarantined (1380, too close to the discountBase 1400, after
its wait for 1C's next package). Yandex applies 1000/1400 all the same.

Before: the accepted 1000 was cancelled ``superseded`` by the value that never went and left
the known prices with its delivery, so 1C's next discountBase 1600 was quarantined at once,
"no price mapped to value known yet" (again after a person's cancel of 1380 and retry of
1600), and Yandex kept 1400, a strikethrough price 1C replaced. Once Yandex had shown 1000/1400
the same steps sent 1000/1600: the outcome must not depend on the seconds between 1C's
packages. A worker against the simulator over HTTP, on SQLite and PostgreSQL; the simulator's
clock stands still and moves with the worker's."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select
from ym_pair import messages, row, states

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.simclock import SimClock
from exchange.dev.testing import stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import FakeClock
from exchange.ops import quarantine
from exchange.targets.marketplace.items import COMPANION_GRACE
from exchange.worker import Worker

APPLY_DELAY = 6.0  # seconds between Yandex's 200 and its read-back showing the update
STEP = 0.5  # seconds the clocks move between a worker's cycles
WAITING = ("new", "delayed", "in_progress")


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    simulator = YmSimulator(
        "ym-key-1234",
        1001,
        clock=SimClock(0, start=datetime.now(UTC).timestamp()),
        switches=YmSwitches(apply_delay=APPLY_DELAY),
    )
    simulator.start()
    yield simulator
    simulator.stop()


def pair_workers(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, count: int
) -> tuple[list[Worker], Callable[[float], None]]:
    """``count`` workers of one channel mapping retail to ``value`` and old to
    ``discountBase``, on one clock, and a step of it and the simulator's together."""
    clock = FakeClock(ym.clock.datetime())

    def advance(seconds: float) -> None:
        clock.advance(seconds)
        ym.clock.advance(seconds)

    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        ym_price_types={"retail": "value", "old": "discountBase"},
        ym_apply_timeout="8",
    )
    return [
        bootstrap.worker(
            settings.model_copy(update={"worker_id": f"w{n}"}),
            engine,
            clock=clock,
            rng=random.Random(3 + n),
        )
        for n in range(count)
    ], advance


async def run_for(w: Worker, advance: Callable[[float], None], seconds: float) -> None:
    done = 0.0
    while done < seconds:
        for _ in range(3):
            await w.cycle()
        await asyncio.sleep(0.01)
        advance(STEP)
        done += STEP


async def settle(engine: Engine, w: Worker, advance: Callable[[float], None]) -> None:
    """Until nothing waits (a read-back counts once ``ym_apply_timeout``, real seconds, has
    passed since an earlier update's 200), 30 real seconds at most."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + 30.0
    while loop.time() < ends:
        await run_for(w, advance, STEP)
        if not any(s in WAITING for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def shown(ym: YmSimulator) -> tuple[Decimal, Decimal | None] | None:
    live = ym.live("Y-1")
    return None if live is None else (live.value, live.discount_base)


def message_id(engine: Engine, aggregate: str, version: int) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(
                    messages.c.aggregate == aggregate, messages.c.version == version
                )
            ).scalar_one()
        )


def last_error(engine: Engine, aggregate: str, version: int) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.last_error).where(
                    messages.c.aggregate == aggregate, messages.c.version == version
                )
            ).scalar_one()
        )


@pytest.mark.parametrize(
    ("value", "gap", "count"), [("0", 1.5, 1), ("1380", 4.0, 1), ("0", 2.5, 2), ("1380", 1.0, 2)]
)
def test_an_accepted_pair_a_value_never_sent_replaced_before_its_read_back_stays_known(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    value: str,
    gap: float,
    count: int,
) -> None:
    """Yandex accepted 1000/1400; ``gap`` seconds later, before Yandex shows it, 1C's value
    ``value`` that never goes (0 refused before sending; 1380 quarantined once its wait for
    1C's next package is over). Yandex shows 1000/1400; the accepted 1000 stays the known
    value, so 1C's discountBase 1600 goes beside it (after a person's cancel of 1380, for which
    it waited): Yandex ends at 1000/1600, 1C's latest valid pair, as it does where Yandex had
    shown 1000/1400 before 1C's value came. With two workers, the one that sent 1000/1400
    stops there and the other goes on: what Yandex holds is read from the database, never
    from the sender's memory."""
    workers, advance = pair_workers(db_url, engine, ym, tmp_path, count)
    seen: dict[str, object] = {}

    async def scenario() -> None:
        w = workers[0]
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1400")])
        await run_for(w, advance, STEP)
        w = workers[-1]
        seen["accepted"] = shown(ym)
        advance(gap)
        stage(engine, [row("Y-1", "retail", 2, value)])
        await run_for(w, advance, 12.0)  # the accepted pair is applied and read back
        if value == "1380":
            advance(COMPANION_GRACE)  # 1C's next package: none within the wait
            await run_for(w, advance, 3.0)
            seen["1380"] = states(engine)[("Y-1/retail", 2)]
        seen["before 1600"] = shown(ym)
        stage(engine, [row("Y-1", "old", 2, "1600")])
        await run_for(w, advance, 3.0)
        seen["1600"] = states(engine)[("Y-1/old", 2)]
        seen["1600 said"] = last_error(engine, "Y-1/old", 2)
        if value == "1380":
            # A person: 1C's 1380 is not meant; 1600 is retried if it was quarantined.
            with transaction(engine) as connection:
                quarantine.cancel(
                    connection,
                    [message_id(engine, "Y-1/retail", 2)],
                    operator="test",
                    note="1C's 1380 is not meant",
                    now=w.clock.now(),
                    kinds=w.kinds,
                )
            if states(engine)[("Y-1/old", 2)][0] == "quarantined":
                with transaction(engine) as connection:
                    quarantine.retry(
                        connection,
                        [message_id(engine, "Y-1/old", 2)],
                        quarantine.Filters(),
                        operator="test",
                        note=None,
                        now=w.clock.now(),
                        dry_run=False,
                    )
            advance(61.0)  # the waiting price's next look (``_look_every``)
        await settle(engine, w, advance)

    async def go() -> None:
        try:
            await scenario()
        finally:
            for w in workers:
                await w.target.aclose()

    asyncio.run(go())
    assert seen["accepted"] is None, "accepted, not shown yet"
    if value == "1380":
        assert seen["1380"] == ("quarantined", "invalid-for-channel"), seen["1380"]
    assert (Decimal(1000), Decimal(1400)) == seen["before 1600"]
    said = str(seen["1600 said"])
    assert "no price mapped" not in said, said
    assert seen["1600"][0] != "quarantined", (seen["1600"], said)  # type: ignore[index]
    went = [(p.value, p.discount_base) for p in ym.applied("Y-1")]
    assert [(Decimal(1000), Decimal(1400)), (Decimal(1000), Decimal(1600))] == went, went
    assert (Decimal(1000), Decimal(1600)) == shown(ym), "1C's latest valid pair"
    found = states(engine)
    assert ("delivered", None) == found[("Y-1/old", 2)]
    assert ("delivered", None) == found[("Y-1/old", 1)], "1400, shown, read back"
