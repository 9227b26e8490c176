"""``sku_source = article`` (contract 14): the marketplaces know the seller's article, while
1C's exchange names offers by their 1C id. The article is 1C's ``Артикул`` the CommerceML
intake read and kept (``cml_catalog``, kind ``article``, keyed by the ``Ид`` it belongs to);
``exchange.db.articles`` reads it, the tests hand a ``MemoryArticles``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol


class Articles(Protocol):
    def of(self, skus: Iterable[str]) -> dict[str, str]:
        """The article of each SKU that has one (a SKU without one is left out)."""
        ...


class MemoryArticles:
    def __init__(self, articles: Mapping[str, str] | None = None) -> None:
        self.articles = dict(articles or {})

    def of(self, skus: Iterable[str]) -> dict[str, str]:
        return {sku: self.articles[sku] for sku in skus if self.articles.get(sku)}


NO_ARTICLES: Articles = MemoryArticles()
