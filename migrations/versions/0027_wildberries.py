"""Wildberries (issue 32 item 2, contract 14): what the target keeps per channel between
attempts and across restarts.

``wb_nm_ids``: the catalogue's vendor code -> ``nmID`` map, one row per (channel, vendor code),
rebuilt whole from ``/api/v2/list/goods/filter``; ``wb_catalogues``: when each channel's map
was last rebuilt (at most every ``wb_catalogue_refresh``); ``wb_tasks``: the upload task in
flight for each (channel, ``nmID``), written as soon as WB answers the upload, before any poll,
so that a restart polls the task instead of uploading again (docs/design/channels.md).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "wb_nm_ids",
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("vendor_code", sa.String(length=200), nullable=False),
        sa.Column("nm_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("channel", "vendor_code", name=op.f("pk_wb_nm_ids")),
    )
    op.create_table(
        "wb_catalogues",
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("channel", name=op.f("pk_wb_catalogues")),
    )
    op.create_table(
        "wb_tasks",
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("nm_id", sa.BigInteger(), nullable=False),
        sa.Column("upload_id", sa.BigInteger(), nullable=False),
        sa.Column("price", sa.Numeric(precision=18, scale=2), nullable=False),
        sa.Column("message_id", sa.String(length=200), nullable=False),
        sa.Column("uploaded_at", sa.DateTime(), nullable=False),
        sa.Column("goods", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("channel", "nm_id", name=op.f("pk_wb_tasks")),
    )


def downgrade() -> None:
    op.drop_table("wb_tasks")
    op.drop_table("wb_catalogues")
    op.drop_table("wb_nm_ids")
