"""Neither the site token nor a database password is ever shown: an operator's session, run as
real ``exchange`` processes, grepped whole.

One module-scoped session (each command costs a second of Python start-up): the token comes
from ``EXCHANGE_SITE_TOKEN_FILE``, the database is PostgreSQL reached with a password in its
URL, every log is at DEBUG; the site first refuses the token (401), then accepts it and answers
one aggregate with 500 until the retry limit and another with 422. Then every reading command,
every report format, ``config``, ``check``, two failing commands and the ``--help`` of every
command. Everything printed, written or stored is searched for the two secrets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import typer.main
from sqlalchemy import select
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from exchange.cli import app
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history, messages, workers
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import posting_row, price_row, stage
from exchange.domain.identity import message_id

TOKEN = "tok-Sec-4c1d-NEVER-PRINT"
DB_PASSWORD = "dbPw-0xC0FFEE-hidden"
PG_ADMIN_URL = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
POISON_ID = message_id("price", "SKU-P", 1)
FORMATS = ("csv", "xlsx", "html", "json")
# The session's set-up runs about twenty real commands: 20 s idle, 34 s on a loaded machine,
# counted against its first test's timeout. A hang guard, not a margin.
pytestmark = pytest.mark.timeout(240)


@dataclass
class Session:
    """What the operator's session printed (label -> text), wrote and stored."""

    printed: dict[str, str] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    stored: str = ""
    applied: list[str] = field(default_factory=list)
    masked_url: str = ""


