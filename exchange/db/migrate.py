"""Alembic, driven from code: ``exchange migrate`` and the check that a database is current.

Alembic is imported where it is used: the check every command makes finds a current database
without it (the migration files' own lines name the head), so a command that reads the
database does not pay for importing Alembic.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, inspect

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    channels,
    cml_packages,
    messages,
    staging,
)
from exchange.domain.identity import PACKAGE_VERSIONS_FROM
from exchange.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

STAGING_TABLE = "staging_intents"
# Columns contract 1 makes optional: a table 1C created without them is adopted, and the
# migration that brought each adds it (0016: the product's ``name``).
OPTIONAL_STAGING_COLUMNS = frozenset({"name"})


def script_location() -> Path:
    package = Path(__file__).resolve().parent.parent
    installed = package / "_migrations"  # the wheel carries migrations/ here
    if installed.is_dir():
        return installed
    return package.parent / "migrations"


# The channel an upgraded one-target installation's deliveries become (migration 0024) when
# no target is given: the default EXCHANGE_TARGET, as for a bare ``alembic upgrade``.
DEFAULT_CHANNEL = "api"


def alembic_config(
    engine: Engine,
    *,
    staging_notify: bool = True,
    channel: str = DEFAULT_CHANNEL,
    target: str | None = None,
) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["engine"] = engine
    config.attributes["staging_notify"] = staging_notify  # migration 0015
    config.attributes["channel"] = channel  # migration 0024
    config.attributes["channel_target"] = target or channel  # migration 0024
    return config


def upgrade(
    engine: Engine,
    revision: str = "head",
    *,
    staging_notify: bool = True,
    channel: str = DEFAULT_CHANNEL,
    target: str | None = None,
) -> None:
    """``staging_notify=False``: a staging database of its own (EXCHANGE_STAGING_URL), where
    no worker listens, gets no notifying trigger (exchange/db/wake.py). ``channel``: the
    name of the one channel an upgrade to 0024 registers and gives every existing message's
    delivery to, the ``EXCHANGE_TARGET`` in force (contract 13, "Upgrading"), or the first
    channel of ``EXCHANGE_CHANNELS``; ``target``: its target (the name when not given)."""
    with transaction(engine):  # fail early, with the project's message, if unreachable
        pass
    _refuse_unknown_revision(engine)
    _refuse_an_incompatible_staging_table(engine)
    from alembic import command

    command.upgrade(
        alembic_config(engine, staging_notify=staging_notify, channel=channel, target=target),
        revision,
    )


def _refuse_an_incompatible_staging_table(engine: Engine) -> None:
    """1C (or a DBA) may have created ``staging_intents`` before the first migrate: the first
    migration adopts a table that matches contract 1 and creates the service's own tables
    around it; one that does not match is refused in one line saying what differs."""
    if current_revision(engine) is not None:
        return  # migrated before: the table is the service's own (``check`` compares it)
    with transaction(engine, read_only=True) as connection:
        differences = staging_differences(connection)
    if differences:
        raise DatabaseUnavailable(
            f"{STAGING_TABLE} already exists and differs from the contract: "
            f"{'; '.join(differences)}. Alter it to the contract's columns (docs/staging.md, "
            "'The staging table') or drop it, then run `exchange migrate` again"
        )


def staging_differences(connection: Connection) -> list[str] | None:
    """How the database's ``staging_intents`` differs from contract 1 (the model in
    db/schema.py): missing columns, types and lengths, NULL/NOT NULL, the defaults 1C relies
    on, a database-generated id. Empty when it matches; None when there is no such table."""
    inspector = inspect(connection)
    if not inspector.has_table(STAGING_TABLE):
        return None
    postgres = is_postgres(connection)
    found = {column["name"]: column for column in inspector.get_columns(STAGING_TABLE)}
    problems: list[str] = []
    for expected in staging.columns:
        column = found.get(expected.name)
        if column is None:
            if expected.name not in OPTIONAL_STAGING_COLUMNS:
                problems.append(f"column {expected.name} is missing")
            continue
        want = _type_name(expected.type, postgres)
        have = _type_name(column["type"], postgres)
        if expected.name == "id" and not postgres:  # only INTEGER PRIMARY KEY is the rowid
            have = str(column["type"]).upper()
        if want != have:
            problems.append(f"column {expected.name} is {have}, the contract says {want}")
        rowid = expected.name == "id" and not postgres  # SQLite's rowid is never NULL
        if bool(column["nullable"]) != expected.nullable and not rowid:
            problems.append(
                f"column {expected.name} is {_nullability(column['nullable'])}, the contract says "
                f"{_nullability(expected.nullable)}"
            )
        defaulted = expected.server_default is not None and not isinstance(
            expected.server_default, sa.Identity
        )
        if defaulted and column.get("default") is None:
            problems.append(f"column {expected.name} has no DEFAULT (1C may leave it out)")
    primary = inspector.get_pk_constraint(STAGING_TABLE).get("constrained_columns") or []
    if primary != ["id"]:
        problems.append(f"the primary key is ({', '.join(primary)}), the contract says (id)")
    elif postgres and "id" in found:
        generated = found["id"].get("identity") or str(found["id"].get("default") or "")
        if not generated:
            problems.append(
                "column id is not generated by the database (GENERATED ALWAYS AS IDENTITY)"
            )
    known = {column.name for column in staging.columns}
    problems += [
        f"extra column {name} is NOT NULL without a DEFAULT (1C's inserts would fail)"
        for name, column in found.items()
        if name not in known and not column["nullable"] and column.get("default") is None
    ]
    return problems


def _nullability(nullable: object) -> str:
    return "NULL" if nullable else "NOT NULL"


def _type_name(type_: Any, postgres: bool) -> str:
    """A column type in the contract's words, the same for the model and the database."""
    if isinstance(type_, sa.TypeDecorator):
        type_ = type_.impl
    if isinstance(type_, sa.String):  # VARCHAR(n), CHAR(n), TEXT, VARCHAR without a length
        if type_.length is None:
            return "TEXT"
        return f"{'CHAR' if isinstance(type_, sa.CHAR) else 'VARCHAR'}({type_.length})"
    if isinstance(type_, sa.Integer):
        if not postgres:  # SQLite stores every integer type in up to 8 bytes
            return "INTEGER"
        if isinstance(type_, sa.BigInteger):
            return "BIGINT"
        return "SMALLINT" if isinstance(type_, sa.SmallInteger) else "INTEGER"
    if isinstance(type_, sa.DateTime):
        return "TIMESTAMP WITH TIME ZONE" if type_.timezone else "TIMESTAMP"
    try:
        return str(type_).upper()
    except sa.exc.SQLAlchemyError:  # a type the generic dialect cannot name
        return type(type_).__name__.upper()


