"""Lengths, every way in, both databases (contract 15; issue 33, item 11).

``kind`` ≤ 64, ``aggregate`` ≤ 200, ``schema_version`` ≤ 32, ``source_ref`` and ``name`` ≤ 500
characters; longer is ``invalid-contract`` for that intent alone, never a failure of its chunk,
request or package. A 1C package's offer whose id makes an aggregate over 200 characters failed
the whole package on PostgreSQL (StringDataRightTruncation): it is one record now, counted in
the answer to 1C, and the rest is staged. A package's own source_ref (a file name) is
shortened with «…». The staging table's own lengths are checked in
``test_intake_outside.py`` (a widened column); here the name, the JSON intake and the brokers
(``intent_row`` and ``stage_intents``, which both take), and 1C's packages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import cml_exchanges, cml_packages, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.testing import one_channel_messages, raw_row, stage
from exchange.intake.commerceml.publish import exchange_started, import_file
from exchange.intake.intents import items_of, stage_intents
from exchange.intake.sources import common as sources
from exchange.intake.sources.common import Received
from exchange.intake.staging_table import take
from exchange.settings import load_settings
from exchange.words import onec_words

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

RETAIL = CmlType("t-retail", "Розничная", "руб")
KINDS = load_settings(database_url="sqlite://").kinds
LONG_ID = "Г" * 250  # an Ид 1C may well write: its aggregate is 257 characters


def records(engine: Engine) -> dict[str, tuple[bool, str | None, str]]:
    take(engine, None, KINDS, datetime.now(UTC))
    with transaction(engine, read_only=True) as c:
        return {
            aggregate: (bool(rejected), reason, error or "")
            for aggregate, rejected, reason, error in c.execute(
                select(
                    messages.c.aggregate,
                    messages.c.rejected,
                    messages.c.reason,
                    messages.c.last_error,
                )
            )
        }


def _package(tmp_path: Path, offers: list[CmlOffer]) -> Path:
    path = tmp_path / "offers.xml"
    path.write_bytes(offers_xml(Package(types=[RETAIL], offers=offers)))
    return path


@pytest.mark.parametrize("sku_mode", ["id", "article"])
def test_an_offer_with_an_over_long_id_is_one_record_and_the_rest_of_the_package_is_staged(
    engine: Engine, tmp_path: Path, sku_mode: str
) -> None:
    long = CmlOffer(
        LONG_ID if sku_mode == "id" else "p-1",
        [CmlPrice("t-retail", "10.00")],
        article=LONG_ID if sku_mode == "article" else None,
    )
    short = CmlOffer("p-2", [CmlPrice("t-retail", "20.00")], article="A-2")
    path = _package(tmp_path, [long, short])

    outcome = import_file(
        engine,
        path,
        name=path.name,
        price_types={"Розничная": "retail"},
        sku_mode=sku_mode,  # type: ignore[arg-type]
    )

    assert ("staged", 2, 1) == (outcome.outcome, outcome.intents, outcome.not_sent), outcome
    assert "longer than 100 characters" in outcome.detail
    assert "длиннее 100 символов: 1" in onec_words(outcome.detail)
    found = records(engine)
    kept = LONG_ID[:192] + "…/retail"  # the record's aggregate: the column's 200, cut with «…»
    assert {kept, "p-2/retail" if sku_mode == "id" else "A-2/retail"} == set(found)
    rejected, reason, said = found[kept]
    assert (True, "invalid-contract") == (rejected, reason)
    assert "sku: must be 1 to 100 characters" in said


def test_a_packages_own_source_ref_is_its_file_name_shortened_with_an_ellipsis(
    engine: Engine, tmp_path: Path
) -> None:
    path = _package(tmp_path, [CmlOffer("p-1", [CmlPrice("t-retail", "1.00")])])
    name = "выгрузка-" + "ц" * 600 + ".xml"

    outcome = import_file(
        engine, path, name=name, price_types={"Розничная": "retail"}, sku_mode="id"
    )
    exchange_started(engine, "exchange-1", name)

    assert "staged" == outcome.outcome, outcome
    with transaction(engine, read_only=True) as c:
        refs = {
            c.execute(select(staging.c.source_ref)).scalar_one(),
            c.execute(select(cml_packages.c.source_ref)).scalar_one(),
        }
        filename = c.execute(select(cml_exchanges.c.filename)).scalar_one()
    [ref] = refs
    assert 500 == len(ref) and ref.startswith("1C exchange выгрузка-ццц")
    assert ref.endswith("… 2026-12-01T10:00:00"), ref[-40:]
    assert 500 == len(filename) and filename.endswith("…")
    assert {"p-1/retail": (False, None, "")} == records(engine)


def test_a_staging_row_whose_name_is_longer_than_500_is_refused_alone(engine: Engine) -> None:
    if is_postgres(engine):  # the column holds 500: only a widened one lets more in
        with transaction(engine) as c:
            c.execute(text("ALTER TABLE staging_intents ALTER COLUMN name TYPE TEXT"))
    payload = json.dumps({"sku": "S-1", "price": "1.00"})
    stage(
        engine,
        [
            {**raw_row("price", "S-1", 1, payload), "name": "Н" * 501},
            {**raw_row("price", "S-2", 1, payload.replace("S-1", "S-2")), "name": "Н" * 500},
        ],
    )
    found = records(engine)

    assert (False, None) == found["S-2"][:2]
    assert (True, "invalid-contract") == found["S-1"][:2]
    assert "name is too long: 501 characters" in found["S-1"][2]


def _intent(**over: Any) -> dict[str, Any]:
    return {
        "kind": "price",
        "aggregate": "S-1",
        "aggregate_version": 1,
        "payload": {"sku": "S-1", "price": "1.00"},
        **over,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kind", "k" * 65),
        ("aggregate", "a" * 201),
        ("schema_version", "1" * 33),
        ("source_ref", "r" * 501),
        ("name", "n" * 501),
    ],
)
def test_an_intent_from_the_json_intake_or_a_broker_longer_than_the_contract_is_refused_alone(
    engine: Engine, field: str, value: str
) -> None:
    # The JSON intake (web/intents.py) and the brokers' sources (sources/common.py) read each
    # intent with ``items_of``/``intent_row`` and stage through ``stage_intents``.
    other = _intent(aggregate="S-2", payload={"sku": "S-2", "price": "2.00"})
    rows = items_of([_intent(**{field: value}), other])
    results = stage_intents(engine, None, KINDS, rows)

    assert ["rejected", "staged"] == [r["status"] for r in results]
    assert "invalid-contract" == results[0]["reason"]
    assert field in results[0]["detail"]
    with transaction(engine, read_only=True) as c:
        assert ["S-2"] == list(c.execute(select(staging.c.aggregate)).scalars())


def test_a_broker_message_whose_intent_is_longer_than_the_contract_is_refused_alone(
    engine: Engine,
) -> None:
    long = json.dumps(_intent(aggregate="a" * 201)).encode()
    fine = json.dumps(_intent()).encode()
    batch = [Received("m-1", long, "queue prices, m-1"), Received("m-2", fine, "queue, m-2")]

    taken = sources.take(
        engine, None, KINDS, batch, source="rabbitmq", max_items=100, max_bytes=2**24
    )

    assert (1, 1) == (taken.staged, taken.refused)
    found = records(engine)
    assert (False, None) == found["S-1"][:2]
    [(rejected, reason, said)] = [v for k, v in found.items() if k != "S-1"]
    assert (True, "invalid-contract") == (rejected, reason)
    assert "aggregate" in said and "200" in said
