"""The workbench's operators: add, remove, list."""

from __future__ import annotations

import getpass
import json
import sys
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from exchange import app as bootstrap
from exchange.cli.common import (
    JsonOpt,
    _guard,
    _in_zone,
    _settings,
    cli_lang,
    operator_app,
    out,
)
from exchange.db.engine import transaction
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import N_, _, pgettext
from exchange.ops import operators
from exchange.words import word


def _read_password(confirm: bool = True) -> str:
    """From a prompt on a terminal, else the first line of standard input: never an argument
    (it would stay in the shell's history and in the process list)."""
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if confirm and getpass.getpass("again: ") != first:
            raise ExchangeError("the two passwords differ")
        return first
    return sys.stdin.readline().rstrip("\r\n")


@operator_app.command(
    "add",
    help=N_(
        "Add an operator, or set a new password and role for one, which ends every "
        "session of theirs (password from a prompt or standard input)."
    ),
)
def operator_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help=N_("The name the operator signs in with."))],
    role: Annotated[
        str, typer.Option("--role", help=N_("viewer (reads) or operator (also acts)."))
    ] = "viewer",
) -> None:
    with _guard():
        if role not in operators.ROLES:
            raise ExchangeError(f"unknown role {role!r}: viewer or operator")
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        password = _read_password()
        with transaction(engine) as connection:
            operators.add(connection, name, role, password, SystemClock().now())
    lang = cli_lang()
    shown = role if lang == "en" else word(f"role_{role}", lang)
    said = _("operator {name} ({role}) saved", lang).format(name=name, role=shown)
    out.print(said, markup=False)


@operator_app.command(
    "remove",
    help=N_(
        "Remove an operator: every session of theirs ends (adding the name again revives none)."
    ),
)
def operator_remove(ctx: typer.Context, name: str) -> None:
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine) as connection:
            operators.remove(connection, name)
    out.print(_("operator {name} removed", cli_lang()).format(name=name), markup=False)


@operator_app.command(
    "list", help=N_("The operators and their roles (never a password or its hash).")
)
def operator_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine, read_only=True) as connection:
            rows = operators.listed(connection)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    lang = cli_lang()
    table = Table()
    for column in (
        pgettext("operator list column", "name", lang),
        pgettext("operator list column", "role", lang),
        pgettext("operator list column", "added", lang),
    ):
        table.add_column(column)
    for row in rows:
        role = row["role"] if lang == "en" else word(f"role_{row['role']}", lang)
        table.add_row(Text(row["name"]), role, _in_zone(row["created_at"], settings.display_tz))
    if not rows:
        table.caption = _(
            "no operator: add one with exchange operator add NAME --role operator", lang
        )
    out.print(table)
