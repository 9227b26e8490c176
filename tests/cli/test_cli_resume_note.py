"""``exchange resume`` takes an optional ``--note`` (review mpadvice item 10: ``pause`` asks
why, ``resume`` took no word at all): the note is kept with who resumed and when, in the
resume's record, as a pause keeps its own."""

from __future__ import annotations

from clitools import Cli, describe
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import delivery_pause
from exchange.queue.control import resumed_name


def test_resume_keeps_its_note(cli: Cli, db_url: str, engine: Engine) -> None:
    paused = cli("pause", "--note", "the shop moves", db=db_url)
    assert paused.returncode == 0, describe(paused)
    resumed = cli("resume", "--note", "the shop moved", db=db_url)
    assert resumed.returncode == 0, describe(resumed)
    with transaction(engine) as connection:
        row = connection.execute(
            select(delivery_pause).where(delivery_pause.c.name == resumed_name(None))
        ).one()
    assert row.note == "the shop moved" and row.operator, row
    plain = cli("resume", db=db_url)  # the note stays optional
    assert plain.returncode == 0, describe(plain)
