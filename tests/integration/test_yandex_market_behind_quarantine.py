"""Review ym34 finding 1 (contract 13, 14): a price Yandex Market shows already, refused as a
repeat ("Price is already set", the simulator's ``repeat_price=refuse``, research §3.5 open),
while Yandex's price quarantine still lists an earlier price of the offer (§3.4), is never
delivered on the read-back alone: 1000 live, 300 withheld, 1000 again. Delivered, it
superseded the withheld 300 and ``status`` said nothing needed a person, while Yandex kept 300
listed and a seller's confirmation in the cabinet would have put it live over 1C's 1000. Now
1000 waits, uncharged, the withheld 300 stays withheld and is said not to be confirmed; once a
correct price releases the quarantine, 1000 is delivered and 300 superseded. A worker against
the simulator on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
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


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    switches = YmSwitches(apply_delay=30, repeat_price="refuse")
    simulator = YmSimulator("ym-key-1234", 1001, clock=SimClock(60), switches=switches)
    simulator.start()
    yield simulator
    simulator.stop()


def states(engine: Engine) -> dict[int, tuple[str, str | None, str | None, int]]:
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


def test_a_price_shown_already_while_yandex_lists_an_older_one_waits_and_the_older_stays_withheld(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    settings = ym_settings(db_url, ym, tmp_path, ym_apply_timeout="3")

    def deliver(rows: list[Any], seconds: float) -> None:
        worker = bootstrap.worker(settings, engine, rng=random.Random(3))
        sending = worker.loop.target
        assert isinstance(sending, YandexMarketTarget)
        stage(engine, rows)
        run_worker(worker, lambda w: run_until_idle(w, max_seconds=seconds, poll_interval=0.05))

    deliver([price_row("Y1", 1, "1000.00")], 10)
    deliver([price_row("Y1", 2, "300.00")], 10)
    assert "withheld" == states(engine)[2][0]
    deliver([price_row("Y1", 3, "1000.00")], 3)

    assert Decimal(300) == ym.quarantined()["Y1"].current.value, "Yandex still lists 300"
    found = states(engine)
    assert ("withheld", None) == found[2][:2], "v2 is still Yandex's to hold, never superseded"
    state, _, said, attempts = found[3]
    assert "delayed" == state, "never delivered while Yandex lists 300"
    assert said is not None and "quarantine still holds value=300" in said, said
    assert "should not confirm it" in said, said
    assert 0 == attempts, "the wait is not charged"
    # ``withheld list --json`` (and ``status``, the workbench) say v2 is not to be confirmed.
    entries = {e["version"]: e for e in withheld_entries(engine)}
    assert entries[2]["newer_waits_behind"] is True

    ym.price_in_cabinet("Y1", Decimal(1000))  # the seller sets the correct price: released
    deliver([], 5)
    found = states(engine)
    assert ("delivered", None) == found[3][:2]
    assert ("cancelled", "superseded") == found[2][:2]
    assert Decimal(1000) == ym.live("Y1").value  # type: ignore[union-attr]
    assert "Y1" not in ym.quarantined()
