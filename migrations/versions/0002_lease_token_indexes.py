"""lease tokens indexed on aggregates (partial), not on messages

Without an index on aggregates.lease_token every release (one per recorded batch) and every
renewal scanned the whole aggregates table: 0.5 ms per batch at 20,000 aggregates on SQLite,
growing with the table (measured with ``python -m bench.lease_cost``). Partial: only leased
rows are indexed. The index on messages.lease_token served only the renewal, which now finds
the lease's messages through its aggregates, and cost every insert and update of a message an
index entry (claim and record 5-10 % faster on PostgreSQL without it, same benchmark).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEASED = sa.text("lease_token IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch_op:
        batch_op.drop_index("ix_messages_lease_token")
    op.create_index(
        "ix_aggregates_lease_token",
        "aggregates",
        ["lease_token"],
        unique=False,
        sqlite_where=LEASED,
        postgresql_where=LEASED,
    )


def downgrade() -> None:
    op.drop_index("ix_aggregates_lease_token", table_name="aggregates")
    with op.batch_alter_table("messages") as batch_op:
        batch_op.create_index("ix_messages_lease_token", ["lease_token"], unique=False)
