"""stage(): the one INSERT into staging_intents that every source of the service uses."""

from __future__ import annotations

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.dev.testing import posting_row, price_row
from exchange.intake.stage import stage


def test_stage_inserts_every_row_in_order_whatever_columns_each_gives(engine: Engine) -> None:
    rows = [
        price_row("SKU-1", 1),
        {**price_row("SKU-2", 1), "schema_version": "1"},
        {k: v for k, v in price_row("SKU-3", 1).items() if k != "source_ref"},
        posting_row("DOC-1", 1),
    ]
    with transaction(engine) as connection:
        assert 4 == stage(connection, rows)

    with transaction(engine, read_only=True) as connection:
        staged = connection.execute(
            select(staging.c.aggregate, staging.c.source_ref, staging.c.taken_at).order_by(
                staging.c.id
            )
        ).all()
    expected = [
        ("SKU-1", rows[0]["source_ref"], None),
        ("SKU-2", rows[1]["source_ref"], None),
        ("SKU-3", None, None),
        ("DOC-1", rows[3]["source_ref"], None),
    ]
    assert expected == [tuple(row) for row in staged], "every row, untaken, in order"


def test_stage_writes_nothing_when_its_transaction_rolls_back(engine: Engine) -> None:
    try:
        with transaction(engine) as connection:
            stage(connection, [price_row("SKU-1", 1)])
            raise RuntimeError("the caller failed after staging")
    except RuntimeError:
        pass
    with transaction(engine, read_only=True) as connection:
        assert [] == connection.execute(select(staging.c.id)).all()
