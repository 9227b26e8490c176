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
from exchange.cli import withheld, channels  # noqa: F401

# isort: on
from typer import Abort
from typer._click.exceptions import ClickException, UsageError

from exchange.cli.common import app, cli_lang
from exchange.cli.usage import usage_words
from exchange.i18n import _


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


def not_text(argv: list[str]) -> str | None:
    """The first argument that is not UTF-8 text, as the bytes it was (``\\xff``), or None.
    Python keeps such bytes of the command line as lone surrogates, which no database, file
    name or console takes: refused before any command sees them (issue 33 item 9)."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = arg.encode("utf-8", "surrogateescape")
            return raw.decode("ascii", "backslashreplace")
    return None


def main() -> None:
    args = sys.argv[1:]
    bad = not_text(args)
    if bad is not None:
        print(
            f"error: the argument '{bad}' is not UTF-8 text: exchange reads its arguments as "
            "UTF-8 (is the terminal or the script in another encoding?)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if cli_lang() == "en":
        app(args=config_first(args), prog_name="exchange")
        return
    # Russian: Typer's usage errors are English with no catalog, so they are said here.
    try:
        code = app(args=config_first(args), prog_name="exchange", standalone_mode=False)
    except UsageError as error:
        print(usage_words(error, cli_lang()), file=sys.stderr)
        raise SystemExit(2) from None
    except ClickException as error:
        error.show()
        raise SystemExit(error.exit_code) from None
    except Abort:
        print(_("aborted", cli_lang()), file=sys.stderr)
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)


__all__ = ["app", "config_first", "main", "not_text"]
