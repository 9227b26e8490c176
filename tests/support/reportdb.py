"""A quarantine built by the real pipeline, on SQLite and on PostgreSQL: staging rows taken by
intake (rejected rows), and messages leased and recorded with the site's 422 (as
tests/queue/test_lease.py does), one of them superseded after quarantine by a delivered version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reporttools import CYRILLIC, HYPERLINK, LONG, SCRIPT, TOKEN
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.testing import posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.identity import message_id
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.queue import lease, record
from exchange.settings import Settings

PASSWORD = "db-pass-8c1e4f"
MASK_FIELDS = ["api_key", "password"]
SENT_AFTER_S = 5  # between a lease and its answer, so that "last attempt" is the answer


@dataclass(frozen=True)
class Built:
    """What the ``quarantine`` fixture left in the database."""

    superseded: str = message_id("price", "SKU-1", 1)
    refused: str = message_id("price", "SKU-2", 1)
    posting: str = message_id("financial_posting", "D-1", 1)
    delivered: str = message_id("price", "SKU-1", 2)


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def refused(detail: str) -> Decision:
    return Decision(
        Event.QUARANTINED, State.QUARANTINED, detail, reason="http-422", http_status=422
    )


DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="R-1")


def settle(
    engine: Engine, settings: Settings, clock: FakeClock, decisions: dict[str, Decision]
) -> None:
    """Lease what is due, let the site take a moment, record each aggregate's answer."""
    strict = settings.policies
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=100,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=strict,
        )
    assert {m.aggregate for m in batch.messages} == set(decisions)
    clock.advance(SENT_AFTER_S)
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, decisions[m.aggregate]) for m in batch.messages],
            kinds=strict,
        )


def add_refused_price(engine: Engine, settings: Settings, clock: FakeClock, sku: str) -> str:
    """One more quarantined message (a change of the quarantine)."""
    take(engine, settings, clock, [price_row(sku, 1)])
    settle(engine, settings, clock, {sku: refused("422 Unprocessable Entity")})
    return message_id("price", sku, 1)


def build_quarantine(engine: Engine, settings: Settings, clock: FakeClock) -> Built:
    """Six entries: three refused by the site (http-422), one of them since superseded by a
    delivered version, one carrying the site token and a password in masked payload fields;
    three rejected staging rows with markup, formulas, Cyrillic and a 10,000-character value.
    """
    secret_posting = posting_row("D-1", 1)
    secret_posting["payload"] = json.dumps(
        {
            "document": "D-1",
            "line": 1,
            "amount": "10.00",
            "api_key": TOKEN,
            "auth": {"Password": PASSWORD},
        }
    )
    take(engine, settings, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1), secret_posting])
    settle(
        engine,
        settings,
        clock,
        {
            "SKU-1": refused("422 Unprocessable Entity: price below cost"),
            "SKU-2": refused(f"422 Unprocessable Entity: {SCRIPT}"),
            "D-1": refused(f'422 Unprocessable Entity: {{"api_key": "{TOKEN}"}}'),
        },
    )
    clock.advance(3600)
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    settle(engine, settings, clock, {"SKU-1": DELIVERED})
    clock.advance(3600)
    take(
        engine,
        settings,
        clock,
        [
            raw_row(
                "stock",
                HYPERLINK,
                1,
                json.dumps({"note": SCRIPT, "long": LONG, "nul": "a\x00b"}, ensure_ascii=False),
                source_ref=f"{SCRIPT} {CYRILLIC}",
            ),
            raw_row("price", "+1", 1, "{not json", source_ref="=1+1"),
            raw_row("stock", "-1", 2, "{}", source_ref="@SUM(A1:A9)"),
        ],
    )
    clock.advance(600)
    return Built()
