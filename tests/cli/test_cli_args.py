"""`--config PATH` works wherever the user puts it on the command line."""

from __future__ import annotations

import pytest
from clitools import Cli, assert_one_line_error

from exchange.cli import config_first


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status", "--config", "c.toml", "--json"], ["--config", "c.toml", "status", "--json"]),
        (["--config", "c.toml", "status"], ["--config", "c.toml", "status"]),
        (["quarantine", "list", "--config=c.toml"], ["--config=c.toml", "quarantine", "list"]),
        (["history", "--", "--config", "x"], ["history", "--", "--config", "x"]),
        (["status"], ["status"]),
    ],
)
def test_config_option_is_moved_in_front_of_the_command(
    argv: list[str], expected: list[str]
) -> None:
    assert expected == config_first(argv)


@pytest.mark.parametrize(
    "args",
    [
        ["find", "ab\udcff\udcfe"],
        ["history", "\udcff"],
        ["operator", "remove", "\udcc3("],
        ["quarantine", "list", "--aggregate", "SKU-\udcff"],
        ["--config", "/tmp/\udcff.toml", "status"],
    ],
)
def test_an_argument_that_is_not_utf8_is_one_clear_line_and_exit_2(
    cli: Cli, db_url: str, args: list[str]
) -> None:
    """Issue 33 item 9: bytes of the command line that are not UTF-8 (kept by Python as lone
    surrogates) printed a traceback once they reached the database; now one line names them,
    as the bytes they were."""
    bad = next(arg for arg in args if any("\udc80" <= c <= "\udcff" for c in arg))
    shown = bad.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    assert_one_line_error(cli(*args, db=db_url), f"'{shown}' is not UTF-8 text")
