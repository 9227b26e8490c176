"""``DbSentTimes.offer_holders`` (the marketplaces' ``OfferHolders`` port), on SQLite and
PostgreSQL: the SKUs a channel gave each offer, found through the case-folded keys' indexes
(issue 32: never a scan of every price SKU), the trim deciding; and their order, the one that
keeps the offer first."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from follow import set_delivery
from onegood import articles
from optools import take
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.db.sent_times import DbSentTimes
from exchange.db.wb_store import DbWbStore
from exchange.dev.testing import fast_settings, price_row
from exchange.domain.clock import FakeClock
from exchange.domain.upload_tasks import Task


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


def receipt_of(engine: Engine, sku: str) -> str | None:
    with transaction(engine, read_only=True) as connection:
        return connection.execute(
            select(deliveries.c.receipt)
            .select_from(deliveries.join(messages, messages.c.id == deliveries.c.message_pk))
            .where(messages.c.aggregate == sku)
        ).scalar_one()


def message_of(engine: Engine, sku: str) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.aggregate == sku)
            ).scalar_one()
        )


@pytest.mark.parametrize(
    ("marks", "refused"),
    [
        # The other SKU's send marked (or delivered) first: this one is not marked.
        ([("S ", "in_progress", 1, None), (" S", "in_progress", 1, "ym-sent:1")], " S"),
        ([("S ", "in_progress", 1, None), (" S", "delivered", 1, None)], " S"),
        # Both only claimed: each goes as the ranking it read said (the later one to mark
        # finds the other's mark).
        ([("S ", "in_progress", 1, None), (" S", "in_progress", 1, None)], None),
        # Its own send went first, earlier than the other's: it keeps the offer.
        ([("S ", "in_progress", 1, "ym-sent:1"), (" S", "delivered", 1, None)], None),
    ],
)
def test_a_send_is_marked_only_when_no_other_sku_of_its_offer_was_sent(
    db_url: str,
    engine: Engine,
    clock: FakeClock,
    marks: list[tuple[str, str, int, str | None]],
    refused: str | None,
) -> None:
    """Promise (issue 32): the mark of a send is written one offer at a time across workers,
    and never for a SKU whose offer another SKU was already sent to (that SKU is named)."""
    holders = given(db_url, engine, clock, marks)
    mine = message_of(engine, "S ")
    before = receipt_of(engine, "S ")

    found = holders.sending_first({mine: "ym-sent:2"}, {mine: ("S", "S ")}, ("ym-sent:",))

    assert ({mine: refused} if refused else {}) == found
    assert (before if refused else "ym-sent:2") == receipt_of(engine, "S ")


def test_a_wildberries_task_row_is_written_only_when_no_other_sku_holds_the_good(
    db_url: str, engine: Engine, clock: FakeClock
) -> None:
    """Promise (issue 32): the row of a Wildberries upload is written one good at a time
    across workers, and never for a SKU whose good another SKU's task row holds."""
    given(
        db_url,
        engine,
        clock,
        [("P-1", "in_progress", 1, None), ("P-2", "in_progress", 1, None)],
    )
    articles(engine, {"P-1": "ART", "P-2": "ART"})
    store = DbWbStore(engine, "wildberries", None)
    at = clock.now()
    theirs = Task(7, 0, Decimal(950), message_of(engine, "P-2"), at, 1)
    mine = Task(7, 0, Decimal(900), message_of(engine, "P-1"), at, 1)

    assert ({}, set()) == store.put_first([theirs], {7: ("ART", "P-2")}, ("wb-task:",))
    assert ({7: "P-2"}, set()) == store.put_first([mine], {7: ("ART", "P-1")}, ("wb-task:",))
    assert theirs.message_id == store.tasks([7])[7].message_id
