"""``DbSentTimes.offer_holders`` (the marketplaces' ``OfferHolders`` port), on SQLite and
PostgreSQL: the SKUs a channel gave each offer, found through the case-folded keys' indexes
(issue 32: never a scan of every price SKU), the trim deciding; and their order, the one that
keeps the offer first."""

from __future__ import annotations

from datetime import timedelta

import pytest
from follow import set_delivery
from onegood import articles
from optools import take
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.schema import messages
from exchange.db.sent_times import DbSentTimes
from exchange.dev.testing import fast_settings, price_row
from exchange.domain.clock import FakeClock


def given(
    db_url: str, engine: Engine, clock: FakeClock, marks: list[tuple[str, str, int, str | None]]
) -> DbSentTimes:
    """One price of each SKU taken in, its delivery then set: (SKU, state, attempts, receipt),
    leased in the order given, a second apart."""
    take(engine, fast_settings(db_url), clock, [price_row(sku, 1) for sku, *_ in marks])
    with transaction(engine) as connection:
        for n, (sku, state, attempts, receipt) in enumerate(marks):
            set_delivery(
                connection,
                messages.c.aggregate == sku,
                state=state,
                attempts=attempts,
                receipt=receipt,
                leased_at=clock.now() + timedelta(seconds=n),
            )
    return DbSentTimes(engine)


def test_the_skus_that_trim_to_an_offer_and_no_others(
    db_url: str, engine: Engine, clock: FakeClock
) -> None:
    """Promise: every SKU equal to the offer once trimmed (spaces at either end) is found,
    whatever characters LIKE or GLOB would read as wildcards; one differing in case, or only
    beginning with the offer, is another offer."""
    holders = given(
        db_url,
        engine,
        clock,
        [
            ("X-1", "delivered", 1, None),
            (" X-1", "delivered", 1, None),
            ("X-1  ", "delivered", 1, None),
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
        "X-1": {"X-1", " X-1", "X-1  "},
        "50%_[*?]\\": {"50%_[*?]\\", "  50%_[*?]\\ "},
    } == {offer: set(skus) for offer, skus in found.items()}


def test_the_skus_whose_article_trims_to_an_offer(
    db_url: str, engine: Engine, clock: FakeClock
) -> None:
    """Promise (``sku_source = article``): the SKUs whose article, trimmed, is the offer."""
    holders = given(
        db_url,
        engine,
        clock,
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
    db_url: str,
    engine: Engine,
    clock: FakeClock,
    marks: list[tuple[str, str, int, str | None]],
    ranked: list[str],
) -> None:
    """Promise (issue 32): the SKU that keeps the offer comes first, the same for every worker
    reading the same rows (two workers that claimed both at once agree)."""
    assert {"S": ranked} == given(db_url, engine, clock, marks).offer_holders(["S"], ("ym-sent:",))
