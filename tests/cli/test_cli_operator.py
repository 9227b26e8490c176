"""``exchange operator add|remove|list`` (contract 11): the password from standard input (or a
prompt), never an argument; stored as an argon2 hash; roles checked; one-line errors."""

from __future__ import annotations

import json
import subprocess

from clitools import Cli, assert_no_leaks, assert_one_line_error, describe
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import operators
from exchange.ops.operators import authenticate

SECRET = "s3cret-Password!"


def _with_stdin(cli: Cli, db: str, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli.environment(db)
    result = subprocess.run(
        cli.command(args), env=env, cwd=cli.cwd, input=stdin, capture_output=True, text=True
    )
    assert_no_leaks(args, env, result.stdout, result.stderr)
    return result


def test_add_list_remove(cli: Cli, db_url: str, engine: Engine) -> None:
    added = _with_stdin(cli, db_url, SECRET + "\n", "operator", "add", "olga", "--role", "operator")
    assert added.returncode == 0, describe(added)
    assert SECRET not in added.stdout + added.stderr
    with transaction(engine, read_only=True) as connection:
        stored = connection.execute(select(operators.c.password_hash)).scalar_one()
        assert stored.startswith("$argon2id$") and SECRET not in stored
        assert authenticate(connection, "olga", SECRET) == "operator"
        assert authenticate(connection, "olga", "wrong") is None
    listed = cli("operator", "list", "--json", db=db_url)
    assert listed.returncode == 0, describe(listed)
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["role"]) for r in rows] == [("olga", "operator")]
    assert "hash" not in listed.stdout and "argon2" not in listed.stdout
    assert cli("operator", "remove", "olga", db=db_url).returncode == 0
    assert json.loads(cli("operator", "list", "--json", db=db_url).stdout) == []
    assert_one_line_error(cli("operator", "remove", "olga", db=db_url), "no operator named")


def test_bad_role_short_password_and_no_password_argument(cli: Cli, db_url: str) -> None:
    assert_one_line_error(
        _with_stdin(cli, db_url, SECRET + "\n", "operator", "add", "x", "--role", "admin"),
        "unknown role",
    )
    assert_one_line_error(
        _with_stdin(cli, db_url, "short\n", "operator", "add", "x", "--role", "viewer"),
        "too short",
    )
    extra = _with_stdin(cli, db_url, "", "operator", "add", "x", SECRET)
    assert extra.returncode == 2  # no place for a password among the arguments
