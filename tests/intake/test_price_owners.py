"""One (sku, price type), one aggregate (contract 15; issue 33, item 13).

``ALIAS-1`` (v1, 50.00) and ``ALIAS-1/retail`` (v1, 100.00) name the same SKU and price type:
the first aggregate accepted for the pair owns it, and a row naming the pair under another
aggregate is ``invalid-contract``, naming the owner, whichever way it came in (the staging
table, the JSON intake and the brokers, which stage through ``intents.stage_intents``, and 1C's
packages). The primary key of ``price_owners`` decides between two intakes at once. On SQLite
and on PostgreSQL.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import price_owners
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.testing import fast_settings, one_channel_messages
from exchange.domain.clock import FakeClock
from exchange.domain.policy import KindPolicies
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.errors import OperatorError
from exchange.intake import staging_table as intake
from exchange.intake.commerceml.publish import import_file
from exchange.intake.contracts import StagingRow, validate
from exchange.intake.intents import stage_intents
from exchange.intake.sources import common as sources
from exchange.intake.sources.common import Received
from exchange.intake.staging_store import _store
from exchange.ops import quarantine
from exchange.queue import lease, record
from exchange.settings import Settings
from exchange.words import detail_words
from tests.intake.test_price_identity import (
    INVALID,
    MESSAGE,
    outcomes,
    price,
    record_of,
    take,
)

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url)


def owner(engine: Engine, sku: str, price_type: str = "retail") -> str | None:
    with transaction(engine, read_only=True) as c:
        return c.execute(
            select(price_owners.c.aggregate).where(
                price_owners.c.sku == sku, price_owners.c.price_type == price_type
            )
        ).scalar()


def test_a_pair_owned_by_one_aggregate_is_refused_under_another_naming_the_owner(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price("ALIAS-1", 1, "50.00")])
    take(engine, settings, clock, [price("ALIAS-1/retail", 1, "100.00")])

    assert {1: MESSAGE, 2: INVALID} == outcomes(engine)
    detail = record_of(engine, 2)["last_error"]
    for words in ("sku 'ALIAS-1'", "price type 'retail'", "belongs to aggregate 'ALIAS-1'"):
        assert words in detail, detail
    assert "ALIAS-1" == owner(engine, "ALIAS-1")
    assert "принадлежит агрегату 'ALIAS-1'" in detail_words(detail)  # the operator's page
    # The owner goes on: its next version is a message as before.
    take(engine, settings, clock, [price("ALIAS-1", 2, "55.00")])
    assert MESSAGE == outcomes(engine)[3]


def test_within_one_chunk_the_first_row_that_names_a_pair_owns_it(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    rows = [
        price("ALIAS-1/retail", 1, "100.00"),
        price("ALIAS-1", 1, "50.00"),
        price("ALIAS-1", 2, "51.00", "wholesale"),  # refused by its aggregate's own pair first
        price("ALIAS-1/wholesale", 1, "40.00", "wholesale"),
    ]
    take(engine, settings, clock, rows)

    assert {1: MESSAGE, 2: INVALID, 3: INVALID, 4: MESSAGE} == outcomes(engine)
    assert "belongs to aggregate 'ALIAS-1/retail'" in record_of(engine, 2)["last_error"]
    # A row refused for its aggregate's pair claims nothing: ALIAS-1/wholesale owns wholesale.
    assert "ALIAS-1/wholesale" == owner(engine, "ALIAS-1", "wholesale")


def test_an_intent_from_the_json_intake_or_a_broker_is_held_to_the_owner(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # The JSON intake and the brokers' sources stage through ``stage_intents``; the owner is a
    # rule of the queue's state, judged by intake as for a staging row.
    take(engine, settings, clock, [price("ALIAS-1", 1, "50.00")])
    intent = {
        "kind": "price",
        "aggregate": "ALIAS-1/retail",
        "aggregate_version": 1,
        "payload": {"sku": "ALIAS-1", "price": "100.00", "price_type": "retail"},
    }
    results = stage_intents(engine, None, settings.kinds, [intent_row(intent)])
    assert ["staged"] == [r["status"] for r in results]
    intake.take(engine, None, settings.kinds, clock.now())

    assert INVALID == outcomes(engine)[2]
    assert "belongs to aggregate 'ALIAS-1'" in record_of(engine, 2)["last_error"]


def test_a_1c_package_naming_an_owned_pair_under_its_own_aggregate_is_refused(
    engine: Engine, settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    # 1C's own rows named the aggregate ``ALIAS-1``; the standard exchange names it
    # ``ALIAS-1/retail``: the package's price of the pair is a record naming the owner.
    take(engine, settings, clock, [price("ALIAS-1", 1, "50.00")])
    path = tmp_path / "offers.xml"
    retail = CmlType("t-retail", "Розничная", "руб")
    path.write_bytes(
        offers_xml(
            Package(types=[retail], offers=[CmlOffer("ALIAS-1", [CmlPrice("t-retail", "60")])])
        )
    )
    outcome = import_file(
        engine, path, name=path.name, price_types={"Розничная": "retail"}, sku_mode="id"
    )
    assert "staged" == outcome.outcome, outcome
    intake.take(engine, None, settings.kinds, clock.now())

    assert INVALID == outcomes(engine)[2]
    assert "belongs to aggregate 'ALIAS-1'" in record_of(engine, 2)["last_error"]


def test_an_intent_from_a_broker_message_is_held_to_the_owner(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price("ALIAS-1", 1, "50.00")])
    body = {
        "kind": "price",
        "aggregate": "ALIAS-1/retail",
        "aggregate_version": 1,
        "payload": {"sku": "ALIAS-1", "price": "100.00", "price_type": "retail"},
    }
    received = Received("m-1", json.dumps(body).encode(), "queue prices, message m-1")
    taken = sources.take(
        engine, None, settings.kinds, [received], source="rabbitmq", max_items=100, max_bytes=2**24
    )
    assert 1 == taken.staged
    intake.take(engine, None, settings.kinds, clock.now())

    assert INVALID == outcomes(engine)[2]
    assert "belongs to aggregate 'ALIAS-1'" in record_of(engine, 2)["last_error"]


def intent_row(item: dict[str, Any]) -> dict[str, Any]:
    from exchange.intake.intents import intent_row as row

    made = row(item)
    assert isinstance(made, dict), made
    return made


def _quarantine_by_the_site(engine: Engine, settings: Settings, clock: FakeClock) -> str:
    """Claim every waiting message and record the site's 422 for it: quarantined."""
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=10,
            lease_seconds=30,
            max_attempts=3,
            kinds=settings.policies,
        )
    refused = Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        "422 Unprocessable",
        reason="http-422",
        http_status=422,
    )
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, refused) for m in batch.messages],
            kinds=KindPolicies.of({}),
        )
    [message] = batch.messages
    return message.message_id


