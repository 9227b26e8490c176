"""When a marketplace channel's prices were accepted lately, per SKU: the database side of the
``ozon`` target's ``SentTimes`` port (exchange/targets/ozon/hours.py), built by
``exchange.app``, so that Ozon's 10 updates of a product an hour are counted across a restart
(contract 14: "the target counts its own accepted sends per product").

An accepted send is a delivery of the channel that ended ``delivered`` with the marketplace's
200 (``last_status``); one delivered without a request (an unchanged price) has none. Its time
is the delivery's ``updated_at``, when the worker recorded the answer, a moment after the
request: the count errs on the side of waiting. The deliveries of one item, recorded together,
are one send (one time).

Ozon's refusals for the limit are read from the receipts the target gave their AWAITING
(``ozon-refused:<time>``, exchange/targets/ozon/hours.py: the prefix it asks for), which a
superseded version keeps: a restart still waits the product's hour after a refusal
(contract 14)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Engine, select

from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import aggregates, deliveries
from exchange.domain.states import State

CHUNK = 500


class DbSentTimes:
    def __init__(self, engine: Engine, channel: Channel = None) -> None:
        self.engine = engine
        self.channel = channel

    def since(self, skus: Iterable[str], moment: datetime) -> dict[str, list[float]]:
        wanted = sorted(set(skus))
        found: dict[str, set[float]] = {}
        d = deliveries.c
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(aggregates.c.sku, d.updated_at)
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        on(d.channel_id, ids),
                        d.state == State.DELIVERED.value,
                        d.updated_at >= moment,
                        d.last_status == 200,
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                for sku, at in rows:
                    found.setdefault(str(sku), set()).add(at.timestamp())
        return {sku: sorted(times) for sku, times in found.items()}

    def receipts_since(
        self, skus: Iterable[str], moment: datetime, prefix: str
    ) -> dict[str, list[str]]:
        wanted = sorted(set(skus))
        found: dict[str, list[str]] = {}
        d = deliveries.c
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(aggregates.c.sku, d.receipt)
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        on(d.channel_id, ids),
                        d.updated_at >= moment,
                        d.receipt.startswith(prefix, autoescape=True),
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                for sku, receipt in rows:
                    found.setdefault(str(sku), []).append(str(receipt))
        return found
