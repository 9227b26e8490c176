"""An attempt that ended without an answer (its lease expired: taken over, or cancelled or
quarantined later) records when its lease ran out, ``message_history.lease_until``: its worker
held the aggregate until then, not until the row's ``at``

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for the rows before, and for every attempt that ended with an answer.
    with op.batch_alter_table("message_history") as batch:
        batch.add_column(sa.Column("lease_until", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("message_history") as batch:
        batch.drop_column("lease_until")