def test_the_operators_scenario_a_quarantined_alias_retried_cannot_overwrite_a_newer_price(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # The case: ALIAS-1 (v1, 50.00) refused 422 and quarantined, then ALIAS-1/retail
    # (v1, 100.00) delivered, then the first retried: 50.00 on the shop. Now the second is never
    # a message: the retry of the first puts on the shop the only price the pair has.
    take(engine, settings, clock, [price("ALIAS-1", 1, "50.00")])
    first = _quarantine_by_the_site(engine, settings, clock)
    take(engine, settings, clock, [price("ALIAS-1/retail", 1, "100.00")])
    assert INVALID == outcomes(engine)[2]
    with transaction(engine, read_only=True) as c:
        sendable = c.execute(
            select(messages.c.aggregate).where(messages.c.rejected.is_(False))
        ).scalars()
        assert ["ALIAS-1"] == list(sendable)

    # Reversed: the alias came second and is a record; a record is never replayed.
    alias = record_of(engine, 2)["message_id"]
    with pytest.raises(OperatorError), transaction(engine) as c:
        quarantine.retry(
            c,
            [alias],
            quarantine.Filters(),
            operator="op",
            note=None,
            now=clock.now(),
            dry_run=False,
        )
    with transaction(engine) as c:
        result = quarantine.retry(
            c,
            [first],
            quarantine.Filters(),
            operator="op",
            note=None,
            now=clock.now(),
            dry_run=False,
        )
    assert [first] == result.touched


def test_two_intakes_claiming_one_pair_at_once_leave_one_owner(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # PostgreSQL: two workers store chunks naming one new pair under two aggregates at once;
    # the second's claim waits for the first's commit and the first owns it. SQLite has one
    # writer: the second chunk is stored after the first, with the same verdict.
    rows = [
        StagingRow(
            1, "price", "ALIAS-1", 1, '{"sku":"ALIAS-1","price":"50.00"}', "1", None, clock.now()
        ),
        StagingRow(
            2,
            "price",
            "ALIAS-1/retail",
            1,
            '{"sku":"ALIAS-1","price":"100.00","price_type":"retail"}',
            "1",
            None,
            clock.now(),
        ),
    ]
    verdicts = [validate(row, settings.kinds) for row in rows]
    if not is_postgres(engine):
        for verdict in verdicts:
            with transaction(engine) as c:
                _store(c, [verdict], clock.now(), range(1, 2))
    else:
        first_in = threading.Event()
        reports: dict[str, Any] = {}

        def second() -> None:
            first_in.wait(10)
            try:
                with transaction(engine) as c:
                    reports["second"] = _store(c, [verdicts[1]], clock.now(), range(2, 3))
            except Exception as exc:  # told in the main thread
                reports["second"] = exc

        other = threading.Thread(target=second)
        other.start()
        with transaction(engine) as c:
            reports["first"] = _store(c, [verdicts[0]], clock.now(), range(1, 2))
            first_in.set()
            # Hold the transaction until the second intake waits on the pair's key.
            for _ in range(500):
                c.execute(text("SELECT pg_stat_clear_snapshot()"))  # one per transaction else
                waiting = c.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    )
                ).scalar()
                if waiting:
                    break
                threading.Event().wait(0.02)
            assert waiting, "the second intake did not wait on the first's claim"
        other.join(10)
        assert (1, 0) == (reports["first"].messages, reports["first"].rejected)
        assert (0, 1) == (reports["second"].messages, reports["second"].rejected)
    assert "ALIAS-1" == owner(engine, "ALIAS-1")
    with transaction(engine, read_only=True) as c:
        refused = c.execute(
            select(messages.c.last_error).where(messages.c.rejected.is_(True))
        ).scalar_one()
    assert "belongs to aggregate 'ALIAS-1'" in refused
