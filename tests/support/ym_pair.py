"""1C's prices of two price types of one SKU on a Yandex Market channel (the pair rule: the
value and its discountBase), staged and read back by state. What
tests/integration/test_ym_pair_wait_read_back.py,
tests/integration/test_yandex_market_refused_yet_held.py and
tests/integration/test_yandex_market_review32.py share."""

from __future__ import annotations

import json

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row

messages = one_channel_messages()


def row(sku: str, price_type: str, version: int, amount: str) -> dict[str, object]:
    """1C's ``amount`` of ``price_type`` for ``sku`` (aggregate ``sku/price_type``), as staged."""
    payload = {"sku": sku, "price": amount, "currency": "RUB", "price_type": price_type}
    return {
        **price_row(sku, version, amount, aggregate=f"{sku}/{price_type}"),
        "payload": json.dumps(payload),
    }


def states(engine: Engine) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(aggregate, version) -> (state, reason) of every message on the one channel."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.state, messages.c.reason)
        )
        return {(a, v): (s, r) for a, v, s, r in rows}
