"""``exchange --help`` speaks the operator's language (contract 15, "Words"): the Russian runbook
sends operators to it, so under a Russian locale every command's help, its options' and
arguments' help and Click's own words of the page are Russian; under an English locale the
help reads as it always did."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import typer
from clitools import Cli, describe
from typer._click.core import Command, Context
from typer.core import TyperGroup

from exchange.cli import app
from exchange.cli.helpwords import help_words
from exchange.i18n import _

RUSSIAN = {"LANG": "ru_RU.UTF-8"}
ENGLISH = {"LANG": "en_US.UTF-8"}


def commands(
    command: Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Command]]:
    """Every command of the tree with the words that call it (``()`` for ``exchange``)."""
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))


def help_texts(command: Command) -> list[str]:
    """The English help the code gives a command: its own, its options' and arguments', and
    the --help option's (Click's)."""
    texts = [command.help] if command.help else []
    help_option = command.get_help_option(Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        text = getattr(param, "help", None)
        if text:
            texts.append(text)
    return texts


def tree() -> list[tuple[tuple[str, ...], list[str]]]:
    """The English tree as the code builds it, before any translation."""
    return [(path, help_texts(c)) for path, c in commands(typer.main.get_command(app))]


def bare(text: str) -> str:
    """Text as a help page wraps it: whitespace (and where lines were wrapped) ignored."""
    return re.sub(r"\s+", "", text)


TREE = tree()


def test_the_tree_has_the_commands_the_runbook_names() -> None:
    """The walk below is only as good as the tree: it must reach the nested commands."""
    paths = {path for path, _texts in TREE}
    assert {(), ("status",), ("verify",), ("quarantine", "retry"), ("operator", "add")} <= paths


@pytest.mark.parametrize("path,texts", TREE, ids=[" ".join(p) or "exchange" for p, _t in TREE])
def test_every_help_text_is_russian_under_a_russian_locale(
    cli: Cli, path: tuple[str, ...], texts: list[str]
) -> None:
    result = cli(*path, "--help", env=RUSSIAN)
    assert 0 == result.returncode, describe(result)
    page = bare(result.stdout)
    untranslated = [text for text in texts if _(text, "ru") == text]
    assert [] == untranslated, "each help text needs its Russian in ru/LC_MESSAGES/exchange.po"
    english = [text for text in texts if bare(help_words(text, "en")) in page]
    assert [] == english, describe(result)
    missing = [text for text in texts if bare(help_words(text, "ru")) not in page]
    assert [] == missing, describe(result)
    for heading in ("Usage:", "Options:", "Commands:", "Arguments:", "[required]", "[default:"):
        assert heading not in result.stdout, describe(result)
    assert result.stdout.startswith("Использование: exchange"), describe(result)
    assert "Параметры:" in result.stdout, describe(result)
    # Click's placeholders say the kind of value in Russian too (the walk-through's «[OPTIONS]»,
    # «<int range>»); an option's names and typed choices stay as they are typed.
    placeholders = re.findall(
        r"\[OPTIONS\]|COMMAND \[ARGS\]|<(?:str|int|float|file|dir|path)[^>]*>|<list\[str\]>",
        result.stdout,
    )
    assert [] == placeholders, describe(result)


@pytest.mark.parametrize("path,texts", TREE, ids=[" ".join(p) or "exchange" for p, _t in TREE])
def test_the_help_stays_english_under_an_english_locale(
    cli: Cli, path: tuple[str, ...], texts: list[str]
) -> None:
    result = cli(*path, "--help", env=ENGLISH)
    assert 0 == result.returncode, describe(result)
    page = bare(result.stdout)
    missing = [text for text in texts if bare(help_words(text, "en")) not in page]
    assert [] == missing, describe(result)
    assert result.stdout.startswith("Usage: exchange"), describe(result)
    assert "Options:" in result.stdout, describe(result)
    assert not re.search("[А-Яа-яЁё]", result.stdout), describe(result)


def test_the_english_help_reads_as_before(cli: Cli) -> None:
    """Click's words and layout, and a help text's value filled in (the reasons --reason
    takes), exactly as the English page printed them before the help became messages."""
    result = cli("quarantine", "retry", "--help", env=ENGLISH)
    assert result.stdout.startswith(
        "Usage: exchange quarantine retry [OPTIONS] [message_ids]...\n\n"
        "  Replay with the same message_id (ids, or filters: shown first, done with\n"
        "  --yes).\n\nArguments:\n  message_ids... <list[str]>  Messages to replay.\n\n"
        "Options:\n  --kind <str>         Only this kind (one of EXCHANGE_KINDS).\n"
    ), describe(result)
    assert "  --reason <str>       Only this reason: channel-removed, channel-rule,\n" in (
        result.stdout
    )
    assert "  --help               Show this message and exit.\n" in result.stdout
    demo = cli("demo", "--help", env=ENGLISH)
    assert "How many SKUs.  [default: 1000; 1<=x<=100000]" in demo.stdout, describe(demo)


def test_a_help_page_never_breaks_a_reason_code_at_its_hyphens(cli: Cli) -> None:
    """The codes --reason takes are typed back by the operator: each stands whole on one line
    (Click's wrapper broke ``not-for-this-shop`` into ``not-for-this-`` and ``shop``)."""
    from exchange.ops.find import known_reasons

    for env in (ENGLISH, RUSSIAN):
        result = cli("quarantine", "retry", "--help", env=env)
        words = set(result.stdout.split())
        for reason in known_reasons():
            assert reason in words or f"{reason}," in words, (reason, describe(result))


def test_clicks_own_words_are_russian_under_a_russian_locale(cli: Cli) -> None:
    demo = cli("demo", "--help", env=RUSSIAN)
    assert "Сколько артикулов.  [по\xa0умолчанию: 1000; 1<=x<=100000]" in demo.stdout, describe(
        demo
    )
    cancel = cli("quarantine", "cancel", "--help", env=RUSSIAN)
    assert "[обязательно]" in cancel.stdout and "Аргументы:" in cancel.stdout, describe(cancel)
    top = cli("--help", env=RUSSIAN)
    assert "Команды:" in top.stdout, describe(top)


def test_resume_help_speaks_of_the_site_or_marketplace(cli: Cli) -> None:
    """Review 33 item 2: ``exchange resume --help`` said a pause «no answer of the site can
    end» to a seller whose paused channel was a marketplace's (a Yandex Market key that may
    read but not write): it names either."""
    for env, words in ((RUSSIAN, "сайта или площадки"), (ENGLISH, "the site or marketplace")):
        result = cli("resume", "--help", env=env)
        assert words in " ".join(result.stdout.split()), describe(result)
