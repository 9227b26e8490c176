"""The runbooks say what to do when one shop is down and the others deliver (issue 31, contract
13): a section in English and in Russian that shows how to see it, pause that channel and when to
drop it; every ``exchange`` command it shows is one the command line takes, with those options
(a runbook that sends an operator to a command that does not exist is worse than none)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer._click.core import Command
from typer.core import TyperGroup

from exchange.cli import app

DOCS = Path(__file__).resolve().parents[2] / "docs"
SECTIONS = {
    "runbook.md": "## One shop is down, the others deliver",
    "runbook.ru.md": "## Один магазин недоступен, остальные получают цены",
}


def section(page: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    head = SECTIONS[page]
    assert head in text, f"{page} has no section {head!r}"
    body = text.split(head, 1)[1]
    return body.split("\n## ", 1)[0]


def shown_commands(text: str) -> list[list[str]]:
    """``exchange …`` as the section shows them: in code spans and in code blocks."""
    found = re.findall(r"`(exchange [^`]+)`", text)
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        found += [line.strip() for line in block.splitlines() if line.startswith("exchange ")]
    return [shlex.split(command.split("#")[0]) for command in found]


def resolve(words: list[str]) -> tuple[Command, list[str]]:
    """The command ``words`` call and the options given to it."""
    command: Command = typer.main.get_command(app)
    rest = words[1:]
    while isinstance(command, TyperGroup) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    assert not isinstance(command, TyperGroup), f"{' '.join(words)}: not a command"
    return command, [word for word in rest if word.startswith("--")]


@pytest.mark.parametrize("page", list(SECTIONS))
def test_the_section_shows_how_to_see_it_pause_the_channel_and_drop_it(page: str) -> None:
    text = section(page)
    for needed in (
        "exchange status",
        "breaker:shop2",
        "exchange pause --channel shop2",
        "exchange resume --channel shop2",
        "exchange channels drop shop2",
        "exchange channels seed shop2",
        "channel=shop2",
        "/quarantine?channel=shop2",
        "exchange_breaker_state",
    ):
        assert needed in text, (page, needed)


@pytest.mark.parametrize("page", list(SECTIONS))
def test_every_command_the_section_shows_exists_with_its_options(page: str) -> None:
    commands = shown_commands(section(page))
    assert len(commands) >= 6
    for words in commands:
        command, options = resolve(words)
        known = {name for param in command.params for name in getattr(param, "opts", [])}
        assert set(options) <= known, (words, sorted(known))
