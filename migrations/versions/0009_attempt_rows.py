"""One history row per attempt: the lease's start on the message (messages.leased_at) and on
the attempt's row (message_history.leased_at), so that taking a lease writes no history row

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch_op:
        batch_op.add_column(sa.Column("leased_at", sa.DateTime(), nullable=True))
    with op.batch_alter_table("message_history") as batch_op:
        batch_op.add_column(sa.Column("leased_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("message_history") as batch_op:
        batch_op.drop_column("leased_at")
    with op.batch_alter_table("messages") as batch_op:
        batch_op.drop_column("leased_at")
