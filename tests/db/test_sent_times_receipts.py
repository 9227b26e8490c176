"""``DbSentTimes.sending`` and ``.unmark``: before a request leaves, the in-flight delivery
gets its receipt; a send that never left gives back the receipt from before, only where the
delivery still holds the send's mark. Both write through one statement (code debt, issue 32
mpminor item 10: the subquery and update were written twice)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.db.sent_times import DbSentTimes
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take


def _receipts(engine: Engine) -> dict[str, str | None]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, deliveries.c.receipt).join(
                messages, messages.c.id == deliveries.c.message_pk
            )
        )
        return {sku: receipt for sku, receipt in rows}


def _ids(engine: Engine) -> dict[str, str]:
    with transaction(engine, read_only=True) as connection:
        return dict(connection.execute(select(messages.c.aggregate, messages.c.message_id)).all())


def test_sending_marks_in_flight_deliveries_and_unmark_gives_back_what_was_before(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage(engine, [price_row(s, 1) for s in ("S1", "S2", "S3")])
    take(engine, None, dict(DEFAULT_KINDS), SystemClock().now())
    ids = _ids(engine)
    with transaction(engine) as connection:
        connection.execute(
            update(deliveries)
            .where(
                deliveries.c.message_pk.in_(
                    select(messages.c.id).where(messages.c.aggregate != "S3")
                )
            )
            .values(state="in_progress")
        )
    sent = DbSentTimes(engine)
    written: list[Any] = []
    one_statement = sent._set_receipts  # the one statement both write through
    monkeypatch.setattr(
        sent, "_set_receipts", lambda r, which: (written.append(dict(r)), one_statement(r, which))
    )
    sent.sending({ids["S1"]: "mark:1", ids["S2"]: "mark:2", ids["S3"]: "mark:3"})
    assert _receipts(engine) == {"S1": "mark:1", "S2": "mark:2", "S3": None}  # S3 not in flight
    sent.unmark({ids["S1"]: None, ids["S2"]: "before"}, "mark:2")
    assert _receipts(engine) == {"S1": "mark:1", "S2": "before", "S3": None}  # S1: not mark:2
    assert len(written) == 2
