"""The operators' notifications: what they were last told, one row that every worker and serve
process reads, and that only the one which moves its version on may act upon

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("attempted_at", sa.DateTime(), nullable=True),
        sa.Column("quarantine_mark", sa.DateTime(), nullable=True),
        sa.Column("stops", sa.String(length=200), nullable=False),
        sa.Column("sent_by", sa.String(length=200), nullable=True),
        sa.Column("outcome", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_notifications")),
    )


def downgrade() -> None:
    op.drop_table("notifications")
