"""A staging table that is not quite the contract's (issue 12, item 8), on SQLite and PostgreSQL.

- ``exchange migrate`` adopts a ``staging_intents`` that 1C created before it, when it matches
  contract 1 (its rows kept, the service's own tables created around it), and refuses one that
  differs in one line saying what differs (exit 2, no traceback, nothing created);
- ``exchange check`` compares types, lengths and NULL/NOT NULL with the contract and names each
  difference (a column widened to TEXT was "as in the contract" before).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Cli, assert_one_line_error, describe
from sqlalchemy import inspect, select, text

from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.migrate import current_revision, head_revision
from exchange.db.schema import messages, metadata, staging
from exchange.domain.clock import FakeClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import staging_table as intake
from exchange.ops.check import Status, check_staging_table

EVERY_TABLE = {*metadata.tables, "alembic_version"}
PRICE = '{"sku": "SKU-1", "price": "840.00"}'


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'exchange.db'}"
    else:
        yield request.getfixturevalue("empty_pg_url")


def one_c_table(url: str, **columns: str) -> str:
    """CREATE TABLE staging_intents as 1C's administrator writes it, columns replaced by
    ``columns`` (name -> its SQL definition)."""
    postgres = url.startswith("postgresql")
    definitions = {
        "id": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        if postgres
        else "INTEGER PRIMARY KEY AUTOINCREMENT",
        "kind": "VARCHAR(64) NOT NULL",
        "aggregate": "VARCHAR(200) NOT NULL",
        "aggregate_version": "BIGINT NOT NULL",
        "payload": "TEXT NOT NULL",
        "schema_version": "VARCHAR(32) NOT NULL DEFAULT '1'",
        "source_ref": "VARCHAR(500)",
        "created_at": "TIMESTAMP NOT NULL DEFAULT "
        + ("(now() AT TIME ZONE 'utc')" if postgres else "CURRENT_TIMESTAMP"),
        "taken_at": "TIMESTAMP",
        **columns,
    }
    body = ", ".join(f"{name} {sql}" for name, sql in definitions.items())
    return f"CREATE TABLE staging_intents ({body})"


def execute(url: str, *statements: str) -> None:
    engine = make_engine(url)
    try:
        with transaction(engine) as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


INSERT_1C_ROW = (
    "INSERT INTO staging_intents (kind, aggregate, aggregate_version, payload) "
    f"VALUES ('price', 'SKU-1', 1, '{PRICE}')"
)


def test_migrate_adopts_a_staging_table_1c_created_first_and_keeps_its_rows(
    cli: Cli, fresh_db_url: str
) -> None:
    execute(fresh_db_url, one_c_table(fresh_db_url), INSERT_1C_ROW)

    result = cli("migrate", db=fresh_db_url)

    assert 0 == result.returncode, describe(result)
    assert tables(fresh_db_url) >= EVERY_TABLE
    engine = make_engine(fresh_db_url)
    try:
        assert head_revision(engine) == current_revision(engine)
        assert Status.OK == check_staging_table(engine).status, check_staging_table(engine)
        report = intake.take(engine, None, dict(DEFAULT_KINDS), FakeClock().now())
        assert (1, 1) == (report.taken, report.messages)
        with transaction(engine, read_only=True) as connection:
            assert ["SKU-1"] == list(connection.execute(select(messages.c.aggregate)).scalars())
            indexes = {i["name"] for i in inspect(connection).get_indexes("staging_intents")}
        assert "ix_staging_intents_untaken" in indexes
        execute(fresh_db_url, INSERT_1C_ROW.replace("'SKU-1', 1", "'SKU-1', 2"))
        with transaction(engine, read_only=True) as connection:
            assert 2 == len(connection.execute(select(staging.c.id)).all())
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("columns", "fragments"),
    [
        ({"aggregate": "TEXT NOT NULL"}, ("aggregate is TEXT", "VARCHAR(200)")),
        ({"kind": "VARCHAR(32) NOT NULL"}, ("kind is VARCHAR(32)", "VARCHAR(64)")),
        ({"source_ref": "VARCHAR(500) NOT NULL"}, ("source_ref is NOT NULL", "NULL")),
        ({"payload": "TEXT"}, ("payload is NULL", "NOT NULL")),
        ({"created_at": "TIMESTAMP NOT NULL"}, ("created_at has no DEFAULT",)),
    ],
    ids=["widened", "narrowed", "not-null", "nullable", "no-default"],
)
def test_migrate_refuses_a_staging_table_that_differs_in_one_line_saying_what_differs(
    cli: Cli, fresh_db_url: str, columns: dict[str, str], fragments: tuple[str, ...]
) -> None:
    execute(fresh_db_url, one_c_table(fresh_db_url, **columns))

    result = cli("migrate", db=fresh_db_url)

    assert_one_line_error(result, "staging_intents", "differs", *fragments)
    assert "Traceback" not in result.stdout + result.stderr
    assert {"staging_intents"} == tables(fresh_db_url), "nothing created beside it"


def test_migrate_refuses_a_staging_table_missing_a_column_and_with_a_narrower_version(
    cli: Cli, empty_pg_url: str
) -> None:
    statement = one_c_table(empty_pg_url, aggregate_version="INTEGER NOT NULL")
    execute(empty_pg_url, statement.replace(", source_ref VARCHAR(500)", ""))

    result = cli("migrate", db=empty_pg_url)

    assert_one_line_error(
        result, "column source_ref is missing", "aggregate_version is INTEGER", "BIGINT"
    )


# -- exchange check -------------------------------------------------------------------------------


def widen_aggregate(url: str) -> None:
    """What a DBA does to a migrated database: staging_intents.aggregate as TEXT."""
    engine = make_engine(url)
    try:
        postgres = is_postgres(engine)
    finally:
        engine.dispose()
    if postgres:
        execute(url, "ALTER TABLE staging_intents ALTER COLUMN aggregate TYPE TEXT")
    else:  # SQLite alters no column type: the table is built again, as a DBA tool does
        execute(
            url,
            "DROP TABLE staging_intents",
            one_c_table(url, aggregate="TEXT NOT NULL"),
        )


def test_check_names_a_staging_column_widened_to_text(db_url: str) -> None:
    widen_aggregate(db_url)
    engine = make_engine(db_url)
    try:
        result = check_staging_table(engine)
    finally:
        engine.dispose()

    assert Status.FAIL == result.status
    assert "column aggregate is TEXT, the contract says VARCHAR(200)" == result.detail


def test_exchange_check_shows_the_difference_and_fails(cli: Cli, db_url: str) -> None:
    widen_aggregate(db_url)

    result = cli("check", db=db_url)

    assert 0 != result.returncode, describe(result)
    assert "column aggregate is TEXT, the contract says VARCHAR(200)" in result.stdout, describe(
        result
    )
