"""Alembic, driven from code: ``exchange migrate`` and the check that a database is current."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.errors import DatabaseUnavailable


def script_location() -> Path:
    package = Path(__file__).resolve().parent.parent
    installed = package / "_migrations"  # the wheel carries migrations/ here
    if installed.is_dir():
        return installed
    return package.parent / "migrations"


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    with transaction(engine):  # fail early, with the project's message, if unreachable
        pass
    _refuse_unknown_revision(engine)
    command.upgrade(alembic_config(engine), revision)


def _refuse_unknown_revision(engine: Engine) -> None:
    current = current_revision(engine)
    script = ScriptDirectory.from_config(alembic_config(engine))
    if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
        raise DatabaseUnavailable(
            f"the database is at revision {current}, which this release of exchange does not "
            "know: it was migrated by a newer release; run that release"
        )


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with transaction(engine, read_only=True) as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_current(engine: Engine) -> None:
    current, head = current_revision(engine), head_revision(engine)
    if current != head:
        _refuse_unknown_revision(engine)
        state = "not migrated" if current is None else f"at revision {current}, not {head}"
        raise DatabaseUnavailable(f"the database is {state}: run `exchange migrate` first")
