"""The attacker's catalogue at the intake (issue 21 items 3, 12, 13, 14): a version that would
leave no number for a 1C package, a payload nested to exhaust the parser, a lone surrogate
beside valid intents, a body that is not JSON or names a key twice, a host that does not
resolve. Each is refused by itself, with its reason, and what is valid beside it goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from web_helpers import PASSWORD, TOKEN, USER, running, web_settings

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.onec_client import OneCClient
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.domain.identity import message_id
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import staging_table
from exchange.intake.contracts import Accepted, StagingRow
from exchange.intake.intents import BodyError
from exchange.intake.sources.common import intents_of
from exchange.settings import load_settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

LIMIT = 2**62
KINDS = dict(DEFAULT_KINDS)
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
RETAIL = CmlType("t-retail", "Розничная", "руб")
Serve = Callable[..., str]


@pytest.fixture
def serve(db_url: str, tmp_path: Path) -> Iterator[Serve]:
    stack: list[Any] = []

    def start(**overrides: Any) -> str:
        context = running(web_settings(db_url, tmp_path / "1c", **overrides))
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def intent(sku: str, version: int, **payload: Any) -> dict[str, Any]:
    return {
        "kind": "price",
        "aggregate": f"{sku}/retail",
        "aggregate_version": version,
        "payload": {"sku": sku, "price": "1.00", "price_type": "retail", **payload},
    }


def post(base: str, content: bytes | str, headers: dict[str, str] | None = None) -> httpx.Response:
    data = content.encode() if isinstance(content, str) else content
    return httpx.post(f"{base}/api/v1/intents", content=data, headers=headers or AUTH)


def statuses(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [result["status"] for result in response.json()["results"]]


def staged(engine: Engine) -> list[tuple[str, int]]:
    with transaction(engine, read_only=True) as connection:
        return [
            (row.aggregate, row.aggregate_version)
            for row in connection.execute(select(staging).order_by(staging.c.id))
        ]


def take(engine: Engine) -> None:
    staging_table.take(engine, None, KINDS, datetime.now(UTC))


def quarantined(engine: Engine) -> list[tuple[str, str]]:
    with transaction(engine, read_only=True) as connection:
        return [
            (row.reason, row.last_error)
            for row in connection.execute(select(messages).where(messages.c.state == "quarantined"))
        ]


def one_c_package(base: str, sku: str, value: str, when: str) -> str:
    """One offers file sent through 1C's standard exchange; returns import's first line."""
    xml = offers_xml(
        Package(
            types=[RETAIL],
            offers=[CmlOffer(sku, [CmlPrice("t-retail", value, "руб")])],
            generated_at=when,
        )
    )
    client = OneCClient(base, USER, PASSWORD, use_zip=False)
    try:
        return client.exchange([("offers.xml", xml)]).answers["offers.xml"].status
    finally:
        client.close()


TYPES = {"1c_price_types": {"Розничная": "retail"}}


# -- item 3: versions below 2^62 ---------------------------------------------------------------


def test_a_staging_row_at_the_largest_bigint_is_quarantined_and_1c_packages_still_stage(
    serve: Serve, engine: Engine
) -> None:
    stage(engine, [price_row("A", 2**63 - 1)])
    take(engine)
    [(reason, detail)] = quarantined(engine)
    assert reason == "invalid-contract" and "2^62" in detail

    base = serve(**TYPES)
    assert "success" == one_c_package(base, "A", "10.00", "2026-12-01T10:00:00")
    package = [version for aggregate, version in staged(engine) if aggregate == "A/retail"]
    assert package == [1]
    take(engine)
    with transaction(engine, read_only=True) as connection:
        versions = connection.execute(
            select(messages.c.version).where(messages.c.aggregate == "A/retail")
        ).scalars()
        assert [1] == list(versions)


def test_an_intent_below_2_62_is_staged_and_one_at_2_62_is_rejected_naming_the_limit(
    serve: Serve, engine: Engine
) -> None:
    base = serve()
    response = post(base, json.dumps({"intents": [intent("A", LIMIT - 1), intent("B", LIMIT)]}))
    assert ["staged", "rejected"] == statuses(response)
    rejected = response.json()["results"][1]
    assert rejected["reason"] == "invalid-contract" and "2^62" in rejected["detail"]
    assert [("A/retail", LIMIT - 1)] == staged(engine)


def _older_release_message(engine: Engine, aggregate: str, version: int) -> None:
    """What a release before the limit stored for a row at ``version``: a message."""
    sku = aggregate.split("/")[0]
    payload = json.dumps({"currency": "RUB", "price": "1.00", "price_type": "retail", "sku": sku})
    row = StagingRow(9, "price", aggregate, version, payload, "1", "1C", datetime.now(UTC))
    verdict = Accepted(row, message_id("price", aggregate, version), payload.replace(" ", ""))
    with transaction(engine) as connection:
        staging_table._store(connection, [verdict], datetime.now(UTC), range(1))


def test_a_version_an_older_release_let_in_neither_blocks_packages_nor_goes_unnamed(
    serve: Serve, engine: Engine, db_url: str, tmp_path: Path
) -> None:
    _older_release_message(engine, "OLD/retail", 2**63 - 1)
    _older_release_message(engine, "HIGH/retail", LIMIT)
    stage(engine, [price_row("B", 41)])

    base = serve(**TYPES)
    assert "success" == one_c_package(base, "C", "10.00", "2026-12-01T10:00:00")
    assert ("C/retail", 42) in staged(engine)  # above 41, numbered without the old versions

    result = subprocess.run(
        [sys.executable, "-m", "exchange", "migrate"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
            "EXCHANGE_DATABASE_URL": db_url,
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "'OLD/retail'" in warning and "'HIGH/retail'" in warning and "2^62" in warning
    assert "'C/retail'" not in warning and "Traceback" not in result.stderr


def test_a_package_numbered_from_2_62_up_is_taken_as_its_messages(
    serve: Serve, engine: Engine
) -> None:
    stage(engine, [price_row("B", LIMIT - 1)])
    base = serve(**TYPES)
    assert "success" == one_c_package(base, "C", "10.00", "2026-12-01T10:00:00")
    assert ("C/retail", LIMIT) in staged(engine)
    take(engine)
    assert [] == quarantined(engine)
    with transaction(engine, read_only=True) as connection:
        assert (
            LIMIT
            == connection.execute(
                select(messages.c.version).where(messages.c.aggregate == "C/retail")
            ).scalar_one()
        )


# -- item 13: nesting ----------------------------------------------------------------------------


def _deep(depth: int) -> dict[str, Any]:
    """A posting whose payload nests ``depth`` levels (the payload object itself is one)."""
    value: Any = 1
    for _ in range(depth):
        value = {"x": value}
    return {
        "kind": "financial_posting",
        "aggregate": f"D{depth}",
        "aggregate_version": 1,
        "payload": value,
    }


def test_an_intent_nested_deeper_than_64_is_rejected_and_the_others_stage(
    serve: Serve, engine: Engine
) -> None:
    base = serve()
    body = {"intents": [_deep(64), _deep(65), _deep(200), intent("A", 1)]}
    response = post(base, json.dumps(body))
    assert ["staged", "rejected", "rejected", "staged"] == statuses(response)
    for result in response.json()["results"][1:3]:
        assert result["reason"] == "invalid-contract" and "не больше 64" in result["detail"]
    assert ["D64", "A/retail"] == [aggregate for aggregate, _ in staged(engine)]


@pytest.mark.parametrize("depth", [100_000, 970])
def test_a_body_nested_beyond_any_intent_is_refused_whole_without_recursion(
    serve: Serve, engine: Engine, depth: int
) -> None:
    base = serve()
    prefix = (
        '{"intents": [{"kind": "financial_posting", "aggregate": "D", "aggregate_version": 1, '
        '"payload": '
    )
    body = prefix + '{"x": ' * depth + "1" + "}" * depth + "}]}"
    response = post(base, body)
    assert response.status_code == 400
    assert "levels deep" in response.json()["error"] and "64" in response.json()["error"]
    assert [] == staged(engine)


def test_a_staging_row_nested_970_deep_is_quarantined_naming_the_limit(engine: Engine) -> None:
    deep = '{"a": ' + "[" * 969 + "]" * 969 + "}"
    stage(
        engine,
        [{**price_row("P", 1), "kind": "financial_posting", "payload": deep}, price_row("Q", 1)],
    )
    take(engine)
    [(reason, detail)] = quarantined(engine)
    assert reason == "invalid-contract" and "970 levels" in detail and "at most 64" in detail


# -- item 12: a lone surrogate -----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        '{"kind": "price", "aggregate": "S\\ud800/retail", "aggregate_version": 1, '
        '"payload": {"sku": "S\\ud800", "price": "1.00"}}',
        '{"kind": "price", "aggregate": "S/retail", "aggregate_version": 1, '
        '"payload": {"sku": "S", "price": "1.00"}, "source_ref": "doc \\udfff"}',
        '{"kind": "financial_posting", "aggregate": "S", "aggregate_version": 1, '
        '"payload": {"memo": "\\ud800"}}',
    ],
)
def test_a_lone_surrogate_rejects_its_intent_and_the_others_stage(
    serve: Serve, engine: Engine, bad: str
) -> None:
    base = serve()
    body = (
        '{"intents": ['
        + json.dumps(intent("A", 1))
        + ", "
        + bad
        + ", "
        + json.dumps(intent("B", 1))
        + "]}"
    )
    response = post(base, body)
    assert ["staged", "rejected", "staged"] == statuses(response)
    rejected = response.json()["results"][1]
    assert rejected["reason"] == "invalid-contract" and "суррогат" in rejected["detail"]
    assert ["A/retail", "B/retail"] == [aggregate for aggregate, _ in staged(engine)]


def test_a_staging_row_with_a_lone_surrogate_escape_is_quarantined(engine: Engine) -> None:
    stage(
        engine,
        [
            {**price_row("P", 1), "kind": "financial_posting", "payload": '{"memo": "\\ud800"}'},
            price_row("Q", 1),
        ],
    )
    take(engine)
    [(reason, detail)] = quarantined(engine)
    assert reason == "invalid-contract" and "surrogate" in detail


# -- item 14: content type, duplicate keys, a host that does not resolve ------------------------


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("Application/JSON;charset=UTF-8", 200),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("", 415),
    ],
)
def test_the_intake_takes_only_json(serve: Serve, content_type: str, status: int) -> None:
    base = serve()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if content_type:
        headers["Content-Type"] = content_type
    response = post(base, json.dumps({"intents": [intent("A", 1)]}), headers)
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    "body",
    [
        '{"intents": [], "intents": []}',
        '{"intents": [{"kind": "price", "kind": "price", "aggregate": "A/retail", '
        '"aggregate_version": 1, "payload": {"sku": "A", "price": "1.00"}}]}',
        '{"intents": [{"kind": "price", "aggregate": "A/retail", "aggregate_version": 1, '
        '"payload": {"sku": "A", "price": "1.00", "price": "2.00"}}]}',
    ],
)
def test_a_key_written_twice_refuses_the_request(serve: Serve, engine: Engine, body: str) -> None:
    response = post(serve(), body)
    assert response.status_code == 400 and "twice" in response.json()["error"]
    assert [] == staged(engine)


def test_a_host_that_does_not_resolve_is_refused_in_one_line() -> None:
    refusal = load_settings(http_host="localhost.").http_plain_refusal()
    assert refusal is not None and "EXCHANGE_HTTP_HOST=localhost." in refusal
    assert "cannot be resolved" in refusal
    assert load_settings(http_host="localhost").http_plain_refusal() is None


def test_serve_on_a_host_that_does_not_resolve_exits_2_without_a_traceback(
    tmp_path: Path,
) -> None:
    url = sqlite_copy(tmp_path / "exchange.db")  # migrated (`exchange migrate` is tested apart)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env |= {
        "EXCHANGE_DATABASE_URL": url,
        "EXCHANGE_HTTP_HOST": "localhost.",
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_INTAKE_TOKEN": TOKEN,
    }
    result = subprocess.run(
        [sys.executable, "-m", "exchange", "serve"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "localhost." in lines[0]


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind": "price", "kind": "price"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"intents": [' + b"[" * 970 + b"]" * 970 + b"]}",
        b"\xff\xfe not utf-8",
    ],
    ids=["key-twice", "nested-100000", "nested-970", "not-utf-8"],
)
def test_a_broker_message_is_held_to_the_json_intakes_body_rules(body: bytes) -> None:
    """The brokers' sources read bodies with the JSON intake's own parser: a key twice or a
    body nested past the limit is not intents (recorded for operators), never a RecursionError
    that would stop the consumer."""
    with pytest.raises(BodyError):
        intents_of(body, max_items=1000)
