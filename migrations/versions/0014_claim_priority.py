"""The claim order (issue 23): ``messages.claim_rank``, each message's place in it, and a
partial index of the messages that may still be claimed, in that order. The messages waiting
when this runs keep the order they had (their id); see exchange/domain/urgency.py

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013_operator_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIMABLE = "state IN ('new', 'delayed', 'in_progress')"


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(
            sa.Column("claim_rank", sa.BigInteger(), server_default="0", nullable=False)
        )
    # Only what is still waiting needs a place; the rest is never claimed again but by an
    # operator's retry, which then goes first (rank 0), as it should.
    op.execute(f"UPDATE messages SET claim_rank = id WHERE {CLAIMABLE}")
    op.create_index(
        "ix_messages_claim_rank",
        "messages",
        ["claim_rank", "id"],
        sqlite_where=sa.text(CLAIMABLE),
        postgresql_where=sa.text(CLAIMABLE),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_claim_rank", table_name="messages")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("claim_rank")
