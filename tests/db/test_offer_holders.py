"""``DbSentTimes.offer_holders`` (the marketplaces' ``OfferHolders`` port), on SQLite and
PostgreSQL: the SKUs a channel gave each offer, found through the case-folded keys' indexes
(issue 32: never a scan of every price SKU), the trim deciding; and their order, the one that
keeps the offer first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from onegood import articles
from sqlalchemy import Engine, insert, select

from exchange.db.engine import transaction
from exchange.db.schema import aggregates, channels, deliveries, messages
from exchange.db.sent_times import DbSentTimes

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def given(engine: Engine, marks: list[tuple[str, str, int, str | None]]) -> DbSentTimes:
    """One price of each SKU on a channel: (SKU, delivery state, attempts, receipt), leased in
    the order given, a second apart."""
    with transaction(engine) as c:
        if c.execute(select(channels.c.id)).first() is None:
            c.execute(insert(channels).values(name="ym", target="yandex-market", added_at=T0))
        channel, name = c.execute(select(channels.c.id, channels.c.name)).one()
        for n, (sku, state, attempts, receipt) in enumerate(marks):
            aggregate = c.execute(
                insert(aggregates)
                .values(kind="price", aggregate=f"agg-{n}", sku=sku, price_type="retail")
                .returning(aggregates.c.id)
            ).scalar_one()
            pk = c.execute(
                insert(messages)
                .values(
                    message_id=f"m-{n}",
                    aggregate_id=aggregate,
                    kind="price",
                    aggregate=f"agg-{n}",
                    version=1,
                    schema_version="1",
                    payload="{}",
                    created_at=T0,
                    taken_at=T0,
                    updated_at=T0,
                    state=state,
                )
                .returning(messages.c.id)
            ).scalar_one()
            c.execute(
                insert(deliveries).values(
                    message_pk=pk,
                    channel_id=channel,
                    aggregate_id=aggregate,
                    kind="price",
                    version=1,
                    state=state,
                    attempts=attempts,
                    receipt=receipt,
                    waiting_since=T0,
                    updated_at=T0,
                    leased_at=T0 + timedelta(seconds=n),
                )
            )
    return DbSentTimes(engine, name)


def test_the_skus_that_trim_to_an_offer_and_no_others(engine: Engine) -> None:
    """Promise: every SKU equal to the offer once trimmed (spaces, tabs, either end) is found,
    whatever characters LIKE or GLOB would read as wildcards; one differing in case, or only
    beginning with the offer, is another offer."""
    holders = given(
        engine,
        [
            ("X-1", "delivered", 1, None),
            (" X-1", "delivered", 1, None),
            ("X-1\t", "delivered", 1, None),
            ("x-1", "delivered", 1, None),
            ("X-1a", "delivered", 1, None),
            ("50%_[*?]\\", "delivered", 1, None),
            ("  50%_[*?]\\ ", "delivered", 1, None),
            ("50x_[*?]\\", "delivered", 1, None),
            ("AB", "new", 0, None),  # never sent: no holder
        ],
    )

    found = holders.offer_holders(["X-1", "50%_[*?]\\", "AB", "Z"], ())

    assert {
        "X-1": {"X-1", " X-1", "X-1\t"},
        "50%_[*?]\\": {"50%_[*?]\\", "  50%_[*?]\\ "},
    } == {offer: set(skus) for offer, skus in found.items()}


def test_the_skus_whose_article_trims_to_an_offer(engine: Engine) -> None:
    """Promise (``sku_source = article``): the SKUs whose article, trimmed, is the offer."""
    holders = given(
        engine,
        [
            ("P-1", "delivered", 1, None),
            ("P-2", "in_progress", 1, None),
            ("P-3", "delivered", 1, None),
            ("P-4", "delayed", 1, None),
        ],
    )
    articles(engine, {"P-1": "ART_1", "P-2": " ART_1\t", "P-3": "art_1", "P-4": "ARTX1"})

    assert {"ART_1": ["P-1", "P-2"]} == holders.offer_holders(["ART_1"], (), by_article=True)


@pytest.mark.parametrize(
    ("marks", "ranked"),
    [
        # Both only claimed: the one leased first.
        ([("S ", "in_progress", 1, None), (" S", "in_progress", 1, None)], ["S ", " S"]),
        ([(" S", "in_progress", 1, None), ("S ", "delayed", 2, None)], [" S", "S "]),
        # One whose price went (delivered, or its send's receipt) before one only claimed,
        # even one claimed earlier: a worker that saw no other sent it at once.
        ([("S ", "in_progress", 1, None), (" S", "delivered", 1, None)], [" S", "S "]),
        ([("S ", "delayed", 2, None), (" S", "in_progress", 1, "ym-sent:1")], [" S", "S "]),
    ],
)
def test_the_sku_that_keeps_the_offer_comes_first(
    engine: Engine, marks: list[tuple[str, str, int, str | None]], ranked: list[str]
) -> None:
    """Promise (issue 32): the SKU that keeps the offer comes first, the same for every worker
    reading the same rows (two workers that claimed both at once agree)."""
    assert {"S": ranked} == given(engine, marks).offer_holders(["S"], ("ym-sent:",))
