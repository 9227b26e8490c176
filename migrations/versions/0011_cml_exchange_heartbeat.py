"""A 1C import in flight keeps a heartbeat in its ``cml_exchanges`` entry, so that an entry left
unfinished by a serve process that died is closed as ``interrupted`` by any serve still running
(instead of showing as in progress for ever)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for the entries before: an unfinished one of those is judged by its started_at.
    with op.batch_alter_table("cml_exchanges") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cml_exchanges") as batch:
        batch.drop_column("heartbeat_at")
