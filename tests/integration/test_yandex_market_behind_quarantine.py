"""Review ym34 finding 1 (contract 13, 14): a price Yandex Market shows already, refused as a
repeat ("Price is already set", the simulator's ``repeat_price=refuse``, research §3.5 open),
while Yandex's price quarantine still lists an earlier price of the offer (§3.4), is never
delivered on the read-back alone: 1000 live, 300 withheld, 1000 again. Delivered, it
superseded the withheld 300 and ``status`` said nothing needed a person, while Yandex kept 300
listed and a seller's confirmation in the cabinet would have put it live over 1C's 1000. Now
1000 waits, uncharged, the withheld 300 stays withheld and is said not to be confirmed; once a
correct price releases the quarantine, 1000 is delivered and 300 superseded. A worker against
the simulator on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine
from ym_repeat_behind import a_repeat_behind_withheld, deliverer, refusing_repeats, states

from exchange.dev.ymsim import YmSimulator


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    with refusing_repeats() as simulator:
        yield simulator


def test_a_price_shown_already_while_yandex_lists_an_older_one_waits_and_the_older_stays_withheld(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    deliver = deliverer(db_url, engine, ym, tmp_path, ym_apply_timeout="3")
    # Delayed, or handed back uncharged (``new``) where a loaded run's time ran out mid-look.
    a_repeat_behind_withheld(engine, ym, deliver, first=10, repeat=3, waiting={"delayed", "new"})

    ym.price_in_cabinet("Y1", Decimal(1000))  # the seller sets the correct price: released
    deliver([], 5)
    found = states(engine)
    assert ("delivered", None) == found[3][:2]
    assert ("cancelled", "superseded") == found[2][:2]
    assert Decimal(1000) == ym.live("Y1").value  # type: ignore[union-attr]
    assert "Y1" not in ym.quarantined()


def test_a_wait_behind_yandexs_quarantine_writes_its_words_once_not_a_row_per_look(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Promise (review rev36a: a price waiting behind a price Yandex's quarantine holds wrote a
    history row at every look, a minute apart by default: ~1,440 a day per offer while the
    seller leaves the quarantine as advised): the looks go on (the wait is not over until
    Yandex lets 300 go), but the same wait in the same words is written once; the biography
    keeps its first row. Here a look a second (its least) for 5 s: several looks, one row."""
    from sqlalchemy import func, select

    from exchange.db.engine import transaction
    from exchange.db.schema import history, messages

    deliver = deliverer(db_url, engine, ym, tmp_path, ym_apply_timeout="3")
    looks_before = ym.requests["price-quarantine"]
    # Delayed until the next look; or, where the run's time ran out while a look was out (a
    # loaded run), handed back uncharged (``new``): waiting either way, never delivered.
    a_repeat_behind_withheld(engine, ym, deliver, first=10, repeat=5, waiting={"delayed", "new"})
    looks = ym.requests["price-quarantine"] - looks_before
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(history.c.detail, func.count())
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.version == 3, history.c.event == "awaiting-outcome")
            .group_by(history.c.detail)
        ).all()
    assert looks >= 4, f"the wait kept looking ({looks} quarantine reads)"
    assert [1] * len(rows) == [n for _, n in rows], rows
    assert 1 <= len(rows) <= 2, rows  # its words (and the read-back's once, at most)
