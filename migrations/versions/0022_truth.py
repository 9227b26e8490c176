"""Issue 34 (contract 15): refused sign-ins as a summary a minute per way in, and when a
worker's pause began.

``sign_in_refusals``: ``serve`` aggregates refused sign-ins in memory and writes at most one
row a minute per way in (``door``: ``1c``, ``intake``, ``workbench``) with how many were
refused and the first and the last time, never the name or the address tried; a row with
``count`` 0 marks a successful sign-in (``succeeded_at``), which clears the cause
``sign-in-refused:<door>``. Visible to every process, it survives a restart of ``serve``.

``workers.paused_at``: when the site's refusal paused this worker (``status --json``'s
``pause.since``); ``workers.unreachable_since``: since when the site has not answered at all
(connections refused, timeouts), shown instead of a delivery that "runs" at 0 requests/s;
``workers.pause_cause``: which pause it is (``domain/pause.py``), so that every place says
what to mend and whom to ask in the target's own words.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_refusals",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("door", sa.String(length=16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(), nullable=True),
        sa.Column("last_at", sa.DateTime(), nullable=True),
        sa.Column("succeeded_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sign_in_refusals")),
    )
    # The cause reads the last hour's rows (``ops/sign_ins.refused_lately``, every poll).
    op.create_index(
        op.f("ix_sign_in_refusals_last_at"), "sign_in_refusals", ["last_at"], unique=False
    )
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("paused_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("unreachable_since", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("pause_cause", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("pause_cause")
        batch.drop_column("unreachable_since")
        batch.drop_column("paused_at")
    op.drop_index(op.f("ix_sign_in_refusals_last_at"), table_name="sign_in_refusals")
    op.drop_table("sign_in_refusals")
