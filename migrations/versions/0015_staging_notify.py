"""New staging rows wake the workers (issue 23, item 6): on PostgreSQL, a trigger on
``staging_intents`` that only notifies (``pg_notify('exchange_staging', '')``, once per
statement: COPY of a 1C package is one wake-up, not 100,000). It changes no row (contract 1).
Not put on a staging database of its own (``EXCHANGE_STAGING_URL``): no worker listens there,
they poll it. SQLite has no notification: nothing to do.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    if not context.config.attributes.get("staging_notify", True):
        return
    op.execute(
        """
        CREATE OR REPLACE FUNCTION exchange_staging_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('exchange_staging', '');
            RETURN NULL;
        END
        $$
        """
    )
    op.execute("DROP TRIGGER IF EXISTS staging_intents_notify ON staging_intents")
    op.execute(
        "CREATE TRIGGER staging_intents_notify AFTER INSERT ON staging_intents "
        "FOR EACH STATEMENT EXECUTE FUNCTION exchange_staging_notify()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS staging_intents_notify ON staging_intents")
    op.execute("DROP FUNCTION IF EXISTS exchange_staging_notify()")