def _environment(base: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    return {**environment, "COLUMNS": "250", **base, **(extra or {})}


def _commands(
    session: Session,
    workdir: Path,
    base: dict[str, str],
    invocations: dict[str, tuple[Sequence[str], dict[str, str]]],
) -> None:
    """Independent commands, started together; their output lands in ``session``."""
    processes = {
        label: subprocess.Popen(
            [sys.executable, "-m", "exchange", *args],
            env=_environment(base, extra),
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for label, (args, extra) in invocations.items()
    }
    for label, process in processes.items():
        try:
            stdout, stderr = process.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for other in processes.values():
                other.kill()
                other.communicate()
            raise
        session.printed[label] = f"{stdout}\n{stderr}"
        session.codes[label] = process.returncode


def _every_command(group: object, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from _every_command(command, [*path, name])


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    workdir = tmp_path_factory.mktemp("secrets")
    token_file = workdir / "site_token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    name = f"exchange_sec_{uuid.uuid4().hex[:12]}"
    url = (
        make_url(PG_ADMIN_URL)
        .set(drivername="postgresql+psycopg", password=DB_PASSWORD, database=name)
        .render_as_string(hide_password=False)
    )
    unreachable = make_url(url).set(port=1).render_as_string(hide_password=False)
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required and unreachable at {PG_ADMIN_URL}: {exc}")
    admin.execute(f'CREATE DATABASE "{name}"')
    session = Session(masked_url=make_url(url).render_as_string(hide_password=True))
    try:
        with SiteSimulator(token=TOKEN, faults=Faults(seed=1, auth_status=401)) as site:
            site.faults.poison, site.faults.reject = {"SKU-P"}, {"SKU-R"}
            base = {
                "EXCHANGE_DATABASE_URL": url,
                "EXCHANGE_SITE_URL": site.url,
                "EXCHANGE_SITE_TOKEN_FILE": str(token_file),
                "EXCHANGE_LOG_LEVEL": "DEBUG",
                "EXCHANGE_POLL_INTERVAL": "0.01",
                "EXCHANGE_RETRY_BASE_DELAY": "0.001",
                "EXCHANGE_RETRY_MAX_DELAY": "0.01",
                "EXCHANGE_MAX_ATTEMPTS": "2",
            }
            _commands(session, workdir, base, {"migrate": (["migrate"], {})})
            engine = make_engine(url)
            rows = [price_row("SKU-1", 1), price_row("SKU-P", 1), price_row("SKU-R", 1)]
            stage(engine, [*rows, posting_row("DOC-1", 1)])
            json_log = {"EXCHANGE_LOG_FORMAT": "json"}
            _commands(session, workdir, base, {"run 401": (["run", "--once"], json_log)})
            site.faults.auth_status = None
            until_idle = ["run", "--until-idle", "--max-seconds", "120"]
            _commands(session, workdir, base, {"run": (until_idle, {})})
            exports = {
                f"export {f}": (["quarantine", "export", "--format", f, "--output", f"q.{f}"], {})
                for f in FORMATS
            }
            _commands(
                session,
                workdir,
                base,
                {
                    "status": (["status"], {}),
                    "history --json": (["history", POISON_ID, "--json"], {}),
                    "quarantine list --json": (["quarantine", "list", "--json"], {}),
                    **exports,
                    "config": (["config"], {}),
                    "check": (["check"], {}),
                    "unreachable": (["status"], {"EXCHANGE_DATABASE_URL": unreachable}),
                    "bad setting": (["run", "--once"], {"EXCHANGE_BATCH_SIZE": "0"}),
                },
            )
            session.applied = [e.aggregate for e in site.effects()]
            with transaction(engine, read_only=True) as connection:
                session.stored = "\n".join(
                    repr(list(connection.execute(select(table)).mappings()))
                    for table in (messages, history, workers)
                )
            engine.dispose()
        for f in FORMATS:
            path = workdir / f"q.{f}"
            if f == "xlsx":
                with zipfile.ZipFile(path) as book:
                    parts = [book.read(n).decode("utf-8", "replace") for n in book.namelist()]
                text = "\n".join(parts)
            else:
                text = path.read_text(encoding="utf-8")
            session.reports[f] = text
        runner = CliRunner()
        for path in _every_command(typer.main.get_command(app), []):
            shown = runner.invoke(app, [*path, "--help"], env=_environment(base))
            session.helps[" ".join(["exchange", *path, "--help"])] = shown.output
            session.codes[f"help {' '.join(path)}"] = shown.exit_code
        yield session
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_the_session_went_as_planned_so_that_its_output_proves_something(
    session: Session,
) -> None:
    assert sorted(["SKU-1", "DOC-1"]) == sorted(session.applied)  # the token file's token works
    assert "401" in session.printed["run 401"]
    assert "500" in session.printed["run"] and "http-422" in session.printed["run"]
    assert POISON_ID in session.printed["history --json"]
    assert "retry-limit" in session.reports["json"]
    expected_codes = {"run 401": 0, "run": 0, "check": 0, "unreachable": 2, "bad setting": 2}
    assert expected_codes == {label: session.codes[label] for label in expected_codes}
    # exchange and every command and subcommand: the walk reached the nested ones too
    walked = {"exchange --help", "exchange run --help", "exchange quarantine retry --help"}
    assert walked <= set(session.helps) and len(session.helps) >= 14
    assert all(code == 0 for label, code in session.codes.items() if label.startswith("help"))


def test_the_token_is_in_no_output_log_error_report_or_help(session: Session) -> None:
    shown = {**session.printed, **session.reports, **session.helps}
    leaks = [label for label, text in shown.items() if TOKEN in text]
    assert [] == leaks


def test_the_token_is_not_stored_in_messages_history_or_workers(session: Session) -> None:
    assert session.stored and TOKEN not in session.stored


def test_the_database_password_is_in_no_output_log_error_report_help_or_row(
    session: Session,
) -> None:
    shown = {**session.printed, **session.reports, **session.helps, "stored": session.stored}
    leaks = [label for label, text in shown.items() if DB_PASSWORD in text]
    assert [] == leaks


def test_wherever_the_database_url_is_shown_its_password_is_masked(session: Session) -> None:
    assert ":***@" in session.masked_url
    for label in ("migrate", "config", "check"):
        assert session.masked_url in session.printed[label], label
    error = [line for line in session.printed["unreachable"].splitlines() if line.strip()]
    assert 1 == len(error) and error[0].startswith("error: "), error
    assert "postgres:***@127.0.0.1:1/" in error[0]
