"""The operators' workbench: operators who sign in (a password hash and a role) and the pause
of delivery an operator sets, which every worker reads each cycle

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "operators",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_operators")),
    )
    op.create_table(
        "delivery_pause",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("operator", sa.String(length=100), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("paused_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_delivery_pause")),
    )


def downgrade() -> None:
    op.drop_table("delivery_pause")
    op.drop_table("operators")
