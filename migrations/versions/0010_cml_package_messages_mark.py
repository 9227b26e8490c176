"""A CommerceML package keeps the highest ``messages.id`` its version lookup covered, so that
the next package reads only the messages above it (a primary-key range) instead of scanning
the whole ``messages`` table for the highest price version

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for the packages before: the first package after the upgrade reads the queue whole.
    with op.batch_alter_table("cml_packages") as batch:
        batch.add_column(sa.Column("messages_mark", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cml_packages") as batch:
        batch.drop_column("messages_mark")
