"""Contract 1 "Nothing is dropped silently" as ``exchange run`` logs it: a take-in that made
messages of a kind no registered channel takes (contract 13: they get no delivery) says so in
one warning per kind, with the count and the command that gives them to a channel; a take-in
of kinds every channel takes, or with nothing new of an untaken kind, says nothing."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import Engine, update

from exchange.db.engine import transaction
from exchange.db.schema import channels
from exchange.dev.testing import fast_settings, posting_row, price_row, stage
from exchange.domain.clock import FakeClock, FakeMonotonic, SystemClock
from exchange.worker.intake import IntakeService


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "no channel takes" in r.getMessage()
    ]


def test_a_take_in_of_postings_no_channel_takes_warns_once_per_kind(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with transaction(engine) as connection:  # the one channel takes prices only now
        connection.execute(update(channels).values(takes='["price"]'))
    service = IntakeService(fast_settings(db_url), engine, FakeMonotonic(FakeClock()))
    stage(engine, [posting_row("ACC-16", 1), posting_row("ACC-16", 2), price_row("SKU-1", 1)])
    with caplog.at_level(logging.WARNING, logger="exchange.worker"):
        report = service.take(SystemClock().now())
    assert report.messages == 3
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("intake: 2 financial_posting message(s) taken that no channel takes")
    assert "exchange channels seed NAME --from financial_posting.ACC-16.v1." in said[0]
    # the next take-in counts its own messages only
    caplog.clear()
    stage(engine, [price_row("SKU-2", 1)])
    with caplog.at_level(logging.WARNING, logger="exchange.worker"):
        service.take(SystemClock().now())
    assert _warnings(caplog) == []


def test_a_take_in_every_channel_takes_says_nothing(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    service = IntakeService(fast_settings(db_url), engine, FakeMonotonic(FakeClock()))
    stage(engine, [posting_row("ACC-17", 1)])
    with caplog.at_level(logging.WARNING, logger="exchange.worker"):
        service.take(SystemClock().now())
    assert _warnings(caplog) == []
