"""Workbench sessions kept in the database (issue 21 item 9): signing out ends a session in
every serve process, and a password set again or an operator removed (or removed and added
again) ends every session of that name

Revision ID: 0013_operator_sessions
Revises: 0012
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_operator_sessions"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "operator_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("credential", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_sessions")),
    )


def downgrade() -> None:
    op.drop_table("operator_sessions")
