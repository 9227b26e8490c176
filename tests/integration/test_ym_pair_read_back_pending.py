"""Review yrace39 (docs/marketplaces.md, the pair rule; research §3.1: discountBase above the
value by a discount of 5-99 %; §3.4: a 200 is accepted, not applied): 1C's next price of a SKU
comes while the read-back of its accepted Yandex update is still pending (minutes on Yandex,
seconds here). The outcome must be the one it is once Yandex shows the accepted update.

R2: Yandex shows 900/1200; 1C's pair 1000/1400 is accepted; 1C's value 1500 comes before
Yandex shows it. 1500 beside the accepted 1400 breaks the rule, so it waits for 1C's next
package, as it does after the read-back. Before: the claim of 1500 took the accepted 1400 along
(its read-back due) and sent it again as new beside 1500: 1400 was quarantined "the price went
without it", 1500 too (beside the accepted 1400), and 1C's next old price 1800 went beside the
1000 1C had replaced by 1500 (a discount 1C never stated).

R3: Yandex shows 1000/1400; 1C's old price 1000 comes alone, equal to the value: no discount,
the value goes without discountBase. 1C's value 800 comes before (or soon after) Yandex shows
it: 800 with 1C's old price 1000 is a 20 % discount, so Yandex must end at 800/1000. Before:
800 went with the "no discount" sent for 1000 (the accepted update remembered in its place),
both delivered while Yandex showed 800 without the discount 1C states.

A worker against the simulator over HTTP, on SQLite and PostgreSQL. The simulator's clock
stands still and moves with the worker's (``advance``): Yandex shows an accepted update
``APPLY_DELAY`` of its seconds later, whatever the machine's speed."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.dev.simclock import SimClock
from exchange.dev.testing import run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import FakeClock
from exchange.targets.yandex_market.target import YandexMarketTarget
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


def pair_worker(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> tuple[Worker, Callable[[float], None]]:
    """A worker of one channel mapping retail to ``value`` and old to ``discountBase``, and a
    step of its clock and the simulator's together."""
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
    return bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3)), advance


async def run_for(w: Worker, advance: Callable[[float], None], seconds: float) -> None:
    """The worker's cycles while the clocks move ``seconds``, ``STEP`` at a time."""
    done = 0.0
    while done < seconds:
        for _ in range(3):
            await w.cycle()
        await asyncio.sleep(0.01)
        advance(STEP)
        done += STEP


async def settle(engine: Engine, w: Worker, advance: Callable[[float], None]) -> None:
    """Until nothing waits (the last read-back counts once ``ym_apply_timeout``, real seconds,
    has passed since an earlier update's 200), 30 real seconds at most."""
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


@pytest.mark.parametrize("gap", [1.5, 4.5])
def test_a_value_come_before_yandex_shows_the_accepted_pair_waits_as_it_does_after(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, gap: float
) -> None:
    """R2: Yandex shows 900/1200; 1C's 1000/1400 accepted; ``gap`` seconds later, before Yandex
    shows it, 1C's value 1500 (above the accepted 1400). The accepted 1400 is read back, never
    sent again, and delivered; 1500 waits for 1C's next package (not quarantined); 1C's old
    price 1800 then goes with it: Yandex ends at 1500/1800, every price delivered."""
    worker, advance = pair_worker(db_url, engine, ym, tmp_path)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "900"), row("Y-1", "old", 1, "1200")])
        await settle(engine, w, advance)
        stage(engine, [row("Y-1", "retail", 2, "1000"), row("Y-1", "old", 2, "1400")])
        await run_for(w, advance, STEP)
        seen["accepted"] = shown(ym)
        # 1C's next package while the read-back of 1000/1400 is due and Yandex shows 900/1200.
        stage(engine, [row("Y-1", "retail", 3, "1500")])
        advance(gap)
        await run_for(w, advance, 10.0)
        seen["waiting"] = states(engine)
        seen["shown"] = shown(ym)
        stage(engine, [row("Y-1", "old", 3, "1800")])
        await settle(engine, w, advance)

    run_worker(worker, scenario)
    assert (Decimal(900), Decimal(1200)) == seen["accepted"], "the pair is accepted, not shown"
    waiting = seen["waiting"]
    assert isinstance(waiting, dict)
    assert ("delivered", None) == waiting[("Y-1/old", 2)], "the accepted 1400, read back"
    assert ("delayed", None) == waiting[("Y-1/retail", 3)], "1500 waits for 1C's next package"
    assert (Decimal(1000), Decimal(1400)) == seen["shown"]
    went = [(p.value, p.discount_base) for p in ym.applied("Y-1")]
    assert [
        (Decimal(900), Decimal(1200)),
        (Decimal(1000), Decimal(1400)),
        (Decimal(1500), Decimal(1800)),
    ] == went, "1400 once, never 1800 beside 1000"
    assert (Decimal(1500), Decimal(1800)) == shown(ym)
    found = states(engine)
    assert ("delivered", None) == found[("Y-1/old", 2)]
    assert ("delivered", None) == found[("Y-1/retail", 3)]
    assert ("delivered", None) == found[("Y-1/old", 3)]
    assert not [k for k, (s, _) in found.items() if s == "quarantined"], found


@pytest.mark.parametrize("gap", [1.5, 4.0])
def test_a_value_after_an_old_price_sent_as_no_discount_goes_with_1cs_old_price(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gap: float,
) -> None:
    """R3: Yandex shows 1000/1400; 1C's old price 1000 alone, equal to the value: no discount,
    1000 goes without discountBase; ``gap`` seconds later, before Yandex shows it and between
    two of its read-backs, 1C's value 800: 800 with 1C's old price 1000 (20 %) goes, and
    Yandex ends at 800/1000, both delivered."""
    worker, advance = pair_worker(db_url, engine, ym, tmp_path)
    sending = worker.loop.target
    assert isinstance(sending, YandexMarketTarget)
    seen: dict[str, object] = {}

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1400")])
        await settle(engine, w, advance)
        # Read back every 2.5 s (on Yandex, a minute at most: ``_wait``), so 1C's 800 comes
        # between two read-backs of 1000 with no discount, not with one.
        monkeypatch.setattr(sending, "_wait", lambda reads: 2.5)
        stage(engine, [row("Y-1", "old", 2, "1000")])
        await run_for(w, advance, gap)
        seen["before 800"] = shown(ym)
        stage(engine, [row("Y-1", "retail", 2, "800")])
        await settle(engine, w, advance)

    run_worker(worker, scenario)
    assert (Decimal(1000), Decimal(1400)) == seen["before 800"], "not shown yet"
    went = [(p.value, p.discount_base) for p in ym.applied("Y-1")]
    assert [
        (Decimal(1000), Decimal(1400)),
        (Decimal(1000), None),
        (Decimal(800), Decimal(1000)),
    ] == went, "never 800 without the discount 1C states"
    assert (Decimal(800), Decimal(1000)) == shown(ym), "the discount 1C states"
    found = states(engine)
    assert ("delivered", None) == found[("Y-1/old", 2)]
    assert ("delivered", None) == found[("Y-1/retail", 2)]
