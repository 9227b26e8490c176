"""Attack on the 1C exchange (contract 9a, versions): a package's ``ДатаФормирования`` and the
1C exchange that brought it, kept with the package (``cml_packages.formed_at``, ``.exchange``),
so that a package formed before one another exchange already staged is refused instead of
overwriting it.

``formed_at``: the root's ``ДатаФормирования`` as 1C wrote it (its local time, no zone),
normalised to ``YYYY-MM-DDTHH:MM:SS`` so that text order is time order; NULL for packages
without one (they are staged as before) and for those staged before this revision.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("cml_packages") as batch:
        batch.add_column(sa.Column("formed_at", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("exchange", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cml_packages") as batch:
        batch.drop_column("exchange")
        batch.drop_column("formed_at")
