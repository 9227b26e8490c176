"""``exchange migrate`` (contract 6): creates or upgrades every table, staging included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Cli, assert_one_line_error, describe
from sqlalchemy import inspect, text

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import current_revision, head_revision
from exchange.db.schema import metadata
from exchange.dev.dbkit import sqlite_copy

EVERY_TABLE = {*metadata.tables, "alembic_version"}


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all: a SQLite file not yet created, an empty PostgreSQL."""
    if request.param == "sqlite":
        path = tmp_path / "fresh" / "exchange.db"
        path.parent.mkdir()
        yield f"sqlite:///{path}"
    else:
        yield request.getfixturevalue("empty_pg_url")


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_creates_every_table_including_staging_and_is_repeatable(
    cli: Cli, fresh_db_url: str
) -> None:
    first = cli("migrate", db=fresh_db_url)
    assert first.returncode == 0, describe(first)
    assert "staging_intents" in tables(fresh_db_url)
    assert tables(fresh_db_url) >= EVERY_TABLE

    again = cli("migrate", db=fresh_db_url)
    assert again.returncode == 0, describe(again)
    assert tables(fresh_db_url) >= EVERY_TABLE
    engine = make_engine(fresh_db_url)
    try:
        assert current_revision(engine) == head_revision(engine)
    finally:
        engine.dispose()


def test_migrate_without_any_configuration_creates_exchange_db_in_the_working_directory(
    cli: Cli,
) -> None:
    result = cli("migrate")  # no EXCHANGE_DATABASE_URL: the default sqlite:///exchange.db
    assert result.returncode == 0, describe(result)
    database = cli.cwd / "exchange.db"
    assert database.is_file()
    assert tables(f"sqlite:///{database}") >= EVERY_TABLE


def test_migrate_on_a_database_of_a_newer_release_exits_2_with_one_error_line(
    cli: Cli, tmp_path: Path
) -> None:
    url = sqlite_copy(tmp_path / "newer.db")
    engine = make_engine(url)
    with transaction(engine) as connection:  # as a later release's migration would leave it
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()

    result = cli("migrate", db=url)

    assert_one_line_error(result, "9999")


@pytest.mark.parametrize("target", ["api", "woocommerce"])
def test_migrate_registers_the_one_channel_named_after_the_target(
    cli: Cli, tmp_path: Path, target: str
) -> None:
    """Contract 13: without EXCHANGE_CHANNELS there is one channel, named after
    EXCHANGE_TARGET (``api`` by default); ``migrate`` registers it (migration 0024) and an
    upgraded installation's deliveries become its."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    env = {} if target == "api" else {"EXCHANGE_TARGET": target}
    result = cli("migrate", db=url, env=env)
    assert result.returncode == 0, describe(result)
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            found = connection.execute(text("SELECT name, target FROM channels")).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in found] == [(target, target)]


def test_migrate_with_exchange_channels_registers_its_first_channel_by_name_and_target(
    cli: Cli, tmp_path: Path
) -> None:
    """Contract 13, "Upgrading": with EXCHANGE_CHANNELS the channel an upgrade registers (and
    gives every existing delivery to) is its first channel, under that channel's name and
    target, not the default ``api`` that EXCHANGE_TARGET would say."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    channels = '{"site": {"target": "api", "site_url": "https://shop.example.com"}}'
    result = cli(
        "migrate", db=url, env={"EXCHANGE_CHANNELS": channels, "EXCHANGE_SITE_TOKEN": None}
    )
    assert result.returncode == 0, describe(result)
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            found = connection.execute(text("SELECT name, target FROM channels")).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in found] == [("site", "api")]
