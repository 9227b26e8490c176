"""The workbench's lists by state and its search by a 1C article (issue 34 items 6 and 8).

- Waiting, delayed, in flight, delivered: each a page in the order of since when its messages
  are in their state. One index, (state, updated_at, id), makes a page a walk of its entries
  instead of a sort of every message in the state (the delivered may be millions); the
  quarantine's list in its default order reads it too.
- When SKUs are 1C ids (``EXCHANGE_1C_SKU=id``) people still know a product by its article:
  ``cml_catalog`` keeps each product's (or offer's) article; its ``Ид`` and the article are
  kept case-folded beside them (``key_key``, ``value_key``, as migration 0017 did for SKUs),
  the article's with a prefix index. Existing rows are filled here.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000


def _fold(value: str | None) -> str | None:
    # exchange.domain.search_key, frozen here: a migration means what it meant when written.
    return None if value is None else value.casefold()


def _backfill() -> None:
    """``key_key`` and ``value_key`` of every catalogue row, ``BATCH`` rows at a time."""
    bind = op.get_bind()
    rows = sa.table(
        "cml_catalog",
        sa.column("id"),
        sa.column("key"),
        sa.column("value"),
        sa.column("key_key"),
        sa.column("value_key"),
    )
    change = (
        sa.update(rows)
        .where(rows.c.id == sa.bindparam("row_id"))
        .values(key_key=sa.bindparam("new_key"), value_key=sa.bindparam("new_value"))
    )
    last = 0
    while True:
        batch = bind.execute(
            sa.select(rows.c.id, rows.c.key, rows.c.value)
            .where(rows.c.id > last)
            .order_by(rows.c.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        bind.execute(
            change,
            [
                {"row_id": row_id, "new_key": _fold(key), "new_value": _fold(value)}
                for row_id, key, value in batch
            ],
        )
        last = batch[-1][0]


def upgrade() -> None:
    op.create_index("ix_messages_state_updated_at_id", "messages", ["state", "updated_at", "id"])
    op.add_column("cml_catalog", sa.Column("key_key", sa.String(600), nullable=True))
    op.add_column("cml_catalog", sa.Column("value_key", sa.String(600), nullable=True))
    _backfill()
    op.create_index(
        "ix_cml_catalog_kind_value_key",
        "cml_catalog",
        ["kind", "value_key"],
        postgresql_ops={"value_key": "varchar_pattern_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_cml_catalog_kind_value_key", table_name="cml_catalog")
    with op.batch_alter_table("cml_catalog") as batch:
        batch.drop_column("value_key")
        batch.drop_column("key_key")
    op.drop_index("ix_messages_state_updated_at_id", table_name="messages")
