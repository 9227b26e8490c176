"""Channels (issue 31, contract 13): the kinds each registered channel takes, kept with it
(``channels.takes``, a JSON array of kinds), so that intake gives a delivery to every channel
not dropped that takes the kind from the database alone, whatever the configuration of the
process that takes the row in. Registration (``exchange.db.channels.register``: ``migrate``,
``run``, ``serve``, ``check``, ``channels seed``) writes it from the configuration and
updates it when the configuration changes.

The column's default, ``[]``, takes nothing: a row written without it gets no delivery until a
registration says what it takes. The rows already there get the kinds their target takes:
``price`` for the price-only targets (``bitrix``, ``woocommerce``, contract 10), and for the
others the default kinds and every kind an accepted message has; the first
registration after the upgrade (``exchange migrate`` itself) sets the configured ones.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_KINDS = ("financial_posting", "price")
# Contract 10: these targets take price messages only (exchange.settings.targets).
PRICE_ONLY_TARGETS = ("bitrix", "woocommerce")


def upgrade() -> None:
    # NOT NULL with a default: SQLite adds it in place (no copy of a table others refer to).
    with op.batch_alter_table("channels") as batch:
        batch.add_column(sa.Column("takes", sa.Text(), server_default="[]", nullable=False))
    bind = op.get_bind()
    accepted = bind.execute(
        sa.text("SELECT DISTINCT kind FROM messages WHERE NOT rejected ORDER BY kind")
    ).scalars()
    # The default kinds (EXCHANGE_KINDS unset: price and financial_posting, contract 3) and
    # every kind already accepted: a bare upgrade (alembic, a test's database) must not leave
    # the one channel taking prices only, its postings never delivered. A registration with
    # the configuration in force writes the channel's own list over it.
    every = json.dumps(sorted({*accepted, *DEFAULT_KINDS}))
    bind.execute(
        sa.text(
            f"UPDATE channels SET takes = CASE WHEN target IN {PRICE_ONLY_TARGETS!r} "
            "THEN :price ELSE :every END"
        ),
        {"price": json.dumps(["price"]), "every": every},
    )


def downgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.drop_column("takes")
