"""price_owners and cml_package_repeats: one (sku, price type), one aggregate; one aggregate per
1C package (contract 15, issue 33 items 10 and 13)

``price_owners``: ``ALIAS-1`` (v1, 50.00) and ``ALIAS-1/retail`` (v1, 100.00) named the same
SKU and price type, and an operator's retry of the first put the older price on the shop. The
first ``price`` aggregate accepted for an (sku, price type) owns it; a row naming the pair under
another aggregate is ``invalid-contract``. Existing pairs go to the aggregate whose earliest
accepted message still stored is the earliest; pairs whose aggregates' messages were all pruned
go to the oldest such aggregate.

``cml_package_repeats``: the aggregates two offers of one package map to, with the later
offer's payload (it wins; an earlier one of another price is ``invalid-contract``). Packages
staged before have none.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL = """
INSERT INTO price_owners (sku, price_type, aggregate)
SELECT sku, price_type, aggregate FROM (
    SELECT sku, price_type, aggregate,
           ROW_NUMBER() OVER (
               PARTITION BY sku, price_type
               ORDER BY CASE WHEN first_message IS NULL THEN 1 ELSE 0 END, first_message, id
           ) AS n
    FROM (
        SELECT a.id, a.sku, a.price_type, a.aggregate,
               (SELECT MIN(m.id) FROM messages m
                WHERE m.aggregate_id = a.id AND NOT m.rejected) AS first_message
        FROM aggregates a
        WHERE a.kind = 'price' AND a.sku IS NOT NULL AND a.price_type IS NOT NULL
    ) firsts
) ranked
WHERE n = 1
"""


def upgrade() -> None:
    op.create_table(
        "price_owners",
        sa.Column("sku", sa.String(length=100), nullable=False),
        sa.Column("price_type", sa.String(length=100), nullable=False),
        sa.Column("aggregate", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("sku", "price_type"),
    )
    op.create_table(
        "cml_package_repeats",
        sa.Column("version", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("aggregate", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("version", "aggregate"),
    )
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_table("cml_package_repeats")
    op.drop_table("price_owners")
