"""Review 36 (items 4-6), the scene of prices ``invalid-for-channel`` on a Yandex Market
channel with newer versions from 1C in every state that changes their advice, shared by the
report's and the workbench's tests:

- V-1: v1 1000 RUB delivered, v2 in USD quarantined, v3 1200 RUB delivered after it: v2 is
  superseded after quarantine (its advice says so, on «площадка», never «сайт»);
- V-2: v1 1000 RUB delivered, v2 1100 USD and v3 1150 USD both quarantined: nothing goes in
  v2's place (buyers keep 1000), the advice must not say the newer one goes;
- V-3: v1 quarantined, v2 on its way: v2 goes in v1's place;
- V-4: v1 quarantined, nothing newer: correct and retry.

Review rev36b (item 1), a newer version the marketplace withholds in its own price quarantine
(research: Yandex Market §3, Wildberries §2; the delivery's state ``withheld``, contract 13):
buyers do not see it until someone releases it, so it does not go in the price's place:

- V-5: v1 1000 RUB delivered, v2 quarantined, v3 1150 RUB withheld by the marketplace, v4 in
  quarantine too: nothing reaches buyers in v2's place, buyers keep 1000 until v3 is
  released; v2 is advised cancel, then a decision on v3 in the withheld list;
- V-6: v1 quarantined, v2 withheld, v3 on its way: v3 goes in v1's place (withheld is said
  only where nothing newer is on its way).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries
from exchange.dev.testing import one_channel_messages, price_row
from exchange.queue.deliveries import one_channel
from tests.support.second_channel import taken

messages = one_channel_messages()
REASON = "invalid-for-channel"


def _set(
    engine: Engine, aggregate: str, version: int, *, done: bool = False, **values: object
) -> None:
    """The delivery of ``aggregate``'s ``version`` on the one channel takes ``values``; with
    ``done`` the channel's cursor stands at it (it was delivered)."""
    with transaction(engine) as connection:
        the_one = one_channel(connection)
        pk, aggregate_id = connection.execute(
            select(messages.c.id, messages.c.aggregate_id).where(
                messages.c.aggregate == aggregate, messages.c.version == version
            )
        ).one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == pk, deliveries.c.channel_id == the_one)
            .values(**values)
        )
        if done:
            connection.execute(
                update(channel_aggregates)
                .where(
                    channel_aggregates.c.aggregate_id == aggregate_id,
                    channel_aggregates.c.channel_id == the_one,
                )
                .values(done_version=version)
            )


def _price(sku: str, version: int, price: str) -> dict[str, object]:
    return dict(price_row(sku, version, price, aggregate=f"{sku}/retail"))


def invalid_newer_scene(engine: Engine, now: datetime) -> dict[str, str]:
    """The scene above, its one channel a Yandex Market one; the message ids by «V-n vN»."""
    with transaction(engine) as connection:
        connection.execute(
            update(channels)
            .where(channels.c.id == one_channel(connection))
            .values(target="yandex-market")
        )
    quarantined = {"state": "quarantined", "reason": REASON}
    # V-1: delivered, then an invalid one, then a newer delivered after it
    taken(engine, [_price("V-1", 1, "1000.00")], now)
    _set(engine, "V-1/retail", 1, done=True, state="delivered")
    taken(engine, [_price("V-1", 2, "12.00")], now)
    _set(engine, "V-1/retail", 2, **quarantined)
    taken(engine, [_price("V-1", 3, "1200.00")], now)
    _set(engine, "V-1/retail", 3, done=True, state="delivered")
    # V-2: delivered, then two invalid ones, both in quarantine
    taken(engine, [_price("V-2", 1, "1000.00")], now)
    _set(engine, "V-2/retail", 1, done=True, state="delivered")
    taken(engine, [_price("V-2", 2, "1100.00")], now)
    _set(engine, "V-2/retail", 2, **quarantined)
    taken(engine, [_price("V-2", 3, "1150.00")], now)
    _set(engine, "V-2/retail", 3, **quarantined)
    # V-3: an invalid one, a newer on its way
    taken(engine, [_price("V-3", 1, "10.50")], now)
    _set(engine, "V-3/retail", 1, **quarantined)
    taken(engine, [_price("V-3", 2, "11.00")], now)
    # V-4: an invalid one alone
    taken(engine, [_price("V-4", 1, "20.50")], now)
    _set(engine, "V-4/retail", 1, **quarantined)
    # V-5: delivered, an invalid one, a newer the marketplace withholds, a newer in quarantine
    taken(engine, [_price("V-5", 1, "1000.00")], now)
    _set(engine, "V-5/retail", 1, done=True, state="delivered")
    taken(engine, [_price("V-5", 2, "1100.00")], now)
    _set(engine, "V-5/retail", 2, **quarantined)
    taken(engine, [_price("V-5", 3, "1150.00")], now)
    _set(engine, "V-5/retail", 3, state="withheld", last_status=200)
    taken(engine, [_price("V-5", 4, "1160.00")], now)
    _set(engine, "V-5/retail", 4, **quarantined)
    # V-6: an invalid one, a newer withheld, a newer still on its way
    taken(engine, [_price("V-6", 1, "30.50")], now)
    _set(engine, "V-6/retail", 1, **quarantined)
    taken(engine, [_price("V-6", 2, "1200.00")], now)
    _set(engine, "V-6/retail", 2, state="withheld", last_status=200)
    taken(engine, [_price("V-6", 3, "1210.00")], now)
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.message_id)
        ).all()
    return {f"{aggregate.split('/')[0]} v{version}": mid for aggregate, version, mid in rows}
