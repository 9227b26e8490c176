"""exchange serve: the 1C exchange's tables (exchanges received, packages staged, what catalogue
files said) and the key kept for signing cookies

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "http_keys",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_http_keys")),
    )
    op.create_table(
        "cml_exchanges",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("exchange", sa.String(length=64), nullable=False),
        sa.Column("filename", sa.String(length=500), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("intents", sa.Integer(), server_default="0", nullable=False),
        sa.Column("not_sent", sa.Integer(), server_default="0", nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cml_exchanges")),
    )
    op.create_index("ix_cml_exchanges_finished_at", "cml_exchanges", ["finished_at"], unique=False)
    op.create_table(
        "cml_packages",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("source_ref", sa.String(length=500), nullable=False),
        sa.Column("intents", sa.Integer(), nullable=False),
        sa.Column("staged_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cml_packages")),
        sa.UniqueConstraint("digest", name=op.f("uq_cml_packages_digest")),
    )
    op.create_table(
        "cml_catalog",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=True),
        sa.Column("value", sa.String(length=200), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cml_catalog")),
        sa.UniqueConstraint("kind", "key", name=op.f("uq_cml_catalog_kind_key")),
    )


def downgrade() -> None:
    op.drop_table("cml_catalog")
    op.drop_table("cml_packages")
    op.drop_index("ix_cml_exchanges_finished_at", table_name="cml_exchanges")
    op.drop_table("cml_exchanges")
    op.drop_table("http_keys")
