"""Each worker tells whether its broker source consumes (contract 15, issue 33 items 2-3):
``workers.source``, a JSON object ({consuming, cause, since, warning}) written with the
heartbeat, read by ``exchange status`` (``sources[]``, the cause ``source``). NULL for a worker
with no broker source, and for every row before.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("source")
