"""Yandex Market workers of one business over one database: the simulator's cabinet and each
worker's target keeping what is spent and what is left of the business's budget in the
database (``DbHold``, ``DbLeft``), as the workers of one installation do (research §3.3). The
set-up tests/targets/test_ym_learned_limit_follows.py and
tests/targets/test_ym_workers_share_remaining.py share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine

from exchange.db.target_lock import DbHold, DbLeft, DbSlots
from exchange.dev.simclock import SimClock
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.clock import SystemClock
from exchange.targets.marketplace.hold import NO_SHARED_SLOTS
from exchange.targets.yandex_market.pace import PAST_UNTIL
from exchange.targets.yandex_market.target import YandexMarketTarget

KEY = "ym-key"
BUSINESS = 1001


@contextmanager
def ym_business(offers_per_minute: int, *, scale: float) -> Iterator[YmSimulator]:
    """The business's cabinet allowing ``offers_per_minute``, a simulated minute lasting
    ``60 / scale`` real seconds, an accepted price shown at once."""
    simulator = YmSimulator(
        KEY,
        BUSINESS,
        clock=SimClock(scale),
        offers_per_minute=offers_per_minute,
        switches=YmSwitches(apply_delay=0),
    )
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


def shared_worker(
    ym: YmSimulator,
    engine: Engine,
    offers_per_minute: int,
    *,
    past_until: float = PAST_UNTIL,
    parallel: int | None = None,
) -> YandexMarketTarget:
    """One worker's target, its budget the business's in ``engine`` (``ym_offers_per_minute``
    set to ``offers_per_minute``); ``parallel``: ``ym_parallel``, its places the business's in
    ``engine`` as well (``DbSlots``, as ``exchange run`` builds them); None: no places."""
    return YandexMarketTarget(
        ym.url,
        BUSINESS,
        lambda: KEY,
        price_types={"retail": "value"},
        offers_per_minute=offers_per_minute,
        spent=lambda method: DbHold(engine, f"ym spent:{BUSINESS}:{method}"),
        left=lambda method: DbLeft(engine, f"ym left:{BUSINESS}:{method}"),
        past_until=past_until,
        parallel=4 if parallel is None else parallel,
        slots=NO_SHARED_SLOTS
        if parallel is None
        else DbSlots(engine, f"ym parallel:{BUSINESS}", parallel, SystemClock()),
    )
