"""Review 32b finding 7, its pace figure: Yandex Market's 420 (research §3.3: its pace, not
429) is waited out by the target and counted in the worker's pace figures
(``refused_last_minute``, what ``exchange status --json`` shows as ``pace``); it was counted
nowhere (``refused_last_minute: 0`` beside four 420s). On SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.simclock import SimClock
from exchange.dev.testing import price_row, run_worker, stage
from exchange.dev.ymsim import UPDATE_RESOURCE, YmSimulator, YmSwitches
from exchange.ops.status import pace_words, site_pace

KEY = "ym-key-420"


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # Its minute never ends (a still clock, its Resource-Until long past: each 420 is held
    # PAST_UNTIL only); 1000 offers a minute (the channel's figure: nothing to learn from its
    # Resource-Limit), another program spent all but 6: the second request of 5 meets 420s only.
    sim = YmSimulator(
        KEY,
        1001,
        clock=SimClock(0, start=1_790_000_000.0),
        switches=YmSwitches(apply_delay=0),
        offers_per_minute=1000,
    )
    assert sim.budgets[UPDATE_RESOURCE].take(1000 - 6, False)
    sim.start()
    yield sim
    sim.stop()


def test_a_420_is_counted_in_the_pace_figures(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        key=KEY,
        ym_offers_per_minute="1000",
        batch_size="5",
    )
    stage(engine, [price_row(f"SKU-{n}", 1, "100.00") for n in range(10)])
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))

    async def two_cycles(w: object) -> None:
        for _ in range(2):
            await worker.cycle()

    run_worker(worker, two_cycles)
    figures = worker.loop.pace_figures(worker.loop.monotonic.now())
    assert 5 == ym.accepted, "the first request went, the second met only 420s"
    # Four 420s in the first cycle's waits; a loaded machine lets the second cycle take the
    # waiting five again (their 1.25 s over) and meet four more: every one is counted.
    assert ym.refused_420 >= 4, ym.refused_420
    assert (
        ym.refused_420 == figures["refused_last_minute"] == figures["refused_marketplace_limit"]
    ), figures


def test_the_pace_figures_show_ym_parallel_as_the_limit_not_the_workers_concurrency(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Review rev35ym's words: ``exchange status`` showed a Yandex worker's limit on requests
    in flight as EXCHANGE_CONCURRENCY (8: "limit 8 of 8") where no more than ``ym_parallel``
    (2 here) ever go at once: the limit shown is the target's share of ``ym_parallel``."""
    settings = ym_settings(
        db_url,
        ym,
        tmp_path,
        key=KEY,
        ym_offers_per_minute="1000",
        ym_parallel="2",
        concurrency="8",
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))

    run_worker(worker, lambda w: w.cycle())
    figures = worker.loop.pace_figures(worker.loop.monotonic.now())
    assert (2, 2) == (figures["limit"], figures["max_limit"]), figures
    assert "(limit 2 of 2 for all the workers together)" in pace_words(figures), pace_words(figures)


def test_a_workers_limit_shown_is_the_business_places_not_its_share(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Review ym36: three workers of ``ym_parallel`` 4 over one database each showed its share
    rounded down («предел 1 из 1», three summed where four went at once; five showed 5 in
    all). The requests of every worker take the business's places (``DbSlots``): the limit a
    worker shows is those places (4 of 4), said to be all the workers' together, and counted
    once on the channel's pace card."""
    settings = ym_settings(
        db_url, ym, tmp_path, key=KEY, ym_offers_per_minute="1000", ym_parallel="4"
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(5))
    run_worker(worker, lambda w: w.cycle())
    worker.loop.target.share(3)  # type: ignore[attr-defined]  # two more workers counted
    figures = worker.loop.pace_figures(worker.loop.monotonic.now())
    assert (4, 4) == (figures["limit"], figures["max_limit"]), figures
    words = pace_words(figures, "ru")
    assert "(предел 4 из 4 на всех воркеров вместе)" in words, words
    card = site_pace([{"live": True, "channel": "market", "pace": figures}] * 3)
    assert card is not None and (4, 4) == (card["limit"], card["max_limit"]), card
