"""A mistake on the command line said in the operator's language (contract 15, "Words"):
Typer's own messages ("Invalid value for …", "No such option", "Missing option") are English
and carry no catalog of their own (its vendored Click has no gettext), so under a Russian
locale ``exchange.cli.main`` catches the usage error and says it here, one line, exit 2.
"""

from __future__ import annotations

import re

from typer._click.exceptions import (
    BadParameter,
    MissingParameter,
    NoSuchOption,
    UsageError,
)

from exchange.i18n import Lang, _

_NO_SUCH_COMMAND = re.compile(r"No such command (?P<name>'.*')\.")
_EXTRA = re.compile(r"Got unexpected extra argument(?:s|\(s\))? \((?P<args>.*)\)")
_NOT_VALID = re.compile(r"(?:Value )?(?P<value>'.*') is not (?:a valid|one of) (?P<what>.*?)\.?")
_NEEDS_VALUE = re.compile(r"Option (?P<name>'.*') requires an argument\.")


def _hint(error: BadParameter) -> str:
    hint = error.param_hint if error.param_hint is not None else None
    if hint is None and error.param is not None:
        hint = error.param.get_error_hint()
    if hint is None:
        return ""
    return hint if isinstance(hint, str) else " / ".join(repr(h) for h in hint)


def _value_words(message: str, lang: Lang) -> str:
    """A type's complaint about a value («'abc' — не число»); any other message as it is
    (the service's own parsers already speak the language)."""
    found = _NOT_VALID.fullmatch(message)
    if found:
        return _("{value} is not a valid {what}", lang).format(**found.groupdict())
    return message


def usage_words(error: UsageError, lang: Lang) -> str:
    """``error`` as one line in ``lang``, with where to read the command's help."""
    if isinstance(error, MissingParameter):
        said = _("required parameter {name} is missing", lang).format(name=_hint(error))
    elif isinstance(error, BadParameter):
        said = _("wrong value of {name}: {message}", lang).format(
            name=_hint(error), message=_value_words(error.message, lang)
        )
    elif isinstance(error, NoSuchOption):
        said = _("no such option: {name}", lang).format(name=error.option_name)
        if error.possibilities:
            said += " " + _("(perhaps: {options})", lang).format(
                options=", ".join(sorted(error.possibilities))
            )
    elif found := _NO_SUCH_COMMAND.fullmatch(error.message):
        said = _("no such command: {name}", lang).format(**found.groupdict())
    elif found := _EXTRA.fullmatch(error.message):
        said = _("unexpected extra arguments: {args}", lang).format(**found.groupdict())
    elif found := _NEEDS_VALUE.fullmatch(error.message):
        said = _("option {name} needs a value", lang).format(**found.groupdict())
    else:
        said = error.format_message()
    command = error.ctx.command_path if error.ctx is not None else "exchange"
    return _("error: {said}; help: {command} --help", lang).format(said=said, command=command)
