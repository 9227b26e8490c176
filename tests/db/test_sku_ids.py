"""Where a shop keeps each SKU (the WooCommerce target's ids), kept in the database, on SQLite
and PostgreSQL: one row per shop and SKU, replaced when looked up again, forgotten on demand."""

from __future__ import annotations

from sqlalchemy import Engine

from exchange.db.sku_ids import DbSkuIds
from exchange.domain.clock import FakeClock


def test_put_get_replace_forget_and_shops_apart(engine: Engine, clock: FakeClock) -> None:
    shop = DbSkuIds(engine, "woocommerce https://a", clock)
    other = DbSkuIds(engine, "woocommerce https://b", clock)

    shop.put({"SKU-1": (101, None), "VAR-1": (202, 7)})
    other.put({"SKU-1": (999, None)})
    shop.put({"SKU-1": (103, None)})  # made again under a new id
    shop.forget("VAR-1")

    assert {"SKU-1": (103, None)} == shop.get(["SKU-1", "VAR-1", "SKU-2"])
    assert {"SKU-1": (999, None)} == other.get(["SKU-1"])
    assert {f"S{n}": (n, None) for n in range(1200)} == (
        shop.put({f"S{n}": (n, None) for n in range(1200)})
        or shop.get([f"S{n}" for n in range(1200)])
    )
