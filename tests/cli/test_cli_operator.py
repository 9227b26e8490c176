"""``exchange operator add|remove|list`` (contract 11): the password from standard input (or a
prompt), never an argument; stored as an argon2 hash; roles checked; one-line errors."""

from __future__ import annotations

import json

from clitools import Cli, assert_one_line_error, describe
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import operators
from exchange.ops.operators import authenticate

SECRET = "s3cret-Password!"


def test_add_list_remove(cli: Cli, db_url: str, engine: Engine) -> None:
    added = cli("operator", "add", "olga", "--role", "operator", db=db_url, stdin=SECRET + "\n")
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
        cli("operator", "add", "x", "--role", "admin", db=db_url, stdin=SECRET + "\n"),
        "unknown role",
    )
    assert_one_line_error(
        cli("operator", "add", "x", "--role", "viewer", db=db_url, stdin="short\n"),
        "too short",
    )
    extra = cli("operator", "add", "x", SECRET, db=db_url, stdin="")
    assert extra.returncode == 2  # no place for a password among the arguments
