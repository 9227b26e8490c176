"""``exchange check``, one check at a time: each passes on a ready installation and fails for
the right reason, named in its line, when its piece is broken."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from checktools import TOKEN
from sqlalchemy import Engine, text

from exchange.db.engine import transaction
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.ops.check import (
    Status,
    check_configuration,
    check_migrated,
    check_reachable,
    check_report_dir,
    check_site,
    check_staging_table,
    engine_for,
    run_checks,
)
from exchange.settings import Settings, load_settings

UNREACHABLE_PG = "postgresql+psycopg://postgres:s3cr3t-pw@127.0.0.1:1/x"
ORDER = (
    "configuration valid",
    "database reachable",
    "database migrated",
    "staging table",
    "site reachable",
    "report directory writable",
)


def settings(**overrides: Any) -> Settings:
    return load_settings(**{"worker_id": "check-test", **overrides})


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return sqlite_copy(tmp_path / "exchange.db")


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = engine_for(db_url)
    yield engine
    engine.dispose()


@contextmanager
def disposed(url: str) -> Iterator[Engine]:
    engine = engine_for(url)
    try:
        yield engine
    finally:
        engine.dispose()


# -- configuration ------------------------------------------------------------------------------


def test_the_configuration_line_shows_the_kinds_and_their_policies() -> None:
    result = check_configuration(settings(kinds={"price": "latest-wins", "financial_x": "strict"}))
    assert Status.OK == result.status
    assert "financial_x=strict" in result.line()
    assert "price=latest-wins" in result.line()
    assert result.line().startswith("OK   configuration valid")


# -- the database -------------------------------------------------------------------------------


def test_a_migrated_database_is_reachable_and_current(db: Engine) -> None:
    assert Status.OK == check_reachable(db).status
    assert Status.OK == check_migrated(db).status


def test_an_unreachable_database_fails_without_showing_its_password() -> None:
    with disposed(UNREACHABLE_PG) as engine:
        result = check_reachable(engine)
    assert Status.FAIL == result.status
    assert "unreachable" in result.detail
    assert "s3cr3t-pw" not in result.line()
    assert "127.0.0.1:1/x" in result.line()


def test_a_missing_sqlite_file_fails_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with disposed(f"sqlite:///{path}") as engine:
        result = check_reachable(engine)
    assert Status.FAIL == result.status
    assert "does not exist" in result.detail
    assert not path.exists()


def test_an_unmigrated_postgresql_database_fails_with_a_hint_to_migrate(empty_pg_url: str) -> None:
    with disposed(empty_pg_url) as engine:
        assert Status.OK == check_reachable(engine).status
        result = check_migrated(engine)
    assert Status.FAIL == result.status
    assert "not migrated" in result.detail
    assert "exchange migrate" in result.detail


def test_an_unmigrated_sqlite_database_fails(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    with disposed(f"sqlite:///{path}") as engine:
        result = check_migrated(engine)
    assert Status.FAIL == result.status
    assert "not migrated" in result.detail


def test_a_database_behind_the_latest_revision_fails(sqlite_url: str) -> None:
    with disposed(sqlite_url) as engine:
        with transaction(engine) as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = 'abc0000000'"))
        result = check_migrated(engine)
    assert Status.FAIL == result.status
    assert "abc0000000" in result.detail


# -- the staging table --------------------------------------------------------------------------


def test_the_staging_table_has_the_contract_columns(db: Engine) -> None:
    result = check_staging_table(db)
    assert Status.OK == result.status, result.line()


def test_a_staging_table_missing_a_column_fails_naming_it(db: Engine) -> None:
    with transaction(db) as connection:
        connection.execute(text("ALTER TABLE staging_intents DROP COLUMN source_ref"))
    result = check_staging_table(db)
    assert Status.FAIL == result.status
    assert "column source_ref is missing" == result.detail


def test_a_nullable_contract_column_fails_naming_it(pg_url: str) -> None:
    with disposed(pg_url) as engine:
        with transaction(engine) as connection:
            connection.execute(text("ALTER TABLE staging_intents ALTER COLUMN kind DROP NOT NULL"))
        result = check_staging_table(engine)
    assert Status.FAIL == result.status
    assert "column kind is NULL, the contract says NOT NULL" == result.detail


def test_a_missing_staging_table_fails(empty_pg_url: str) -> None:
    with disposed(empty_pg_url) as engine:
        result = check_staging_table(engine)
    assert Status.FAIL == result.status
    assert "missing" in result.detail


# -- the site -----------------------------------------------------------------------------------


def test_the_site_answers_the_health_request_with_the_token(site: SiteSimulator) -> None:
    result = check_site(settings(site_url=site.url, site_token=TOKEN))
    assert Status.OK == result.status, result.line()


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_fails_as_token_refused(site: SiteSimulator, status: int) -> None:
    site.faults = Faults(auth_status=status)
    result = check_site(settings(site_url=site.url, site_token=TOKEN))
    assert Status.FAIL == result.status
    assert result.detail.startswith(f"token refused (HTTP {status})")
    assert TOKEN not in result.line()


def test_a_wrong_token_fails_as_token_refused(site: SiteSimulator) -> None:
    result = check_site(settings(site_url=site.url, site_token="not-the-token"))
    assert result.detail.startswith("token refused (HTTP 401)")
    assert "not-the-token" not in result.line()


def test_no_token_at_all_says_so(site: SiteSimulator) -> None:
    result = check_site(settings(site_url=site.url))
    assert Status.FAIL == result.status
    assert "no token is set" in result.detail


def test_a_site_that_is_down_fails_as_unreachable(closed_port_url: str) -> None:
    result = check_site(settings(site_url=closed_port_url, site_token=TOKEN))
    assert Status.FAIL == result.status
    assert result.detail.startswith("site unreachable: ConnectError")


def test_a_missing_site_url_fails_because_run_needs_it() -> None:
    result = check_site(settings())
    assert Status.FAIL == result.status
    assert "EXCHANGE_SITE_URL is not set" in result.detail


def test_an_unreadable_token_file_fails(site: SiteSimulator, tmp_path: Path) -> None:
    result = check_site(settings(site_url=site.url, site_token_file=tmp_path / "absent"))
    assert Status.FAIL == result.status
    assert "EXCHANGE_SITE_TOKEN_FILE" in result.detail


# -- the report directory -----------------------------------------------------------------------


def test_an_unset_report_directory_is_skipped() -> None:
    result = check_report_dir(None)
    assert Status.SKIP == result.status
    assert result.line().startswith("SKIP report directory writable: EXCHANGE_REPORT_DIR")


def test_a_writable_report_directory_passes_and_is_left_empty(tmp_path: Path) -> None:
    assert Status.OK == check_report_dir(tmp_path).status
    assert [] == list(tmp_path.iterdir())


def test_a_report_directory_that_run_would_create_passes_and_is_not_created(
    tmp_path: Path,
) -> None:
    target = tmp_path / "reports" / "daily"
    result = check_report_dir(target)
    assert Status.OK == result.status
    assert "does not exist yet" in result.detail
    assert not (tmp_path / "reports").exists()
    assert [] == list(tmp_path.iterdir())


def test_a_report_directory_that_is_a_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text("x")
    assert Status.FAIL == check_report_dir(path).status
    result = check_report_dir(path / "sub")
    assert Status.FAIL == result.status
    assert "cannot write" in result.detail


# -- every check, in order ----------------------------------------------------------------------


def test_a_ready_installation_passes_every_check(
    db_url: str, site: SiteSimulator, tmp_path: Path
) -> None:
    results = run_checks(
        settings(
            database_url=db_url, site_url=site.url, site_token=TOKEN, report_dir=tmp_path / "r"
        )
    )
    assert [r.status for r in results] == [Status.OK] * 6, [r.line() for r in results]
    for result, what in zip(results, ORDER, strict=True):
        assert result.what.startswith(what), [r.line() for r in results]


def test_an_unreachable_database_skips_what_depends_on_it(closed_port_url: str) -> None:
    results = run_checks(
        settings(database_url=UNREACHABLE_PG, site_url=closed_port_url, site_token=TOKEN)
    )
    assert [Status.OK, Status.FAIL, Status.SKIP, Status.SKIP, Status.FAIL, Status.SKIP] == [
        r.status for r in results
    ]


def test_a_separate_staging_database_is_checked_and_holds_the_staging_table(
    sqlite_url: str, tmp_path: Path, site: SiteSimulator
) -> None:
    staging_path = tmp_path / "staging.db"
    staging_url = sqlite_copy(staging_path)
    with disposed(staging_url) as engine, transaction(engine) as connection:
        connection.execute(text("ALTER TABLE staging_intents DROP COLUMN payload"))
    results = run_checks(
        settings(
            database_url=sqlite_url, staging_url=staging_url, site_url=site.url, site_token=TOKEN
        )
    )
    lines = [r.line() for r in results]
    assert any(line.startswith("OK   staging database reachable") for line in lines), lines
    assert any(line.startswith("OK   staging database migrated") for line in lines), lines
    staging = next(r for r in results if r.what.startswith("staging table"))
    assert "column payload is missing" == staging.detail


# -- in Russian (issue 34 item 7): the service's words translated, what was answered as it was --


def test_the_checks_own_details_are_russian_and_the_sites_answer_stays_as_received(
    site: SiteSimulator, closed_port_url: str, tmp_path: Path
) -> None:
    """Under a Russian ``check`` the detail the service writes (token refused, the site down,
    a folder that is a file) is Russian; what the site or the system answered, quoted in it,
    and the setting names are as they are."""
    refused = check_site(settings(site_url=site.url, site_token="not-the-token")).line("ru")
    assert refused.endswith(
        ": сайт не принял токен (HTTP 401): обновите EXCHANGE_SITE_TOKEN или "
        "EXCHANGE_SITE_TOKEN_FILE"
    ), refused
    down = check_site(settings(site_url=closed_port_url, site_token=TOKEN))
    said = down.line("ru")
    answer = down.detail.removeprefix("site unreachable: ConnectError: ")
    assert said.endswith(f": сайт недоступен: ConnectError: {answer}"), said
    (tmp_path / "file").write_text("x")
    a_file = check_report_dir(tmp_path / "file").line("ru")
    assert a_file.endswith(": есть, но это не папка"), a_file
    assert (
        check_report_dir(None)
        .line("ru")
        .endswith(": EXCHANGE_REPORT_DIR не задан (отчёт по расписанию не пишется)")
    )


def test_the_staging_tables_differences_are_russian_one_by_one(db: Engine) -> None:
    """Each difference of the staging table from the contract in Russian, the column's name
    as it is."""
    with transaction(db) as connection:
        connection.execute(text("ALTER TABLE staging_intents DROP COLUMN source_ref"))
        connection.execute(text("ALTER TABLE staging_intents DROP COLUMN schema_version"))
    said = check_staging_table(db).line("ru")
    assert said.endswith(": нет столбца schema_version; нет столбца source_ref") or said.endswith(
        ": нет столбца source_ref; нет столбца schema_version"
    ), said


def test_a_database_error_in_a_check_is_said_in_russian() -> None:
    """A check that failed on a service error (ExchangeError's text) says it in Russian, as the
    command line's error line does."""
    result = check_reachable(engine_for(UNREACHABLE_PG), "database")
    said = result.line("ru")
    assert "недоступна: " in said and "s3cr3t-pw" not in said, said
