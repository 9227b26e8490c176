"""`--config PATH` works wherever the user puts it on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.subprocess
def test_the_real_command_line_with_bytes_that_are_not_utf8_is_one_clear_line(
    tmp_path: Path,
) -> None:
    """The bytes themselves on a real command line (Python decodes argv under a UTF-8 locale
    with ``surrogateescape``), not a test's stand-in for them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXCHANGE_", "LC_"))}
    env.update(LANG="C.UTF-8", EXCHANGE_DATABASE_URL=f"sqlite:///{tmp_path / 'x.db'}")
    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"exchange", b"find", b"SKU-\xff\xfe"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert 2 == result.returncode, result.stderr
    assert [
        "error: the argument 'SKU-\\xff\\xfe' is not UTF-8 text: exchange reads its arguments "
        "as UTF-8 (is the terminal or the script in another encoding?)"
    ] == result.stderr.splitlines()
