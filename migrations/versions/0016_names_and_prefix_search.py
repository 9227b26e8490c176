"""Search finds what people know (issue 24, item 5): the product's name where the source
gives one (``staging_intents.name`` and ``messages.name``, nullable: contract 1 keeps a
staging table created without it working), and the indexes that let ``find`` read the
beginning of an aggregate, a SKU, a 1C document, a name or a message_id as a range instead of
a scan. PostgreSQL: ``varchar_pattern_ops``, which LIKE 'x%' uses whatever the database's
collation; SQLite: plain indexes, read through the range ``find`` adds beside its LIKE.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PREFIX = (
    ("ix_messages_aggregate_prefix", "messages", "aggregate"),
    ("ix_messages_source_ref_prefix", "messages", "source_ref"),
    ("ix_messages_name_prefix", "messages", "name"),
    ("ix_messages_message_id_prefix", "messages", "message_id"),
    ("ix_aggregates_sku_prefix", "aggregates", "sku"),
)


def upgrade() -> None:
    # A staging table 1C created (and the first migration adopted) may hold the optional
    # column already, as contract 1 lets it.
    staged = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("staging_intents")}
    if "name" not in staged:
        op.add_column("staging_intents", sa.Column("name", sa.String(500), nullable=True))
    op.add_column("messages", sa.Column("name", sa.String(500), nullable=True))
    for index, table, column in PREFIX:
        op.create_index(index, table, [column], postgresql_ops={column: "varchar_pattern_ops"})


def downgrade() -> None:
    for index, table, _ in reversed(PREFIX):
        op.drop_index(index, table_name=table)
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("name")
    with op.batch_alter_table("staging_intents") as batch:
        batch.drop_column("name")
