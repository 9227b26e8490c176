"""aggregates.sku and aggregates.price_type: one aggregate is one price (contract 1)

The first version of a ``price`` aggregate the service accepts fixes its sku and price type;
a later row naming others is quarantined ``invalid-contract`` (issue 12: a store's wholesale
price superseded its retail one). They are kept on the aggregate row, which ``prune`` never
deletes. Existing price aggregates take them from their earliest message still stored; one
whose messages were all pruned takes them from its next accepted row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("aggregates") as batch_op:
        batch_op.add_column(sa.Column("sku", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("price_type", sa.String(length=100), nullable=True))
    postgres = op.get_bind().dialect.name == "postgresql"
    for column in ("sku", "price_type"):
        value = (
            f"CAST(m.payload AS jsonb) ->> '{column}'"
            if postgres
            else f"json_extract(m.payload, '$.{column}')"
        )
        op.execute(
            f"UPDATE aggregates SET {column} = (SELECT {value} FROM messages m "
            "WHERE m.aggregate_id = aggregates.id AND NOT m.rejected ORDER BY m.id LIMIT 1) "
            "WHERE kind = 'price'"
        )


def downgrade() -> None:
    with op.batch_alter_table("aggregates") as batch_op:
        batch_op.drop_column("price_type")
        batch_op.drop_column("sku")
