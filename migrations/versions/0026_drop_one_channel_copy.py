"""Channels, the last schema step (issue 31, step 4): the one channel's copy of its deliveries
and cursors leaves ``messages`` and ``aggregates``. Since 0024 every delivery column of a
message lives in ``deliveries`` and every cursor and lease in ``channel_aggregates``, and the
code no longer reads or writes the copies, so they go with their indexes:

- ``messages``: ``superseded_by``, ``attempts``, ``next_try_at``, ``locked_by``,
  ``locked_until``, ``leased_at``, ``lease_token``, ``last_status``, ``receipt``,
  ``claim_rank``, ``waiting_since``; the indexes ``ix_messages_claim_rank`` and
  ``ix_messages_state_next_try_at``. ``state``, ``reason``, ``last_error`` and ``updated_at``
  stay: a rejected record's own (no channel receives it). ``state`` becomes nullable, and an
  accepted message's ``state``, ``reason`` and ``last_error`` become NULL (its state is its
  deliveries').
- ``aggregates``: ``done_version``, ``lease_token``, ``lease_owner``, ``lease_until`` and
  ``ix_aggregates_lease_token``.

Nothing else changes: no delivery, cursor, history row or ``message_id`` is touched.

On SQLite the columns are dropped in place (``ALTER TABLE … DROP COLUMN``, SQLite 3.35), not by
a batch operation's copy of the table: ``messages`` and ``aggregates`` are referred to by
other tables, and dropping a table referred to with ``ON DELETE CASCADE`` while the service's
connections enforce foreign keys deletes the rows referring to it (every delivery and history
row). ``state`` is made nullable the same way: renamed, a nullable ``state`` added, the
records' states copied into it, the old one dropped.

The downgrade puts the columns and indexes back and fills them from the default channel's
deliveries and cursors (the first registered channel not dropped, else the first registered;
a message without a delivery there from its first delivery): what the one-target service
would hold. On SQLite the columns that were NOT NULL come back NOT NULL with a constant
default, and ``state`` stays nullable (SQLite cannot change a column's NOT NULL in place).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIMABLE = "state IN ('new', 'delayed', 'in_progress')"
LEASED = "lease_token IS NOT NULL"
# The copies dropped from ``messages``, as 0025 typed them: (name, type, NOT NULL default).
MESSAGE_COLUMNS: tuple[tuple[str, sa.types.TypeEngine, str | None], ...] = (
    ("superseded_by", sa.String(200), None),
    ("attempts", sa.Integer(), "0"),
    ("next_try_at", sa.DateTime(), None),
    ("locked_by", sa.String(200), None),
    ("locked_until", sa.DateTime(), None),
    ("leased_at", sa.DateTime(), None),
    ("lease_token", sa.String(64), None),
    ("last_status", sa.Integer(), None),
    ("receipt", sa.Text(), None),
    ("claim_rank", sa.BigInteger(), "0"),
    ("waiting_since", sa.DateTime(), "'1970-01-01 00:00:00.000000'"),
)
# The record's own columns, kept; an accepted message's become NULL.
RECORD_COLUMNS = ("state", "reason", "last_error")
AGGREGATE_COLUMNS: tuple[tuple[str, sa.types.TypeEngine, str | None], ...] = (
    ("done_version", sa.BigInteger(), "0"),
    ("lease_token", sa.String(64), None),
    ("lease_owner", sa.String(200), None),
    ("lease_until", sa.DateTime(), None),
)
# The default channel: the first registered not dropped, else the first registered.
DEFAULT_CHANNEL = (
    "(SELECT id FROM channels ORDER BY CASE WHEN dropped_at IS NULL THEN 0 ELSE 1 END, id LIMIT 1)"
)


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    op.drop_index("ix_messages_claim_rank", table_name="messages")
    op.drop_index("ix_messages_state_next_try_at", table_name="messages")
    op.drop_index("ix_aggregates_lease_token", table_name="aggregates")
    for name, _, _ in MESSAGE_COLUMNS:
        op.execute(f"ALTER TABLE messages DROP COLUMN {name}")
    for name, _, _ in AGGREGATE_COLUMNS:
        op.execute(f"ALTER TABLE aggregates DROP COLUMN {name}")
    if _sqlite():
        op.drop_index("ix_messages_state_updated_at_id", table_name="messages")
        op.execute("ALTER TABLE messages RENAME COLUMN state TO state_0025")
        op.execute("ALTER TABLE messages ADD COLUMN state VARCHAR(16)")
        op.execute("UPDATE messages SET state = state_0025 WHERE rejected")
        op.execute("ALTER TABLE messages DROP COLUMN state_0025")
        op.create_index(
            "ix_messages_state_updated_at_id", "messages", ["state", "updated_at", "id"]
        )
    else:
        op.alter_column("messages", "state", existing_type=sa.String(16), nullable=True)
        op.execute("UPDATE messages SET state = NULL WHERE NOT rejected")
    op.execute("UPDATE messages SET reason = NULL, last_error = NULL WHERE NOT rejected")


def _add(table: str, columns: tuple[tuple[str, sa.types.TypeEngine, str | None], ...]) -> None:
    for name, kind, default in columns:
        if default is None:
            op.add_column(table, sa.Column(name, kind, nullable=True))
        elif _sqlite():
            op.add_column(
                table, sa.Column(name, kind, server_default=sa.text(default), nullable=False)
            )
        else:  # filled below, then NOT NULL
            op.add_column(table, sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    _add("messages", MESSAGE_COLUMNS)
    _add("aggregates", AGGREGATE_COLUMNS)
    # Each accepted message from its delivery on the default channel (else its first one).
    chosen = (
        "(SELECT d.{column} FROM deliveries d WHERE d.message_pk = messages.id "
        f"ORDER BY CASE WHEN d.channel_id = {DEFAULT_CHANNEL} THEN 0 ELSE 1 END, d.channel_id "
        "LIMIT 1)"
    )
    copied = [name for name, _, _ in MESSAGE_COLUMNS] + list(RECORD_COLUMNS)
    filled = ", ".join(f"{name} = {chosen.format(column=name)}" for name in copied)
    op.execute(f"UPDATE messages SET {filled} WHERE NOT rejected")
    # What a message without any delivery still needs (a kind no channel took).
    op.execute("UPDATE messages SET state = 'cancelled' WHERE NOT rejected AND state IS NULL")
    op.execute("UPDATE messages SET attempts = 0 WHERE attempts IS NULL")
    op.execute("UPDATE messages SET claim_rank = 0 WHERE claim_rank IS NULL")
    # A rejected record's gap clock started when intake took it, as intake wrote it then.
    op.execute("UPDATE messages SET waiting_since = taken_at WHERE rejected")
    op.execute("UPDATE messages SET waiting_since = taken_at WHERE waiting_since IS NULL")
    cursor = (
        "(SELECT c.{column} FROM channel_aggregates c WHERE c.aggregate_id = aggregates.id "
        f"AND c.channel_id = {DEFAULT_CHANNEL})"
    )
    op.execute(
        "UPDATE aggregates SET "
        + ", ".join(f"{name} = {cursor.format(column=name)}" for name, _, _ in AGGREGATE_COLUMNS)
    )
    op.execute("UPDATE aggregates SET done_version = 0 WHERE done_version IS NULL")
    if not _sqlite():
        for name, kind, default in (*MESSAGE_COLUMNS, ("state", sa.String(16), "")):
            if default is not None:
                op.alter_column("messages", name, existing_type=kind, nullable=False)
        op.alter_column(
            "aggregates",
            "done_version",
            existing_type=sa.BigInteger(),
            nullable=False,
            server_default="0",
        )
        op.alter_column("messages", "attempts", existing_type=sa.Integer(), server_default="0")
        op.alter_column("messages", "claim_rank", existing_type=sa.BigInteger(), server_default="0")
    op.create_index("ix_messages_state_next_try_at", "messages", ["state", "next_try_at"])
    op.create_index(
        "ix_messages_claim_rank",
        "messages",
        ["claim_rank", "id"],
        sqlite_where=sa.text(CLAIMABLE),
        postgresql_where=sa.text(CLAIMABLE),
    )
    op.create_index(
        "ix_aggregates_lease_token",
        "aggregates",
        ["lease_token"],
        sqlite_where=sa.text(LEASED),
        postgresql_where=sa.text(LEASED),
    )
