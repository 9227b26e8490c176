"""`--config PATH` works wherever the user puts it on the command line."""

from __future__ import annotations

import pytest

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
