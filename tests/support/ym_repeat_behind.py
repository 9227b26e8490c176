"""1C's 1000 live on Yandex Market, 300 withheld by Yandex's price quarantine (research §3.4),
1000 again, refused as a repeat ("Price is already set", the simulator's ``repeat_price=refuse``,
§3.5 open): the scenario and what it must show while Yandex still lists 300 (1000 waits,
uncharged; 300 stays withheld and is said not to be confirmed). What
tests/integration/test_yandex_market_behind_quarantine.py and
tests/integration/test_yandex_market_behind_withheld_readback.py share."""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from marketsims import ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.cli.withheld_shown import withheld_entries
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.simclock import SimClock
from exchange.dev.testing import price_row, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.runner import run_until_idle
from exchange.targets.yandex_market.target import YandexMarketTarget


@contextmanager
def refusing_repeats(**switches: Any) -> Iterator[YmSimulator]:
    """Yandex Market refusing a repeat, business 1001, Api-Key ``ym-key-1234``: a minute lasts
    a second, an accepted price is applied half a real second later; ``switches``: the other
    ``YmSwitches``."""
    simulator = YmSimulator(
        "ym-key-1234",
        1001,
        clock=SimClock(60),
        switches=YmSwitches(apply_delay=30, repeat_price="refuse", **switches),
    )
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


def states(engine: Engine) -> dict[int, tuple[str, str | None, str | None, int]]:
    """version -> (state, reason, last_error, attempts) of every delivery."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(
                messages.c.version,
                deliveries.c.state,
                deliveries.c.reason,
                deliveries.c.last_error,
                deliveries.c.attempts,
            ).join(deliveries, deliveries.c.message_pk == messages.c.id)
        )
        return {v: (s, r, e, a) for v, s, r, e, a in rows}


def deliverer(
    db_url: str, engine: Engine, ym: YmSimulator, directory: Path, **more: Any
) -> Callable[[list[Any], float], None]:
    """``deliver(rows, seconds)``: ``rows`` staged, then a new worker of the one Yandex Market
    installation against ``ym`` (``more``: other settings) run until idle for at most
    ``seconds`` (it looks at the quarantine again ``ym_apply_timeout`` / 10 after a wait)."""
    settings = ym_settings(db_url, ym, directory, **more)

    def deliver(rows: list[Any], seconds: float) -> None:
        worker = bootstrap.worker(settings, engine, rng=random.Random(3))
        sending = worker.loop.target
        assert isinstance(sending, YandexMarketTarget)
        stage(engine, rows)
        run_worker(worker, lambda w: run_until_idle(w, max_seconds=seconds, poll_interval=0.05))

    return deliver


def a_repeat_behind_withheld(
    engine: Engine,
    ym: YmSimulator,
    deliver: Callable[[list[Any], float], None],
    *,
    first: float,
    repeat: float,
    waiting: Container[str],
) -> str:
    """1000 (v1) and 300 (v2, withheld) each delivered in a run of at most ``first`` seconds,
    then 1000 again (v3) in one of ``repeat``. Asserted while Yandex still lists 300: v2
    withheld, never superseded; v3 in a state of ``waiting`` (never delivered), uncharged, its
    last error that the quarantine holds 300 and the seller should not confirm it; v2 said not
    to be confirmed (``newer_waits_behind``). v3's last error."""
    deliver([price_row("Y1", 1, "1000.00")], first)
    deliver([price_row("Y1", 2, "300.00")], first)
    assert "withheld" == states(engine)[2][0]
    deliver([price_row("Y1", 3, "1000.00")], repeat)

    assert Decimal(300) == ym.quarantined()["Y1"].current.value, "Yandex still lists 300"
    found = states(engine)
    assert ("withheld", None) == found[2][:2], "v2 is still Yandex's to hold, never superseded"
    state, reason, said, attempts = found[3]
    assert state in waiting, f"never delivered while Yandex lists 300: {(state, reason, said)}"
    assert said is not None and "quarantine still holds value=300" in said, said
    assert "should not confirm it" in said, said
    assert 0 == attempts, "the wait is not charged"
    # ``withheld list --json`` (and ``status``, the workbench) say v2 is not to be confirmed.
    entries = {e["version"]: e for e in withheld_entries(engine)}
    assert entries[2]["newer_waits_behind"] is True, "v2 is said not to be confirmed"
    return said
