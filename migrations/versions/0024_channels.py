"""Channels (issue 31, contract 13), the schema: a message's delivery becomes a row per
channel. ``channels`` registers each channel ever configured; ``deliveries`` holds a message's
delivery columns per channel (primary key ``(message_pk, channel_id)``, with copies of its
``aggregate_id``, ``kind`` and ``version``); ``channel_aggregates`` an aggregate's cursor and
lease per channel. ``message_history.channel_id`` names the channel of a delivery's event (NULL
for intake's own); ``workers.channel`` the channel of a delivery loop's row; and
``delivery_pause.name`` widens for ``delivery:<channel>``.

An installation upgraded here keeps everything as the deliveries of one channel, named after
the ``EXCHANGE_TARGET`` in force at ``exchange migrate`` (``exchange.db.migrate`` puts it in
``config.attributes["channel"]``; ``api`` for a bare ``alembic upgrade``): every state, lease
(same token), attempt and rank of each message but a rejected record (which no channel ever
receives), each aggregate's cursor and lease, and the channel on every history row of a
delivery. A fresh database gets the channel too, with nothing to copy. The old columns on
``messages`` and ``aggregates`` stay, written as well, until the readers move (a later
revision drops them).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import context, op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIMABLE = "state IN ('new', 'delayed', 'in_progress')"
LEASED = "lease_token IS NOT NULL"
DELIVERY = (
    "state",
    "reason",
    "superseded_by",
    "attempts",
    "next_try_at",
    "locked_by",
    "locked_until",
    "leased_at",
    "lease_token",
    "last_status",
    "last_error",
    "receipt",
    "claim_rank",
    "waiting_since",
    "updated_at",
)
INTAKE_EVENTS = "('taken', 'duplicate', 'rejected')"
# As the models type them (``db/schema.py``): a key referring to an id has its type.
SmallId = sa.SmallInteger().with_variant(sa.Integer(), "sqlite")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "channels",
        sa.Column("id", SmallId, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=32), nullable=False),
        sa.Column("added_at", sa.DateTime(), nullable=False),
        sa.Column("dropped_at", sa.DateTime(), nullable=True),
        sa.Column("seed_mark", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_channels")),
    )
    op.create_index(
        "ix_channels_name",
        "channels",
        ["name"],
        unique=True,
        sqlite_where=sa.text("dropped_at IS NULL"),
        postgresql_where=sa.text("dropped_at IS NULL"),
    )
    op.create_table(
        "deliveries",
        sa.Column("message_pk", BigId, nullable=False),
        sa.Column("channel_id", SmallId, nullable=False),
        sa.Column("aggregate_id", BigId, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column("superseded_by", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_try_at", sa.DateTime(), nullable=True),
        sa.Column("locked_by", sa.String(length=200), nullable=True),
        sa.Column("locked_until", sa.DateTime(), nullable=True),
        sa.Column("leased_at", sa.DateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("receipt", sa.Text(), nullable=True),
        sa.Column("claim_rank", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("waiting_since", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["aggregate_id"], ["aggregates.id"], name=op.f("fk_deliveries_aggregate_id_aggregates")
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name=op.f("fk_deliveries_channel_id_channels")
        ),
        sa.ForeignKeyConstraint(
            ["message_pk"],
            ["messages.id"],
            name=op.f("fk_deliveries_message_pk_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_pk", "channel_id", name=op.f("pk_deliveries")),
    )
    op.create_table(
        "channel_aggregates",
        sa.Column("aggregate_id", BigId, nullable=False),
        sa.Column("channel_id", SmallId, nullable=False),
        sa.Column("done_version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("first_version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("lease_token", sa.String(length=64), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["aggregate_id"],
            ["aggregates.id"],
            name=op.f("fk_channel_aggregates_aggregate_id_aggregates"),
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name=op.f("fk_channel_aggregates_channel_id_channels")
        ),
        sa.PrimaryKeyConstraint("aggregate_id", "channel_id", name=op.f("pk_channel_aggregates")),
    )
    with op.batch_alter_table("message_history") as batch:
        batch.add_column(sa.Column("channel_id", sa.SmallInteger(), nullable=True))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("channel", sa.String(length=32), nullable=True))
    with op.batch_alter_table("delivery_pause") as batch:
        batch.alter_column(
            "name",
            existing_type=sa.String(length=32),
            type_=sa.String(length=64),
            existing_nullable=False,
        )

    # The one channel, and everything the one-target service delivered becomes its.
    name = str(context.config.attributes.get("channel") or "api")
    target = str(context.config.attributes.get("channel_target") or name)
    bind = op.get_bind()
    channel = bind.execute(
        sa.text(
            "INSERT INTO channels (name, target, added_at) VALUES (:name, :target, :now) "
            "RETURNING id"
        ),
        {"name": name, "target": target, "now": datetime.now(UTC).replace(tzinfo=None)},
    ).scalar_one()
    columns = ", ".join(DELIVERY)
    bind.execute(
        sa.text(
            f"INSERT INTO deliveries (message_pk, channel_id, aggregate_id, kind, version, "
            f"{columns}) SELECT id, :channel, aggregate_id, kind, version, {columns} "
            "FROM messages WHERE NOT rejected ORDER BY id"
        ),
        {"channel": channel},
    )
    bind.execute(
        sa.text(
            "INSERT INTO channel_aggregates (aggregate_id, channel_id, done_version, "
            "first_version, lease_token, lease_owner, lease_until) SELECT id, :channel, "
            "done_version, 1, lease_token, lease_owner, lease_until FROM aggregates ORDER BY id"
        ),
        {"channel": channel},
    )
    # Intake's own events, and a rejected record's (it has no delivery), name no channel.
    bind.execute(
        sa.text(
            f"UPDATE message_history SET channel_id = :channel WHERE event NOT IN {INTAKE_EVENTS} "
            "AND message_pk IN (SELECT id FROM messages WHERE NOT rejected)"
        ),
        {"channel": channel},
    )

    # The indexes after the copies: cheaper than keeping them row by row.
    op.create_index(
        "ix_deliveries_claim_rank",
        "deliveries",
        ["channel_id", "claim_rank", "message_pk"],
        sqlite_where=sa.text(CLAIMABLE),
        postgresql_where=sa.text(CLAIMABLE),
    )
    op.create_index(
        "ix_deliveries_channel_id_state_next_try_at",
        "deliveries",
        ["channel_id", "state", "next_try_at"],
    )
    op.create_index(
        "ix_deliveries_channel_id_state_updated_at_message_pk",
        "deliveries",
        ["channel_id", "state", "updated_at", "message_pk"],
    )
    op.create_index(
        "ix_deliveries_aggregate_id_channel_id_version",
        "deliveries",
        ["aggregate_id", "channel_id", "version"],
    )
    op.create_index(
        "ix_deliveries_lease_token",
        "deliveries",
        ["lease_token"],
        sqlite_where=sa.text(LEASED),
        postgresql_where=sa.text(LEASED),
    )
    op.create_index(
        "ix_channel_aggregates_lease_token",
        "channel_aggregates",
        ["lease_token"],
        sqlite_where=sa.text(LEASED),
        postgresql_where=sa.text(LEASED),
    )


def downgrade() -> None:
    with op.batch_alter_table("delivery_pause") as batch:
        batch.alter_column(
            "name",
            existing_type=sa.String(length=64),
            type_=sa.String(length=32),
            existing_nullable=False,
        )
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("channel")
    with op.batch_alter_table("message_history") as batch:
        batch.drop_column("channel_id")
    op.drop_table("channel_aggregates")  # its indexes go with it
    op.drop_table("deliveries")
    op.drop_table("channels")
