"""The CLI runner (tests/support/clitools.py) gives a command what a fresh process has: no
service log handler left by an earlier test of the same pytest process. The full suite met a
demo whose stderr carried log lines only because such a handler was left installed."""

from __future__ import annotations

from clitools import Cli, describe

from exchange import logs
from exchange.dev.testing import fast_settings


def test_a_log_handler_left_by_an_earlier_test_never_reaches_a_commands_stderr(
    cli: Cli,
) -> None:
    handler = logs.configure(fast_settings("sqlite://"))  # as a test outside a command leaves it
    try:
        result = cli("demo", "--dir", str(cli.cwd / "demo"), "--skus", "20", timeout=120)
    finally:
        import logging

        logging.getLogger().removeHandler(handler)
    assert result.returncode == 0, describe(result)
    assert not [line for line in result.stderr.splitlines() if " INFO " in line], describe(result)
