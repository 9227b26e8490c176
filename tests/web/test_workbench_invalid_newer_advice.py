"""Seller review 35: the workbench's advice on a price ``invalid-for-channel`` said retry where
1C had since sent a newer version of it (a retry would only end superseded by the newer):
with a newer version, the advice is cancel; without one, correct and retry as before."""

from __future__ import annotations

import html
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from workbench_helpers import signed_in

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row
from tests.support.second_channel import on_the_one, taken

messages = one_channel_messages()
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
RETRY = "«Повторить»"


def _advice(olga: str, message_id: str) -> str:
    page = html.unescape(signed_in(olga, "olga").get(f"/message/{message_id}").text)
    return " ".join(page.split('id="next-step"', 1)[1].split("</dd>", 1)[0].split())


def _first(db: Engine) -> str:
    with transaction(db, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.version == 1)
            ).scalar_one()
        )


def test_an_invalid_price_with_a_newer_version_from_1c_is_advised_cancel_not_retry(
    olga: str, db: Engine
) -> None:
    taken(db, [price_row("SKU-1", 1, "10.50", aggregate="SKU-1/retail")], NOW)
    on_the_one(db, "SKU-1/retail", state="quarantined", reason="invalid-for-channel")
    alone = _advice(olga, _first(db))
    assert RETRY in alone, alone  # no newer version: correct it, then retry, as before
    taken(db, [price_row("SKU-1", 2, "11.00", aggregate="SKU-1/retail")], NOW)

    said = _advice(olga, _first(db))

    assert "1С с тех пор прислала более новую версию" in said, said
    assert "«Снять с отправки навсегда»" in said and RETRY not in said, said