def _refuse_unknown_revision(engine: Engine) -> None:
    from alembic.script import ScriptDirectory

    current = current_revision(engine)
    script = ScriptDirectory.from_config(alembic_config(engine))
    if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
        raise DatabaseUnavailable(
            f"the database is at revision {current}, which this release of exchange does not "
            "know: it was migrated by a newer release; run that release"
        )


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with transaction(engine, read_only=True) as connection:
        return MigrationContext.configure(connection).get_current_revision()


_REVISION = re.compile(r'^revision(?::[^=]*)?=\s*"([^"]+)"\s*$', re.MULTILINE)
_DOWN_REVISION = re.compile(r'^down_revision(?::[^=]*)?=\s*(?:None|"([^"]+)")\s*$', re.MULTILINE)


def files_head() -> str | None:
    """The head revision as the migration files' own ``revision = "…"`` and ``down_revision =
    "…"`` lines name it, without importing Alembic; None when a file has other lines (a merge,
    a computed name) or the files do not make one head: Alembic is asked then."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (script_location() / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revision, parent = _REVISION.findall(text), _DOWN_REVISION.findall(text)
        if len(revision) != 1 or len(parent) != 1:
            return None
        revisions.add(revision[0])
        parents.add(parent[0])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_files_head(engine: Engine) -> bool:
    """The database holds exactly the files' head (one row of ``alembic_version``)."""
    head = files_head()
    if head is None:
        return False
    with transaction(engine, read_only=True) as connection:
        if not inspect(connection).has_table("alembic_version"):
            return False
        rows = connection.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    return [(head,)] == [tuple(row) for row in rows]


def ensure_current(engine: Engine) -> None:
    if _at_files_head(engine):  # the usual case, said without importing Alembic
        return
    current, head = current_revision(engine), head_revision(engine)
    if current != head:
        _refuse_unknown_revision(engine)
        state = "not migrated" if current is None else f"at revision {current}, not {head}"
        raise DatabaseUnavailable(f"the database is {state}: run `exchange migrate` first")


def aggregates_beyond_intake(engine: Engine, staging_engine: Engine | None = None) -> list[str]:
    """The aggregates (``kind aggregate``) that hold a version from 2^62 up that is no 1C
    package's number, held by a message or done on a channel in use: older releases let such
    versions in through the table or the JSON intake. The 1C exchange numbers its packages
    without them (a version at 2^63-1 left no number for any package), so a later package's
    price of such an aggregate is below the version it holds: ``exchange migrate`` names
    them, for a person to look at."""
    with transaction(staging_engine or engine, read_only=True) as connection:
        packages = set(
            connection.execute(
                sa.select(cml_packages.c.version).where(
                    cml_packages.c.version >= PACKAGE_VERSIONS_FROM
                )
            ).scalars()
        )
    found: set[tuple[str, str]] = set()
    with transaction(engine, read_only=True) as connection:
        held = connection.execute(
            sa.select(messages.c.kind, messages.c.aggregate, messages.c.version).where(
                messages.c.version >= PACKAGE_VERSIONS_FROM, messages.c.rejected.is_(False)
            )
        ).all()
        # Done on any channel in use (contract 13: each has its own cursor; a price delivered
        # on the second shop only is as much beyond 1C's packages as one on the first).
        cursor = channel_aggregates.c
        done = connection.execute(
            sa.select(aggregates.c.kind, aggregates.c.aggregate, cursor.done_version)
            .join(channel_aggregates, cursor.aggregate_id == aggregates.c.id)
            .join(channels, channels.c.id == cursor.channel_id)
            .where(cursor.done_version >= PACKAGE_VERSIONS_FROM, channels.c.dropped_at.is_(None))
        ).all()
    for kind, aggregate, version in [*held, *done]:
        if version not in packages:
            found.add((kind, aggregate))
    return [f"{kind} {aggregate!r}" for kind, aggregate in sorted(found)]
