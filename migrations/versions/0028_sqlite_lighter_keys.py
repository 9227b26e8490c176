"""SQLite: fewer B-tree writes and descents per message (issue 31 item 9,
docs/benchmarks/one-channel.md).

- ``channel_aggregates`` becomes a ``WITHOUT ROWID`` table: its rows are found by their
  composite key ``(aggregate_id, channel_id)`` (the claim's join, the lease, the cursor's
  advance), which in a table with a rowid is a separate index (``sqlite_autoindex_*``)
  searched first and the row then found by its rowid. Without a rowid the table is its key's
  B-tree: one descent, one B-tree written per new aggregate. Its rows are small (a cursor and a
  lease), what ``WITHOUT ROWID`` suits. ``deliveries`` keeps its rowid: the same change there
  cost more than it saved (its rows are wide, every state change rewrites one, and every
  index entry then leads to the row through the composite key), measured in the page above.
- ``ix_messages_state_updated_at_id`` holds only the rows with a state
  (``WHERE state IS NOT NULL``): since 0026 only a rejected record has one, an accepted
  message's state is its deliveries'; the lists of records by state (``state = ?``) still
  walk it, and intake no longer writes an entry for every message it takes.

Every row is kept: ``channel_aggregates`` is copied whole into its new form (same columns,
types, defaults, keys and index), the old table dropped (nothing refers to it) and the new one
renamed. PostgreSQL is untouched. The downgrade puts both back as they were.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEASED = "lease_token IS NOT NULL"
RECORDS = "state IS NOT NULL"
# As 0024 typed them (``db/schema.py``): on SQLite a key referring to an id is INTEGER.
SmallId = sa.SmallInteger().with_variant(sa.Integer(), "sqlite")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COPY = "channel_aggregates_0028"


def _channel_aggregates(*, rowid: bool) -> None:
    """``channel_aggregates`` copied whole, in key order, into a table with or without a
    rowid, which then takes its place and its index."""
    new = op.create_table(
        COPY,
        sa.Column("aggregate_id", BigId, nullable=False),
        sa.Column("channel_id", SmallId, nullable=False),
        sa.Column("done_version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("first_version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["aggregate_id"],
            ["aggregates.id"],
            name="fk_channel_aggregates_aggregate_id_aggregates",
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name="fk_channel_aggregates_channel_id_channels"
        ),
        sa.PrimaryKeyConstraint("aggregate_id", "channel_id", name="pk_channel_aggregates"),
        sqlite_with_rowid=rowid,
    )
    columns = ", ".join(column.name for column in new.columns)
    op.execute(
        f"INSERT INTO {COPY} ({columns}) SELECT {columns} FROM channel_aggregates "
        "ORDER BY aggregate_id, channel_id"
    )
    op.execute("DROP TABLE channel_aggregates")  # its index goes with it
    op.execute(f"ALTER TABLE {COPY} RENAME TO channel_aggregates")
    op.create_index(
        "ix_channel_aggregates_lease_token",
        "channel_aggregates",
        ["lease_token"],
        sqlite_where=sa.text(LEASED),
    )


def _records_index(where: str | None) -> None:
    op.drop_index("ix_messages_state_updated_at_id", table_name="messages")
    op.create_index(
        "ix_messages_state_updated_at_id",
        "messages",
        ["state", "updated_at", "id"],
        sqlite_where=sa.text(where) if where else None,
    )


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _channel_aggregates(rowid=False)
    _records_index(RECORDS)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _records_index(None)
    _channel_aggregates(rowid=True)
