"""Two operators pressing Pause, or Resume, at the same moment (the workbench's buttons,
``exchange pause``/``resume`` on two hosts): on PostgreSQL the second one's write used to meet
the primary key of ``delivery_pause`` (a 500 in the workbench, a traceback at the command);
SQLite has one writer at a time. Each test holds the first operator's transaction open, its row
written and not committed, while the second one writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import delivery_pause
from exchange.queue import control

AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def race(
    engine: Engine, first: Callable[[Connection], Any], second: Callable[[Connection], Any]
) -> dict[str, Any]:
    """``first`` in a transaction held open half a second while ``second`` runs in another."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite: one writer at a time, no race")
    found: dict[str, Any] = {}

    def other() -> None:
        try:
            with transaction(engine) as connection:
                found["second"] = second(connection)
        except Exception as exc:  # what the old check-then-insert met
            found["failed"] = exc

    with engine.connect() as connection:
        with connection.begin():
            found["first"] = first(connection)
            thread = threading.Thread(target=other)
            thread.start()
            time.sleep(0.5)
            assert thread.is_alive(), found  # waits for the first operator's commit
        thread.join(30)
    return found


def rows(engine: Engine) -> dict[str, tuple[str, str]]:
    with transaction(engine, read_only=True) as connection:
        return {
            name: (operator, note)
            for name, operator, note in connection.execute(
                select(delivery_pause.c.name, delivery_pause.c.operator, delivery_pause.c.note)
            )
        }


def test_two_operators_pausing_at_once_keep_the_first_pause(engine: Engine) -> None:
    found = race(
        engine,
        lambda c: control.pause(c, operator="anna", note="price audit", now=AT),
        lambda c: control.pause(c, operator="boris", note="site down", now=AT + timedelta(1)),
    )
    assert {"first": True, "second": False} == found
    assert {"delivery": ("anna", "price audit")} == rows(engine)


def test_two_operators_resuming_at_once_keep_the_later_resume(engine: Engine) -> None:
    """Nothing paused by an operator: Resume restarts the loops the site's refusal of a write
    paused (``resumed_at``), the case where both operators' DELETE found no row to wait on."""
    found = race(
        engine,
        lambda c: control.resume(c, operator="anna", note="site is back", now=AT),
        lambda c: control.resume(c, operator="boris", note="back", now=AT + timedelta(1)),
    )
    assert {"first": False, "second": False} == found
    assert {control.resumed_name(None): ("boris", "back")} == rows(engine)
