"""Where the service keeps its data: its database, and the staging table's when apart."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from exchange.settings.rules import SUPPORTED_DIALECTS


class DatabaseSettings(BaseModel):
    """EXCHANGE_DATABASE_URL and EXCHANGE_STAGING_URL."""

    database_url: str = Field(
        "sqlite:///exchange.db",
        description="SQLAlchemy URL of the service's database (postgresql+psycopg://… for "
        "PostgreSQL).",
    )
    staging_url: str | None = Field(
        None,
        description="URL of the database that holds staging_intents, when it is not the "
        "service's own database.",
    )

    @field_validator("database_url", "staging_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError("not a database URL (e.g. sqlite:///exchange.db)") from None
        if url.get_backend_name() not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql"
            )
        return value
