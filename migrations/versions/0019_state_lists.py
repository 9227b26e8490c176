"""The workbench's lists by state (issue 34 item 6): waiting, delayed, in flight, delivered,
each a page in the order of since when its messages are in their state. One index, (state,
updated_at, id), makes a page a walk of its entries instead of a sort of every message in the
state (the delivered may be millions); the quarantine's list in its default order reads it too.

Revision ID: 0019_state_lists
Revises: 0018
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019_state_lists"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_messages_state_updated_at_id", "messages", ["state", "updated_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_messages_state_updated_at_id", table_name="messages")
