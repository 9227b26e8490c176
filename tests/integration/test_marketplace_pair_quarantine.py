"""Review ozonpair, item 1 (contract 4, 14; docs/marketplaces.md: the marketplace never shows the
new price of one type beside the old price of the other, «1000 при 1800»): a price quarantined
by a rule of two price types stays for a person, and a new price of the other type 1C sends
meanwhile waits for that decision (not charged) instead of going beside the price 1C replaced.
A retry of the quarantined one sends both in one update; a cancel lets the waiting one go
beside the price the marketplace holds, as the wait's words say. Ozon's simulator
(research §1.1: old_price above price), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ozon_sim
from ozon_pair import both_clocks, cabinet_old_price_refuses, pair_worker, typed
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.ops import quarantine
from exchange.ops.find import find
from exchange.ops.status import status
from exchange.words import detail_words, state_said
from exchange.worker import Worker


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _state(engine: Engine, aggregate: str, version: int) -> tuple[str, str | None, str, str]:
    with transaction(engine, read_only=True) as connection:
        s, r, e, m = connection.execute(
            select(
                deliveries.c.state,
                deliveries.c.reason,
                deliveries.c.last_error,
                messages.c.message_id,
            )
            .join(messages, deliveries.c.message_pk == messages.c.id)
            .where(messages.c.aggregate == aggregate, messages.c.version == version)
        ).one()
    return s, r, e or "", m


def _said_as_a_wait_for_a_person(engine: Engine, now: Any, w: Worker) -> None:
    """Review wait34: the old price waiting for a person's decision on the quarantined price
    was said «ждёт площадку» and counted under "wait for the marketplace" by ``status`` and
    ``find``: it waits for an operator (``waits.wait_of``: "person"), counted apart."""
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, w.kinds)
        found = [r for r in find(connection, "SKU-1") if r["aggregate"] == "SKU-1/old"]
    waits = (figures.awaiting_channel, figures.awaiting_1c, figures.awaiting_person)
    assert waits == (0, 0, 1), figures
    row = found[0]  # newest first: v2, the one waiting
    assert (row["version"], row["awaiting"], row["awaiting_1c"]) == (2, True, False), row
    assert row["awaiting_person"], row
    said = state_said(row["state"], "ru", awaiting=True, on_person=row["awaiting_person"])
    assert said == "ждёт решения оператора по основной цене", said


@pytest.mark.parametrize("decision", ["retry", "cancel"])
def test_a_new_old_price_waits_for_the_persons_decision_on_the_quarantined_price_never_a_mixed_pair(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path, decision: str
) -> None:
    clock, worker = pair_worker(db_url, engine, site, tmp_path)

    advance = both_clocks(clock, site)

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "1000.00", "retail"), typed(1, "1400.00", "old")])
        await drain(w)
        advance(60)
        # 1400 above 1380 by 1.4 %, under Ozon's 5 % gap: waits for 1C, then is quarantined (an
        # old price below the new price would be no discount, and 1380 would go without it).
        stage(engine, [typed(2, "1380.00", "retail")])
        for _ in range(12):  # COMPANION_GRACE (10 min) runs out
            await w.cycle()
            advance(60)
        await w.cycle()
        state, reason, said, _ = _state(engine, "SKU-1", 2)
        assert (state, reason) == ("quarantined", "invalid-for-channel"), said
        # The entry says what a person's decision on it does: of an old price 1C sends
        # meanwhile (none had come: review rev38b), the price held when it was quarantined.
        waits = "a new old_price that 1C sends meanwhile waits for a person's decision"
        assert waits in said and "from 1C waits" not in said, said
        assert "retrying it sends both together" in said, said
        # The marketplace by its name, never the target's code (review words34).
        held = "cancelling it leaves the price Ozon holds (price 1000.00 when this was quarantined)"
        assert held in said and "live" not in said, said
        russian = detail_words(said)
        assert "которую 1С пришлёт тем временем" in russian, russian
        assert "которую показывает Ozon (при карантине — price 1000.00)" in russian, russian
        assert "повтор отправит обе цены вместе" in russian, russian
        assert "1000.00" in russian and "cancelling" not in russian, russian
        stage(engine, [typed(2, "1800.00", "old")])
        for _ in range(3):
            await w.cycle()
            advance(61)
        state, reason, said, _ = _state(engine, "SKU-1/old", 2)
        quarantined = _state(engine, "SKU-1", 2)[3]
        assert (state, reason) == ("delayed", None), "waits, not charged, never 1000/1800"
        assert quarantined in said and "retrying" in said and "cancelling" in said, said
        russian = detail_words(said)
        assert quarantined in russian and "повтор" in russian and "waits" not in russian
        assert [(u.get("price"), u.get("old_price")) for u in site.updates("SKU-1")] == [
            (1000, 1400)
        ]
        _said_as_a_wait_for_a_person(engine, clock.now(), w)
        with transaction(engine) as connection:
            if decision == "retry":
                quarantine.retry(
                    connection,
                    [quarantined],
                    quarantine.Filters(),
                    operator="test",
                    note=None,
                    now=clock.now(),
                    dry_run=False,
                )
            else:
                quarantine.cancel(
                    connection,
                    [quarantined],
                    operator="test",
                    note="1C's 1380 is not meant",
                    now=clock.now(),
                    kinds=w.kinds,
                )
        for _ in range(3):
            await w.cycle()
            advance(61)

    run_worker(worker, scenario)

    pairs = [(u.get("price"), u.get("old_price")) for u in site.updates("SKU-1")]
    if decision == "retry":
        assert pairs == [(1000, 1400), (1380, 1800)], "both together, in one update"
        assert _state(engine, "SKU-1", 2)[0] == "delivered"
        assert site.requests[IMPORT_PRICES] == 2
    else:
        # The person decided 1380 is not to go: the old price goes beside the price Ozon
        # holds, as the wait's words said cancelling would do.
        assert pairs == [(1000, 1400), (1000, 1800)]
    assert _state(engine, "SKU-1/old", 2)[0] == "delivered"
    product = site.product("SKU-1")
    assert product is not None and product.old_price == Decimal(1800)


def test_an_old_price_held_in_ozons_cabinet_with_old_price_mapped_asks_for_1cs_not_a_mapping(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozonpair, item 2 (research §1.1, §1.4): Ozon holds the old price 1200 set in the
    seller's cabinet; the channel maps 1C's ``old`` to old_price, but 1C has sent none. 1C's
    1300 is refused (``old_price_less_than_price``), quarantined ``channel-rule`` with words
    that ask for 1C's old price of this SKU (or clearing it in the cabinet), never to map a
    price type already mapped. 1C's old price 1500 that follows waits for the person's
    decision on 1300 (never 1000/1500), and the retry sends 1300/1500 in one update."""
    clock, worker = pair_worker(db_url, engine, site, tmp_path)

    advance = both_clocks(clock, site)

    async def scenario(w: Worker) -> None:
        await cabinet_old_price_refuses(w, engine, site, advance)
        state, reason, said, quarantined = _state(engine, "SKU-1", 2)
        assert (state, reason) == ("quarantined", "channel-rule"), said
        assert "old_price 1200" in said and "map a 1C price type" not in said, said
        assert "send this SKU's old price from 1C (price type 'old'" in said, said
        assert "retrying it sends both together" in said, said
        russian = detail_words(said)
        assert "уже сопоставлен" in russian and "сопоставьте" not in russian, russian
        advance(60)
        stage(engine, [typed(1, "1500.00", "old")])
        for _ in range(3):
            await w.cycle()
            advance(61)
        assert _state(engine, "SKU-1/old", 1)[:2] == ("delayed", None), "never 1000/1500"
        with transaction(engine) as connection:
            quarantine.retry(
                connection,
                [quarantined],
                quarantine.Filters(),
                operator="test",
                note=None,
                now=clock.now(),
                dry_run=False,
            )
        for _ in range(3):
            await w.cycle()
            advance(61)

    run_worker(worker, scenario)

    pairs = [(u.get("price"), u.get("old_price")) for u in site.updates("SKU-1")]
    assert pairs[0] == (1000, None) and pairs[-1] == (1300, 1500), pairs
    assert (1000, 1500) not in pairs, pairs
    assert _state(engine, "SKU-1", 2)[0] == "delivered"
    assert _state(engine, "SKU-1/old", 1)[0] == "delivered"
