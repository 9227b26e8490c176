"""Messages kept with no delivery on any channel (issue 32, review 32k finding 1).

``messages.kept_nowhere``: TRUE while an accepted message has no delivery on any channel (its
kind was taken by no channel when intake accepted it), NULL otherwise; intake sets it,
``channels seed`` clears it. ``ix_messages_kept_nowhere`` (``kind``, ``id``), partial on it,
is what ``status``'s ``no-channel:KIND`` causes read: they now count such a message whatever
its kind, also once a channel takes that kind, without reading every message. The upgrade
marks the messages that have no delivery now (one pass over ``messages``, at ``migrate``).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEPT = "kept_nowhere IS NOT NULL"


def upgrade() -> None:
    op.add_column("messages", sa.Column("kept_nowhere", sa.Boolean(), nullable=True))
    op.execute(
        "UPDATE messages SET kept_nowhere = TRUE WHERE NOT rejected "
        "AND aggregate_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.message_pk = messages.id)"
    )
    op.create_index(
        "ix_messages_kept_nowhere",
        "messages",
        ["kind", "id"],
        postgresql_where=sa.text(KEPT),
        sqlite_where=sa.text(KEPT),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_kept_nowhere", table_name="messages")
    # A plain ALTER TABLE … DROP COLUMN (SQLite 3.35+): a batch copy of ``messages`` would
    # rebuild it and lose what earlier downgrades rely on.
    op.drop_column("messages", "kept_nowhere")
