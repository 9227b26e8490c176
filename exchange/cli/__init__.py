"""The command line: parse, call, print. No decisions live here.

Expected failures (bad configuration, unreachable database, an operator request that cannot
be done) print one line ``error: …`` on stderr and exit 2; bad options exit 2 via Click.
"""

from __future__ import annotations

import sys

# The command modules register their commands on ``app`` as they are imported, in the order
# ``exchange --help`` lists them.
# isort: off
from exchange.cli import serving, reading, verifying, people, quarantine, control  # noqa: F401

# isort: on
from exchange.cli.common import app


def config_first(argv: list[str]) -> list[str]:
    """Accept ``--config PATH`` anywhere on the line, as users type it: move it to the front."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--config" and i + 1 < len(args):
            return [arg, args[i + 1], *args[:i], *args[i + 2 :]]
        if arg.startswith("--config="):
            return [arg, *args[:i], *args[i + 1 :]]
    return args


def main() -> None:
    app(args=config_first(sys.argv[1:]), prog_name="exchange")


__all__ = ["app", "config_first", "main"]
