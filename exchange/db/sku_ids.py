"""Where a shop keeps each SKU, in the ``shop_sku_ids`` table: the database side of the
WooCommerce target's ``SkuIds`` port (exchange/targets/woocommerce/ids.py), built by
``exchange.app``. One row per (shop, SKU); ``shop`` names the target and its URL, so that two
shops served from one database never share ids."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError

from exchange.db.schema import shop_sku_ids
from exchange.domain.clock import Clock

CHUNK = 500  # SKUs per SELECT ... IN


class DbSkuIds:
    def __init__(self, engine: Engine, shop: str, clock: Clock) -> None:
        self.engine, self.shop, self.clock = engine, shop[:200], clock

    def get(self, skus: Iterable[str]) -> dict[str, tuple[int, int | None]]:
        wanted = list(skus)
        found: dict[str, tuple[int, int | None]] = {}
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(shop_sku_ids.c.sku, shop_sku_ids.c.product_id, shop_sku_ids.c.parent_id)
                    .where(shop_sku_ids.c.shop == self.shop)
                    .where(shop_sku_ids.c.sku.in_(wanted[start : start + CHUNK]))
                )
                for sku, product_id, parent_id in rows:
                    found[sku] = (int(product_id), None if parent_id is None else int(parent_id))
        return found

    def put(self, found: dict[str, tuple[int, int | None]]) -> None:
        """Replace the rows of these SKUs (delete, then insert, in one transaction: the same on
        both databases; two workers that look one SKU up at once write the same ids)."""
        if not found:
            return
        now = self.clock.now()
        # Another worker writing the same SKU at once looked up the same ids: theirs stand.
        with contextlib.suppress(IntegrityError):
            self._replace(found, now)

    def _replace(self, found: dict[str, tuple[int, int | None]], now: datetime) -> None:
        with self.engine.begin() as connection:
            skus = list(found)
            for start in range(0, len(skus), CHUNK):
                connection.execute(
                    delete(shop_sku_ids)
                    .where(shop_sku_ids.c.shop == self.shop)
                    .where(shop_sku_ids.c.sku.in_(skus[start : start + CHUNK]))
                )
            connection.execute(
                shop_sku_ids.insert(),
                [
                    {
                        "shop": self.shop,
                        "sku": sku,
                        "product_id": product_id,
                        "parent_id": parent_id,
                        "updated_at": now,
                    }
                    for sku, (product_id, parent_id) in found.items()
                ],
            )

    def forget(self, sku: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                delete(shop_sku_ids)
                .where(shop_sku_ids.c.shop == self.shop)
                .where(shop_sku_ids.c.sku == sku)
            )
