"""Every command reads the configuration (contract 7) and refuses a bad one (contract 6):
exit 2, one line ``error: …`` on stderr, never a traceback, never a secret.

A command costs a second of Python start-up, so each configuration problem is shown through a
different command; together the cases go through every command (``migrate``, ``run``,
``status``, ``history`` and the four ``quarantine`` commands). The cases are independent, so
they are started together (a module fixture) and each test reads its own result.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Cli, Result, assert_clean, assert_one_line_error, describe
from sqlalchemy import inspect

from exchange.db.engine import make_engine
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import price_row, stage

SOME_ID = "price.SKU-1.v1.000000000000000000000000"
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/x"
WITH_PASSWORD = "postgresql+psycopg://postgres:SuperSecret123@127.0.0.1:1/x"
SITE = "http://127.0.0.1:1"  # never contacted: every command here stops before the site
EXPORT = ["quarantine", "export", "--format", "json", "--output", "q.json"]

# id -> (arguments, environment on top of a migrated SQLite database, what the error names)
PROBLEMS: dict[str, tuple[list[str], dict[str, str | None], str]] = {
    "unreachable-database-migrate": (
        ["migrate"],
        {"EXCHANGE_DATABASE_URL": UNREACHABLE},
        "unreachable",
    ),
    "database-url-not-a-url-quarantine-list": (
        ["quarantine", "list", "--json"],
        {"EXCHANGE_DATABASE_URL": "nonsense"},
        "EXCHANGE_DATABASE_URL",
    ),
    "unsupported-database-history": (
        ["history", SOME_ID],
        {"EXCHANGE_DATABASE_URL": "mysql://x/y"},
        "mysql",
    ),
    "batch-size-0-quarantine-export": (EXPORT, {"EXCHANGE_BATCH_SIZE": "0"}, "EXCHANGE_BATCH_SIZE"),
    "financial-kind-latest-wins-quarantine-retry": (
        ["quarantine", "retry", SOME_ID, "--operator", "alice"],
        {"EXCHANGE_KINDS": '{"financial_x": "latest-wins"}'},
        "financial_x",
    ),
    "missing-config-file-quarantine-cancel": (
        ["--config", "missing.toml", "quarantine", "cancel", SOME_ID, "--note", "why"],
        {},
        "missing.toml",
    ),
    "missing-EXCHANGE_CONFIG-file-status": (
        ["status"],
        {"EXCHANGE_CONFIG": "missing.toml"},
        "missing.toml",
    ),
    "database-not-migrated-status": (
        ["status", "--json"],
        {"EXCHANGE_DATABASE_URL": "sqlite:///empty.db"},
        "exchange migrate",
    ),
    "run-without-site-url": (
        ["run", "--until-idle"],
        {"EXCHANGE_SITE_URL": None},
        "EXCHANGE_SITE_URL",
    ),
    "password-in-unreachable-database-url-run": (
        ["run", "--once"],
        {"EXCHANGE_DATABASE_URL": WITH_PASSWORD},
        "unreachable",
    ),
    "woocommerce-target-with-another-kind-status": (
        ["status"],
        {
            "EXCHANGE_TARGET": "woocommerce",
            "EXCHANGE_KINDS": '{"price": "latest-wins", "stock_level": "latest-wins"}',
        },
        "price messages only",
    ),
    "bitrix-target-without-its-url-run": (
        ["run", "--once"],
        {"EXCHANGE_TARGET": "bitrix", "EXCHANGE_SITE_URL": None},
        "EXCHANGE_BITRIX_URL",
    ),
    "woocommerce-plain-http-off-loopback-run": (
        ["run", "--once"],
        {"EXCHANGE_TARGET": "woocommerce", "EXCHANGE_WOO_URL": "http://shop.example.com"},
        "unencrypted",
    ),
    # A product bug today: a traceback (exchange/db/engine.py re-raises sqlite3.DatabaseError).
    "database-url-names-a-file-that-is-not-a-database-status": (
        ["status", "--json"],
        {"EXCHANGE_DATABASE_URL": "sqlite:///notes.txt"},
        "notes.txt",
    ),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config-errors")


@pytest.fixture(scope="module")
def outcomes(workdir: Path) -> dict[str, Result]:
    database = sqlite_copy(workdir / "migrated.db")
    (workdir / "notes.txt").write_text("not a database, just an operator's notes\n")
    results = Cli(workdir, process=True).many(
        [args for args, _, _ in PROBLEMS.values()],
        db=database,
        env={"EXCHANGE_SITE_URL": SITE},
        envs=[env for _, env, _ in PROBLEMS.values()],
        check=False,
    )
    return dict(zip(PROBLEMS, results, strict=True))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_a_configuration_problem_exits_2_with_one_error_line(
    outcomes: dict[str, Result], workdir: Path, problem: str
) -> None:
    result = outcomes[problem]
    assert_clean(result)
    assert_one_line_error(result, PROBLEMS[problem][2])
    assert not (workdir / "q.json").exists()


def test_an_unreachable_database_is_reported_without_its_password(
    outcomes: dict[str, Result],
) -> None:
    result = outcomes["password-in-unreachable-database-url-run"]
    assert_clean(result)
    assert_one_line_error(result, "unreachable", "127.0.0.1")
    assert "SuperSecret123" not in result.stdout + result.stderr, describe(result)


def test_a_postgresql_database_that_is_not_migrated_is_refused_with_a_hint_to_migrate(
    cli: Cli, empty_pg_url: str
) -> None:
    result = cli("run", "--once", db=empty_pg_url, env={"EXCHANGE_SITE_URL": SITE})
    assert_one_line_error(result, "exchange migrate")
    engine = make_engine(empty_pg_url)
    try:
        assert "messages" not in inspect(engine).get_table_names()  # nothing built behind
    finally:
        engine.dispose()


def test_the_site_token_never_appears_in_any_output(cli: Cli, tmp_path: Path) -> None:
    # (the Cli helper also checks, on every call of every test, that the token is not printed)
    secret = "tok-Do-Not-Print-4711"
    database = sqlite_copy(tmp_path / "token.db")
    engine = make_engine(database)
    stage(engine, [price_row("SKU-1", 1)])
    engine.dispose()
    env = {"EXCHANGE_SITE_TOKEN": secret, "EXCHANGE_LOG_LEVEL": "DEBUG"}
    # The site refuses the token: the service logs the refusal and pauses; status shows it.
    with SiteSimulator(token="the-sites-own-token", faults=Faults(seed=1)) as site:
        run = cli("run", "--once", db=database, site=site.url, env=env)
    shown = cli("status", db=database, env=env)
    assert run.returncode == 0, describe(run)
    assert "401" in run.stderr, describe(run)
    assert shown.returncode == 1, describe(shown)  # paused delivery needs a person
    assert "PAUSED" in shown.stdout, describe(shown)
    for result in (run, shown):
        assert secret not in result.stdout + result.stderr, describe(result)
