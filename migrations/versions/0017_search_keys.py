"""Search by a beginning whatever its case (issue 24 item 5, the fresh review): ``ART-0``,
``art-0`` and ``Art-0`` find the same SKU, aggregate or message_id, Cyrillic included.

Neither database folds every script's case (SQLite's LIKE and ``lower()`` fold only Latin;
PostgreSQL's ``lower()`` folds what the database's locale says), so the folded text is a
column of its own, written beside the original (``str.casefold``, ``exchange.domain.
search_key``): ``messages.message_id_key``, ``messages.aggregate_key``, ``aggregates.sku_key``,
each with a prefix index (``varchar_pattern_ops`` on PostgreSQL, a plain index read as a range
on SQLite). Existing rows are filled here, in batches. The case-sensitive prefix indexes of
migration 0016 on these three columns are no longer read by ``find``: dropped.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000

# (table, key column, its length, the column it folds, its index)
KEYS = (
    ("messages", "message_id_key", 200, "message_id", "ix_messages_message_id_key"),
    ("messages", "aggregate_key", 600, "aggregate", "ix_messages_aggregate_key"),
    ("aggregates", "sku_key", 300, "sku", "ix_aggregates_sku_key"),
)
# The case-sensitive prefix indexes of 0016 the keys replace: (index, table, column).
REPLACED = (
    ("ix_messages_aggregate_prefix", "messages", "aggregate"),
    ("ix_messages_message_id_prefix", "messages", "message_id"),
    ("ix_aggregates_sku_prefix", "aggregates", "sku"),
)


def _fold(value: str | None) -> str | None:
    # exchange.domain.search_key, frozen here: a migration means what it meant when written.
    return None if value is None else value.casefold()


def _backfill(table: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Fill each key column of ``pairs`` (key, source) from its source, ``BATCH`` rows at a
    time in id order (one statement per batch, never the whole table in memory)."""
    bind = op.get_bind()
    rows = sa.table(table, sa.column("id"), *(sa.column(n) for pair in pairs for n in pair))
    change = (
        sa.update(rows)
        .where(rows.c.id == sa.bindparam("row_id"))
        .values({key: sa.bindparam(f"new_{key}") for key, _ in pairs})
    )
    last = 0
    while True:
        batch = bind.execute(
            sa.select(rows.c.id, *(rows.c[source] for _, source in pairs))
            .where(rows.c.id > last)
            .order_by(rows.c.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        bind.execute(
            change,
            [
                {
                    "row_id": row[0],
                    **{f"new_{key}": _fold(v) for (key, _), v in zip(pairs, row[1:], strict=True)},
                }
                for row in batch
            ],
        )
        last = batch[-1][0]


def upgrade() -> None:
    for table, key, length, _, _ in KEYS:
        op.add_column(table, sa.Column(key, sa.String(length), nullable=True))
    _backfill("messages", [("message_id_key", "message_id"), ("aggregate_key", "aggregate")])
    _backfill("aggregates", [("sku_key", "sku")])
    for table, key, _, _, index in KEYS:
        op.create_index(index, table, [key], postgresql_ops={key: "varchar_pattern_ops"})
    for index, table, _ in REPLACED:
        op.drop_index(index, table_name=table)


def downgrade() -> None:
    for index, table, column in REPLACED:
        op.create_index(index, table, [column], postgresql_ops={column: "varchar_pattern_ops"})
    for table, _, _, _, index in reversed(KEYS):
        op.drop_index(index, table_name=table)
    for table in ("aggregates", "messages"):
        with op.batch_alter_table(table) as batch:
            for owner, key, _, _, _ in reversed(KEYS):
                if owner == table:
                    batch.drop_column(key)
