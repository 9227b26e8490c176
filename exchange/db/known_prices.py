"""The latest known price of each (SKU, price type): the database side of the targets'
``KnownPrices`` port (exchange/targets/prices.py), built by ``exchange.app`` for the 1C-Bitrix
target (contract 10: every ``Предложение`` carries every mapped price type whose latest price the
service knows, because receivers such as wc1c read an offer's prices as its whole set).

"Known" is the latest version delivered or being delivered (``in_progress``) of each price
aggregate of the SKU (``aggregates.sku`` and ``price_type``, fixed by the first accepted
version); a version only waiting (new, delayed) or quarantined is not what the shop holds.
Prune keeps what this reads however old (``exchange.ops.prune``, contract 13): the latest
delivered message of each price, and one being delivered is never final, so never pruned. Only a
price whose messages were pruned before that rule (a database pruned by an earlier release) is
not known, until 1C sends it again."""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from sqlalchemy import Engine, and_, func, select

from exchange.db.schema import aggregates, messages
from exchange.domain.prices import DEFAULT_CURRENCY, KnownPrice
from exchange.domain.states import State

CHUNK = 500  # SKUs per SELECT ... IN
KNOWN_STATES = (State.DELIVERED.value, State.IN_PROGRESS.value)


class DbKnownPrices:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        wanted = sorted(set(skus))
        found: dict[tuple[str, str], KnownPrice] = {}
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                of_skus = select(aggregates.c.id).where(
                    aggregates.c.kind == "price",
                    aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                )
                newest = (
                    select(
                        messages.c.aggregate_id.label("aggregate_id"),
                        func.max(messages.c.version).label("version"),
                    )
                    .where(
                        messages.c.aggregate_id.in_(of_skus),
                        messages.c.state.in_(KNOWN_STATES),
                    )
                    .group_by(messages.c.aggregate_id)
                    .subquery()
                )
                rows = connection.execute(
                    select(
                        aggregates.c.sku,
                        aggregates.c.price_type,
                        messages.c.version,
                        messages.c.payload,
                    ).select_from(
                        newest.join(
                            messages,
                            and_(
                                messages.c.aggregate_id == newest.c.aggregate_id,
                                messages.c.version == newest.c.version,
                                messages.c.state.in_(KNOWN_STATES),
                            ),
                        ).join(aggregates, aggregates.c.id == newest.c.aggregate_id)
                    )
                )
                for sku, price_type, version, payload in rows:
                    price = _price(sku, price_type, int(version), payload)
                    if price is not None:
                        found[(price.sku, price.price_type)] = price
        return list(found.values())


def _price(
    sku: str | None, price_type: str | None, version: int, payload: str
) -> KnownPrice | None:
    if not sku or price_type is None:
        return None
    try:
        body = json.loads(payload, parse_float=Decimal)
        amount = Decimal(str(body["price"]))
        currency = str(body.get("currency", DEFAULT_CURRENCY))
    except (ValueError, KeyError, TypeError, InvalidOperation):
        return None
    return KnownPrice(sku, price_type, amount, currency, version)
