"""Ozon: a channel's first send of a SKU reads Ozon's prices first, and what Ozon shows at exactly
those prices is delivered without an import (review ozonleft35 item 1, a fresh-context reviewer
playing Ozon).

Each import is one of the product's 10 updates an hour (research §1.3), whether or not the price
changed (§1.5: assume an unchanged price counts). The operator drops the channel ``ozon``, the
configuration registers it again, ``channels seed ozon`` gives it every current price: the old
code sent them all again (the new channel has no delivered price), spending the hour for
nothing. Now Ozon's prices are read first (one read for the batch, §1.4): SKU-1 and SKU-2, which
Ozon shows at 1C's prices, are delivered without a request; SKU-3, whose price was changed in
Ozon's cabinet since, is imported. Judged from the simulator's requests and its hour's count.
SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from added_again import drop_and_add_again, ozon_settings
from marketsims import ozon_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, history, messages
from exchange.dev.ozonsim import IMPORT_PRICES, INFO_PRICES, OzonSimulator
from exchange.dev.testing import drain, price_row, run_worker, stage
from exchange.domain.clock import FakeClock

PRICES = {"SKU-1": "1000.00", "SKU-2": "2000.00", "SKU-3": "3000.00"}


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _ended(engine: Engine, channel_id: int) -> dict[str, tuple[str, str]]:
    """SKU -> (state, the delivered detail) of the channel's deliveries."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, deliveries.c.state, history.c.detail)
            .join(messages, deliveries.c.message_pk == messages.c.id)
            .join(
                history,
                (history.c.message_pk == messages.c.id)
                & (history.c.channel_id == deliveries.c.channel_id)
                & (history.c.event == "delivered"),
                isouter=True,
            )
            .where(deliveries.c.channel_id == channel_id)
        ).all()
    return {str(sku): (str(state), str(detail or "")) for sku, state, detail in rows}


def test_a_readded_channel_sends_no_import_for_prices_ozon_already_shows(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    settings = ozon_settings(db_url, site, tmp_path)
    bootstrap.register_channels(settings, engine)
    clock = FakeClock()
    stage(engine, [price_row(sku, 1, amount) for sku, amount in PRICES.items()])
    run_worker(bootstrap.worker(settings, engine, clock=clock, rng=random.Random(1)))
    assert [site.price(sku) for sku in PRICES] == [Decimal(a) for a in PRICES.values()]
    assert site.requests[IMPORT_PRICES] == 1
    site.promote("SKU-3", Decimal("3333"))  # the seller changed it in Ozon's cabinet since

    clock.advance(60)
    again = drop_and_add_again(settings, engine, "ozon", clock.now())
    reads = site.requests[INFO_PRICES]
    run_worker(bootstrap.worker(settings, engine, clock=clock, rng=random.Random(2)), drain)

    # Ozon's hour: SKU-1 and SKU-2 not updated again (the old code: [2, 2, 2]).
    assert [len(site.charged(sku)) for sku in PRICES] == [1, 1, 2]
    assert site.outcomes["unchanged"] == 0, "no import of a price Ozon showed"
    assert site.requests[IMPORT_PRICES] == 2, "one import, of SKU-3 only"
    assert site.requests[INFO_PRICES] == reads + 1, "one read for the seed's batch"
    assert site.price("SKU-3") == Decimal("3000")
    ended = _ended(engine, again)
    assert {sku: state for sku, (state, _) in ended.items()} == dict.fromkeys(PRICES, "delivered")
    for sku in ("SKU-1", "SKU-2"):
        detail = ended[sku][1]
        assert f"Ozon shows price {PRICES[sku]} already" in detail, detail
        assert "first send" in detail and "not sent" in detail, detail
    assert "already" not in ended["SKU-3"][1], ended["SKU-3"]
