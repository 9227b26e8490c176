"""targets (contract 10): where a shop keeps each SKU (WooCommerce's product and variation ids),
and the lock that keeps one exchange at a time with a 1C-Bitrix site across workers

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "shop_sku_ids",
        sa.Column("shop", sa.String(length=200), nullable=False),
        sa.Column("sku", sa.String(length=200), nullable=False),
        sa.Column("product_id", sa.BigInteger(), nullable=False),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("shop", "sku", name=op.f("pk_shop_sku_ids")),
    )
    op.create_table(
        "target_locks",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("until", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_target_locks")),
    )


def downgrade() -> None:
    op.drop_table("target_locks")
    op.drop_table("shop_sku_ids")
