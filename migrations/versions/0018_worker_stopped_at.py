"""A worker that stops cleanly keeps its row, marked ``workers.stopped_at``, instead of deleting
it (the fresh review: after a SIGTERM the dashboard said no worker had reported for an hour,
10 s after the last one stopped). A stopped row is never live and never counted among the
workers; the dashboard and ``exchange status`` say when the last one stopped.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for every worker still running (and every row before).
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("stopped_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("stopped_at")
