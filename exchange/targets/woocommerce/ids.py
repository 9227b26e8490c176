"""Where the shop keeps each SKU: the port the WooCommerce target remembers ids through.

The target never reaches the database (the layers forbid it): ``exchange.app`` hands it an
object of this shape, backed by the ``shop_sku_ids`` table (``exchange.db.sku_ids``); the tests
and the demo may hand it ``MemorySkuIds``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

Where = tuple[int, int | None]
"""(product or variation id, parent product id for a variation, else None)."""


class SkuIds(Protocol):
    def get(self, skus: Iterable[str]) -> dict[str, Where]:
        """The ids remembered for those of ``skus`` that were looked up before."""
        ...

    def put(self, found: dict[str, Where]) -> None:
        """Remember (or replace) where each SKU is."""
        ...

    def forget(self, sku: str) -> None:
        """The shop said the id is gone: look the SKU up again next time."""
        ...


class MemorySkuIds:
    """A ``SkuIds`` in memory, for tests and the demo."""

    def __init__(self) -> None:
        self.ids: dict[str, Where] = {}

    def get(self, skus: Iterable[str]) -> dict[str, Where]:
        return {sku: self.ids[sku] for sku in skus if sku in self.ids}

    def put(self, found: dict[str, Where]) -> None:
        self.ids.update(found)

    def forget(self, sku: str) -> None:
        self.ids.pop(sku, None)
