"""initial schema: the staging table of the contract and the service's own tables

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from exchange.db.schema import utcnow

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "aggregates",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("aggregate", sa.String(length=200), nullable=False),
        sa.Column("done_version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_aggregates")),
        sa.UniqueConstraint("kind", "aggregate", name=op.f("uq_aggregates_kind_aggregate")),
    )
    # 1C (or a DBA) may have created staging_intents before the first migrate; exchange.db.
    # migrate refuses one that differs from the contract, so a table here is adopted as it is
    # (with its rows), and only the intake index is added when it lacks it.
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("staging_intents"):
        op.create_table(
            "staging_intents",
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                sa.Identity(always=True),
                nullable=False,
            ),
            sa.Column("kind", sa.String(length=64), nullable=False),
            sa.Column("aggregate", sa.String(length=200), nullable=False),
            sa.Column("aggregate_version", sa.BigInteger(), nullable=False),
            sa.Column("payload", sa.Text(), nullable=False),
            sa.Column("schema_version", sa.String(length=32), server_default="1", nullable=False),
            sa.Column("source_ref", sa.String(length=500), nullable=True),
            sa.Column("created_at", sa.DateTime(), server_default=utcnow(), nullable=False),
            sa.Column("taken_at", sa.DateTime(), nullable=True),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_staging_intents")),
            sqlite_autoincrement=True,
        )
        with op.batch_alter_table("staging_intents", schema=None) as batch_op:
            batch_op.create_index(
                "ix_staging_intents_untaken",
                ["id"],
                unique=False,
                sqlite_where=sa.text("taken_at IS NULL"),
                postgresql_where=sa.text("taken_at IS NULL"),
            )
    elif "ix_staging_intents_untaken" not in {
        index["name"] for index in inspector.get_indexes("staging_intents")
    }:
        op.create_index(
            "ix_staging_intents_untaken",
            "staging_intents",
            ["id"],
            unique=False,
            sqlite_where=sa.text("taken_at IS NULL"),
            postgresql_where=sa.text("taken_at IS NULL"),
        )

    op.create_table(
        "workers",
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=False),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("breaker_state", sa.String(length=16), server_default="closed", nullable=False),
        sa.Column("breaker_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_workers")),
    )
    op.create_table(
        "messages",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("message_id", sa.String(length=200), nullable=False),
        sa.Column(
            "aggregate_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("rejected", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("aggregate", sa.String(length=200), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("schema_version", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("source_ref", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("staging_id", sa.BigInteger(), nullable=True),
        sa.Column("taken_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column("superseded_by", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_try_at", sa.DateTime(), nullable=True),
        sa.Column("locked_by", sa.String(length=200), nullable=True),
        sa.Column("locked_until", sa.DateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("receipt", sa.Text(), nullable=True),
        sa.Column("waiting_since", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["aggregate_id"], ["aggregates.id"], name=op.f("fk_messages_aggregate_id_aggregates")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint("message_id", name=op.f("uq_messages_message_id")),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_messages_aggregate_id_version", ["aggregate_id", "version"], unique=False
        )
        batch_op.create_index("ix_messages_lease_token", ["lease_token"], unique=False)
        batch_op.create_index(
            "ix_messages_state_next_try_at", ["state", "next_try_at"], unique=False
        )

    op.create_table(
        "message_history",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "message_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("error_class", sa.String(length=100), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("delay_s", sa.Float(), nullable=True),
        sa.Column("operator", sa.String(length=200), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["message_pk"],
            ["messages.id"],
            name=op.f("fk_message_history_message_pk_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_history")),
    )
    with op.batch_alter_table("message_history", schema=None) as batch_op:
        batch_op.create_index(
            "ix_message_history_message_pk_id", ["message_pk", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("message_history", schema=None) as batch_op:
        batch_op.drop_index("ix_message_history_message_pk_id")

    op.drop_table("message_history")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_state_next_try_at")
        batch_op.drop_index("ix_messages_lease_token")
        batch_op.drop_index("ix_messages_aggregate_id_version")

    op.drop_table("messages")
    op.drop_table("workers")
    with op.batch_alter_table("staging_intents", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_staging_intents_untaken",
            sqlite_where=sa.text("taken_at IS NULL"),
            postgresql_where=sa.text("taken_at IS NULL"),
        )

    op.drop_table("staging_intents")
    op.drop_table("aggregates")
