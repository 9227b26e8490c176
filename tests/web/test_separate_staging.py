"""``exchange serve`` with ``staging_intents`` in a database of its own (contract 1 and 7,
``EXCHANGE_STAGING_URL``): a 1C package and the JSON intake are staged there, whole or not at
all, with the package's digest and version in the same transaction; what operators see stays
in the service's database, written after, so that a failure between the two databases
neither loses nor doubles a package. Run as SQLite + SQLite file, PostgreSQL + PostgreSQL
database, and PostgreSQL + SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from web_helpers import PASSWORD, TOKEN, USER, running, web_settings

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import cml_exchanges, cml_packages, messages, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.intake.commerceml import publish
from exchange.intake.staging_table import take
from exchange.settings import load_settings

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

RETAIL = CmlType("t-retail", "Розничная", "руб")
TYPES = {"1c_price_types": {"Розничная": "retail"}}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def package(*prices: tuple[str, str], generated_at: str = "2026-12-01T10:00:00") -> bytes:
    return offers_xml(
        Package(
            types=[RETAIL],
            offers=[CmlOffer(sku, [CmlPrice("t-retail", value, "руб")]) for sku, value in prices],
            generated_at=generated_at,
        )
    )


def _sqlite(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite+sqlite", "postgresql+postgresql", "postgresql+sqlite"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(EXCHANGE_DATABASE_URL, EXCHANGE_STAGING_URL): two databases, both migrated."""
    main, staged_in = str(request.param).split("+")
    main_url = (
        _sqlite(tmp_path / "exchange.db")
        if main == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    staging_url = (
        _sqlite(tmp_path / "staging.db")
        if staged_in == "sqlite"
        else str(request.getfixturevalue("other_pg_url"))
    )
    return main_url, staging_url


@pytest.fixture
def dbs(urls: tuple[str, str]) -> Iterator[tuple[Engine, Engine]]:
    main, staging_db = make_engine(urls[0]), make_engine(urls[1])
    yield main, staging_db
    main.dispose()
    staging_db.dispose()


@pytest.fixture
def base(urls: tuple[str, str], tmp_path: Path) -> Iterator[str]:
    settings = web_settings(urls[0], tmp_path / "1c", readers=1, staging_url=urls[1], **TYPES)
    with running(settings) as url:
        yield url


def rows(engine: Engine, table: Any) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [dict(r) for r in connection.execute(select(table).order_by(table.c.id)).mappings()]


def exchange(base: str, name: str, data: bytes) -> str:
    c = OneCClient(base, USER, PASSWORD, use_zip=False)
    try:
        assert c.checkauth().status == "success"
        c.init()
        assert c.upload(name, data).status == "success"
        answer, _ = c.import_file(name)
        c.complete()
        return f"{answer.status}: {' '.join(answer.lines)}"
    finally:
        c.close()


def test_a_package_is_staged_whole_in_the_staging_database_and_recorded_for_operators(
    base: str, dbs: tuple[Engine, Engine]
) -> None:
    main, staging_db = dbs
    answer = exchange(base, "offers.xml", package(("A", "1.00"), ("B", "2,50")))
    assert answer.startswith("success"), answer
    staged = rows(staging_db, staging)
    assert [(r["aggregate"], json.loads(r["payload"])["price"]) for r in staged] == [
        ("A/retail", "1.00"),
        ("B/retail", "2.50"),
    ]
    assert [] == rows(main, staging)  # nothing in the service's own staging table
    [record] = rows(staging_db, cml_packages)  # the digest and version, with the rows
    assert record["version"] == staged[0]["aggregate_version"] == staged[1]["aggregate_version"]
    assert [] == rows(main, cml_packages)
    [entry] = rows(main, cml_exchanges)  # what operators see, in the service's database
    assert (entry["outcome"], entry["intents"], entry["version"]) == (
        "staged",
        2,
        record["version"],
    )
    assert [] == rows(staging_db, cml_exchanges)


def test_the_same_file_twice_stages_nothing_new_and_a_new_one_gets_a_higher_version(
    base: str, dbs: tuple[Engine, Engine]
) -> None:
    main, staging_db = dbs
    data = package(("A", "1.00"))
    assert exchange(base, "offers.xml", data).startswith("success")
    answer = exchange(base, "offers.xml", data)
    assert answer.startswith("success") and "уже был принят" in answer
    assert 1 == len(rows(staging_db, staging))
    first = rows(staging_db, cml_packages)[0]["version"]
    assert [e["outcome"] for e in rows(main, cml_exchanges)] == ["staged", "nothing-new"]
    assert rows(main, cml_exchanges)[1]["version"] == first
    assert exchange(
        base, "offers.xml", package(("A", "2.00"), generated_at="2026-12-01T11:00:00")
    ).startswith("success")
    versions = [r["aggregate_version"] for r in rows(staging_db, staging)]
    assert versions[1] > versions[0] == first


def test_a_failure_inside_the_staging_transaction_stages_nothing_and_the_file_is_staged_later(
    base: str, dbs: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    main, staging_db = dbs
    # what writes the rows: COPY on PostgreSQL, a copy from the scratch file on SQLite
    writer = "stage_attached" if staging_db.dialect.name == "sqlite" else "stage_many"
    real = getattr(publish, writer)

    def then_fail(*args: Any, **kwargs: Any) -> int:
        real(*args, **kwargs)  # the rows are written, then the transaction fails
        raise RuntimeError("the staging database went away")

    monkeypatch.setattr(publish, writer, then_fail)
    data = package(("A", "1.00"), ("B", "2.00"))
    answer = exchange(base, "offers.xml", data)
    assert answer.startswith("failure") and "went away" in answer
    assert [] == rows(staging_db, staging) and [] == rows(staging_db, cml_packages)
    monkeypatch.setattr(publish, writer, real)
    assert exchange(base, "offers.xml", data).startswith("success")
    assert 2 == len(rows(staging_db, staging))
    assert [e["outcome"] for e in rows(main, cml_exchanges)] == ["failure", "staged"]


def test_a_crash_after_the_staging_commit_neither_loses_nor_doubles_the_package(
    base: str, dbs: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows and the digest committed in the staging database; the operators' record in
    the service's database never written (the process died, or that database went away)."""
    main, staging_db = dbs
    import exchange.web.onec as onec

    def lost(*_: Any) -> None:
        raise RuntimeError("the service's database went away")

    monkeypatch.setattr(onec, "exchange_finished", lost)
    data = package(("A", "1.00"), ("B", "2.00"))
    exchange(base, "offers.xml", data)
    assert 2 == len(rows(staging_db, staging))
    [unfinished] = rows(main, cml_exchanges)
    assert unfinished["outcome"] is None
    monkeypatch.undo()
    answer = exchange(base, "offers.xml", data)  # 1C sends it again
    assert answer.startswith("success") and "уже был принят" in answer
    assert 2 == len(rows(staging_db, staging))  # not doubled
    version = rows(staging_db, cml_packages)[0]["version"]
    entry = rows(main, cml_exchanges)[-1]
    assert (entry["outcome"], entry["version"]) == ("nothing-new", version)


def test_a_package_version_is_above_what_the_service_database_holds_for_its_aggregates(
    base: str, dbs: tuple[Engine, Engine]
) -> None:
    main, staging_db = dbs
    intent = {
        "kind": "price",
        "aggregate": "A/retail",
        "aggregate_version": 50,
        "payload": {"sku": "A", "price": "9.00", "currency": "RUB", "price_type": "retail"},
    }
    response = httpx.post(f"{base}/api/v1/intents", json={"intents": [intent]}, headers=AUTH)
    assert response.json()["results"][0]["status"] == "staged"
    kinds = load_settings(database_url="sqlite://").kinds
    take(main, staging_db, kinds, datetime.now(UTC))  # now a message in the service's database
    assert [] == [r for r in rows(staging_db, staging) if r["taken_at"] is None]
    assert [50] == [m["version"] for m in rows(main, messages)]
    assert exchange(base, "offers.xml", package(("A", "1.00"))).startswith("success")
    assert [51] == [
        r["aggregate_version"] for r in rows(staging_db, staging) if r["taken_at"] is None
    ]


def test_the_json_intake_stages_into_the_staging_database_and_knows_duplicates_in_both(
    base: str, dbs: tuple[Engine, Engine]
) -> None:
    main, staging_db = dbs
    intents = [
        {
            "kind": "price",
            "aggregate": f"{sku}/retail",
            "aggregate_version": 1,
            "payload": {"sku": sku, "price": "1.00", "currency": "RUB", "price_type": "retail"},
        }
        for sku in ("A", "B")
    ]

    def post() -> list[str]:
        response = httpx.post(f"{base}/api/v1/intents", json={"intents": intents}, headers=AUTH)
        assert response.status_code == 200, response.text
        return [r["status"] for r in response.json()["results"]]

    assert ["staged", "staged"] == post()
    assert 2 == len(rows(staging_db, staging)) and [] == rows(main, staging)
    assert ["duplicate", "duplicate"] == post()  # known as staged, untaken, over there
    take(main, staging_db, load_settings(database_url="sqlite://").kinds, datetime.now(UTC))
    assert 2 == len(rows(main, messages))
    assert ["duplicate", "duplicate"] == post()  # known as messages in the service's database
    assert 2 == len(rows(staging_db, staging))
