"""``exchange --help`` in the operator's language (contract 15, "Words"; docs/runbook.ru.md sends
operators to it).

The help of every command, option and argument is written in English in the code and marked
``help=N_("…")``, so that ``make catalogs`` extracts it as it does every other message (Babel
finds ``N_`` wherever it is called; a ``help="…"`` keyword or a docstring it would not see).
The Click tree Typer builds is translated here, once, before it parses the command line:
``WordsGroup`` is the root group's class, so ``exchange`` and the tests' ``CliRunner`` both go
through it. Click's own words of a help page (the headings, ``Usage:``, ``[required]``,
``[default: …]``, the ``--help`` option's line) come from a Click without Russian, and are said
by the help formatter (``WordsFormatter``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from typer._click import _textwrap
from typer._click.core import Command, Context
from typer._click.formatting import HelpFormatter
from typer.core import TyperGroup

from exchange.i18n import N_, NP_, Lang, _, lang_of_environment, say
from exchange.ops.find import known_reasons


# A help page lists codes an operator types back (``--reason invalid-for-channel``): Click's
# wrapper would break them at their hyphens (``invalid-for-`` / ``channel``), so lines break
# between words only, in every language.
class _WholeCodes(_textwrap.TextWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "break_on_hyphens": False})


_textwrap.TextWrapper = _WholeCodes  # type: ignore[misc]  # wrap_text imports it when called

# Click's and Typer's own words on a help page, English whatever the locale.
HELP_OPTION = N_("Show this message and exit.")  # the --help option's own
_HEADINGS = {
    "Usage": NP_("help heading", "Usage"),
    "Options": NP_("help heading", "Options"),
    "Arguments": NP_("help heading", "Arguments"),
    "Commands": NP_("help heading", "Commands"),
}
_EXTRAS = {
    "required": NP_("help of an option", "required"),
    "default": NP_("help of an option", "default"),
    "env var": NP_("help of an option", "env var"),
}
# The placeholders Click and Typer write for a command's arguments and an option's value: the
# kind of value, said in ``lang`` (the choices, ``<csv|xlsx|html|json>``, stay: they are typed).
_PLACEHOLDERS = {
    "[OPTIONS]": NP_("help placeholder", "[OPTIONS]"),
    "COMMAND [ARGS]...": NP_("help placeholder", "COMMAND [ARGS]..."),
    "<str>": NP_("help placeholder", "<str>"),
    "<list[str]>": NP_("help placeholder", "<list[str]>"),
    "<int range>": NP_("help placeholder", "<int range>"),
    "<int>": NP_("help placeholder", "<int>"),
    "<float range>": NP_("help placeholder", "<float range>"),
    "<float>": NP_("help placeholder", "<float>"),
    "<file>": NP_("help placeholder", "<file>"),
    "<dir>": NP_("help placeholder", "<dir>"),
    "<path>": NP_("help placeholder", "<path>"),
}
_PLACEHOLDER = re.compile("|".join(re.escape(key) for key in _PLACEHOLDERS))


def placeholder_words(text: str, lang: Lang) -> str:
    """A usage line or an option's term with Click's placeholders (``[OPTIONS]``, ``<str>``)
    in ``lang``; the option's names and the choices as they are."""
    if lang == "en":
        return text
    return _PLACEHOLDER.sub(lambda found: say(_PLACEHOLDERS[found[0]], lang), text)


_EXTRA = re.compile(r"(?P<head>.*?)(?P<gap>\s*)\[(?P<extras>[^\[\]]*)\]\s*", re.DOTALL)


def placeholders() -> dict[str, str]:
    """The values a help text names in braces (``{reasons}``): known only when the code runs."""
    return {"reasons": ", ".join(known_reasons())}


def help_words(text: str, lang: Lang) -> str:
    """A help text marked ``N_`` in ``lang``, its ``{name}``s filled (``placeholders``)."""
    said = _(text, lang)
    for key, value in placeholders().items():
        said = said.replace("{" + key + "}", value)
    return said


def walk(command: Command) -> Iterator[Command]:
    """``command`` and every command under it."""
    yield command
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            yield from walk(sub)


def translate(root: Command, lang: Lang) -> None:
    """Every help text of the tree under ``root`` in ``lang``, and a help page's own words by
    a formatter that says them in ``lang`` (English: Click's as they are)."""
    for command in walk(root):
        if command.help:
            command.help = help_words(command.help, lang)
        if command.short_help:
            command.short_help = help_words(command.short_help, lang)
        help_option = command.get_help_option(Context(command))
        for param in [*command.params, *([help_option] if help_option else [])]:
            text = getattr(param, "help", None)
            if text:
                param.help = help_words(text, lang)  # type: ignore[attr-defined]
        if lang != "en":
            command.context_class = context_in(lang)


@cache
def context_in(lang: Lang) -> type[Context]:
    """A Click context whose help pages say Click's own words in ``lang``."""
    formatter = type(f"WordsFormatter_{lang}", (WordsFormatter,), {"lang": lang})
    return type(f"WordsContext_{lang}", (Context,), {"formatter_class": formatter})


class WordsFormatter(HelpFormatter):
    """Click's help formatter saying the headings, ``Usage:`` and an option's ``[required]``,
    ``[default: …]`` in ``lang``."""

    lang: Lang = "en"

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None:
            prefix = say(_HEADINGS["Usage"], self.lang) + ": "
        super().write_usage(prog, placeholder_words(args, self.lang), prefix)

    def write_heading(self, heading: str) -> None:
        known = _HEADINGS.get(heading)
        super().write_heading(say(known, self.lang) if known is not None else heading)

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        said = [
            (placeholder_words(term, self.lang), extras_words(text, self.lang))
            for term, text in rows
        ]
        super().write_dl(said, col_max, col_spacing)


def extras_words(text: str, lang: Lang) -> str:
    """An option's help with Click's ``[required]``, ``[default: 5]``, ``[env var: X]`` at its
    end in ``lang``; the values as they are."""
    found = _EXTRA.fullmatch(text)
    if found is None:
        return text
    parts = []
    for extra in found["extras"].split("; "):
        word, colon, value = extra.partition(": ")
        known = _EXTRAS.get(word)
        parts.append(say(known, lang) + colon + value if known is not None else extra)
    return f"{found['head']}{found['gap']}[{'; '.join(parts)}]"


class WordsGroup(TyperGroup):
    """The root of ``exchange``: its help, and every command's under it, in the language of
    the environment (``EXCHANGE_LANG`` or the locale) before the command line is parsed."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        translate(self, lang_of_environment())
        return super().main(*args, **kwargs)
