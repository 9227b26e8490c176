"""Alembic environment. The engine comes from ``exchange.db.migrate`` (never from a URL here)."""

from __future__ import annotations

from alembic import context

from exchange.db.schema import metadata

config = context.config
engine = config.attributes["engine"]

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
