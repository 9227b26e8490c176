"""The schema is built only by migrations, and the migrations agree with the models."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect

from exchange.db.engine import make_engine
from exchange.db.migrate import (
    alembic_config,
    current_revision,
    ensure_current,
    files_head,
    head_revision,
    upgrade,
)
from exchange.db.schema import metadata
from exchange.errors import DatabaseUnavailable

STAGING_COLUMNS = {
    "id": True,
    "kind": False,
    "aggregate": False,
    "aggregate_version": False,
    "payload": False,
    "schema_version": False,
    "source_ref": True,
    "name": True,  # contract 1: optional, the product's name for people (migration 0016)
    "created_at": False,
    "taken_at": True,
}


def test_migrations_produce_exactly_the_models_schema(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []
    engine.dispose()


def test_staging_table_has_the_contract_columns(db_url: str) -> None:
    engine = make_engine(db_url)
    columns = {c["name"]: c for c in inspect(engine).get_columns("staging_intents")}
    engine.dispose()
    assert set(columns) == set(STAGING_COLUMNS)
    nullable = {name: bool(c["nullable"]) for name, c in columns.items() if name != "id"}
    assert nullable == {k: v for k, v in STAGING_COLUMNS.items() if k != "id"}
    assert columns["kind"]["type"].length == 64
    assert columns["aggregate"]["type"].length == 200
    assert columns["schema_version"]["type"].length == 32
    assert columns["source_ref"]["type"].length == 500
    assert columns["name"]["type"].length == 500


def test_postgres_staging_id_is_generated_always_identity(pg_url: str) -> None:
    engine = make_engine(pg_url)
    with engine.connect() as connection:
        identity = connection.exec_driver_sql(
            "SELECT is_identity, identity_generation, data_type FROM information_schema.columns "
            "WHERE table_name = 'staging_intents' AND column_name = 'id'"
        ).one()
    engine.dispose()
    assert tuple(identity) == ("YES", "ALWAYS", "bigint")


def test_sqlite_staging_id_is_autoincrement(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    upgrade(engine)
    with engine.connect() as connection:
        sql = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'staging_intents'"
        ).scalar_one()
    engine.dispose()
    assert "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT" in sql


def test_migrate_is_idempotent_and_a_fresh_database_is_refused_until_migrated(
    empty_pg_url: str,
) -> None:
    engine = make_engine(empty_pg_url)
    try:
        try:
            ensure_current(engine)
        except DatabaseUnavailable as exc:
            assert "exchange migrate" in str(exc)
        else:
            raise AssertionError("an unmigrated database was accepted")
        upgrade(engine)
        upgrade(engine)
        assert current_revision(engine) == head_revision(engine)
        ensure_current(engine)
    finally:
        engine.dispose()


def test_the_migration_files_lines_name_alembics_head(tmp_path: Path) -> None:
    """The check every command makes reads the head from the files' own lines, without
    Alembic: it names the head Alembic names, or nothing (and Alembic is asked)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    assert head_revision(engine) == files_head()
    engine.dispose()


def test_a_database_one_migration_behind_is_refused(fresh_url: str) -> None:
    """The quick check (the files' head in ``alembic_version``) lets no older database by."""
    engine = make_engine(fresh_url)
    try:
        head = head_revision(engine)
        behind = ScriptDirectory.from_config(alembic_config(engine)).get_revision(head)
        previous = str(behind.down_revision)
        upgrade(engine, previous)
        with pytest.raises(DatabaseUnavailable, match=f"at revision {previous}, not {head}"):
            ensure_current(engine)
        upgrade(engine)
        ensure_current(engine)
    finally:
        engine.dispose()


def test_migration_0017_folds_the_search_keys_of_the_rows_already_there(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A database upgraded with messages in it finds them by any case at once: 0017 fills the
    folded keys (``find``'s) of every existing message and aggregate, not only of new ones."""
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    upgrade(engine, "0016")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO aggregates (kind, aggregate, done_version, sku, price_type) "
            "VALUES ('price', 'АРТ-7/Retail', 0, 'АРТ-7', 'retail')"
        )
        connection.exec_driver_sql(
            "INSERT INTO messages (message_id, aggregate_id, rejected, kind, aggregate, version, "
            "schema_version, payload, created_at, taken_at, state, attempts, waiting_since, "
            "updated_at, claim_rank) VALUES ('price.ART_7.v1.abc', 1, 0, 'price', "
            "'АРТ-7/Retail', 1, '1', '{}', '2026-12-01 00:00:00', '2026-12-01 00:00:00', "
            "'new', 0, '2026-12-01 00:00:00', '2026-12-01 00:00:00', 0)"
        )
    upgrade(engine)
    with engine.connect() as connection:
        keys = connection.exec_driver_sql(
            "SELECT m.message_id_key, m.aggregate_key, a.sku_key "
            "FROM messages m JOIN aggregates a ON a.id = m.aggregate_id"
        ).one()
    engine.dispose()
    assert tuple(keys) == ("price.art_7.v1.abc", "арт-7/retail", "арт-7")


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no tables, once for SQLite and once for PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'x.db'}"
    return str(request.getfixturevalue("empty_pg_url"))


def _message(connection: Connection, pk: int, aggregate_id: int, aggregate: str) -> None:
    connection.exec_driver_sql(
        "INSERT INTO messages (id, message_id, aggregate_id, rejected, kind, aggregate, version, "
        "schema_version, payload, created_at, taken_at, state, attempts, waiting_since, "
        f"updated_at, claim_rank) VALUES ({pk}, 'price.m{pk}', {aggregate_id}, FALSE, 'price', "
        f"'{aggregate}', 1, '1', '{{}}', '2026-12-01 00:00:00', '2026-12-01 00:00:00', 'new', "
        "0, '2026-12-01 00:00:00', '2026-12-01 00:00:00', 0)"
    )


def test_migration_0020_gives_each_pair_to_the_aggregate_accepted_first(fresh_url: str) -> None:
    """Contract 15: one (sku, price type), one aggregate. A database that already holds two
    aggregates of one pair gives it to the one whose earliest stored message came first (not
    the one whose aggregate row was made first: a chunk makes them in name order); a pair
    whose messages were all pruned goes to its oldest aggregate."""
    engine = make_engine(fresh_url)
    upgrade(engine, "0018")
    with engine.begin() as connection:
        for pk, aggregate, sku in (
            (1, "ALIAS-1", "ALIAS-1"),
            (2, "ALIAS-1/retail", "ALIAS-1"),
            (3, "P/retail", "P"),
            (4, "P", "P"),
        ):
            connection.exec_driver_sql(
                "INSERT INTO aggregates (id, kind, aggregate, done_version, sku, price_type) "
                f"VALUES ({pk}, 'price', '{aggregate}', 0, '{sku}', 'retail')"
            )
        _message(connection, 1, 2, "ALIAS-1/retail")  # ALIAS-1/retail's row came first
        _message(connection, 2, 1, "ALIAS-1")
    upgrade(engine)
    with engine.connect() as connection:
        owners = {
            sku: aggregate
            for sku, aggregate in connection.exec_driver_sql(
                "SELECT sku, aggregate FROM price_owners"
            )
        }
    engine.dispose()
    assert {"ALIAS-1": "ALIAS-1/retail", "P": "P/retail"} == owners
