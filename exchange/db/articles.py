"""The articles 1C's CommerceML named (``cml_catalog``, kind ``article``): the database side of
the marketplaces' ``Articles`` port (exchange/targets/marketplace/articles.py).

The intake keeps a product's ``Артикул`` by the product's ``Ид``; a SKU is that ``Ид`` (an
offer of the product itself), or it followed by ``#`` and a characteristic's ``Ид``. Only the
first has the article: two characteristics of one product share the product's, and a
marketplace takes one price per article, so a characteristic's offer has none of its own here
(``invalid-for-channel``, never the product's price overwritten by each characteristic's)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, select

from exchange.db.schema import cml_catalog

CHUNK = 500


class DbArticles:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def of(self, skus: Iterable[str]) -> dict[str, str]:
        wanted = sorted(set(skus))
        found: dict[str, str] = {}
        c = cml_catalog.c
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(c.key, c.value).where(
                        c.kind == "article", c.key.in_(wanted[start : start + CHUNK])
                    )
                )
                for key, value in rows:
                    if value and value.strip():
                        found[key] = value.strip()
        return found
