"""The JSON intake (contract 9b) against a real ``exchange serve``: the same judgement as a
staging row (contracts.validate), one transaction, a result per intent, in order."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from web_helpers import TOKEN

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.domain.identity import message_id

Serve = Callable[..., str]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def price(sku: str, version: int, value: Any = "840.00", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "price",
        "aggregate": f"{sku}/retail",
        "aggregate_version": version,
        "payload": {"sku": sku, "price": value, "currency": "RUB", "price_type": "retail"},
        "source_ref": "Установка цен 000184",
        **extra,
    }


def post(base: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{base}/api/v1/intents",
        content=content,
        headers={"Content-Type": "application/json", **(AUTH if headers is None else headers)},
    )


def staged(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(staging).order_by(staging.c.id)).mappings()
        return [dict(r) for r in rows]


def test_valid_intents_are_staged_and_each_gets_its_result_in_order(
    serve: Serve, db: Engine
) -> None:
    base = serve()
    response = post(base, {"intents": [price("A", 1), price("B", 2, "1.5")]})
    assert response.status_code == 200
    assert [
        {"status": "staged", "message_id": message_id("price", "A/retail", 1)},
        {"status": "staged", "message_id": message_id("price", "B/retail", 2)},
    ] == response.json()["results"]
    rows = staged(db)
    assert [("A/retail", 1), ("B/retail", 2)] == [
        (r["aggregate"], r["aggregate_version"]) for r in rows
    ]
    assert rows[0]["source_ref"] == "Установка цен 000184"


def test_a_json_number_price_keeps_its_exact_decimal(serve: Serve, db: Engine) -> None:
    base = serve()
    post(
        base,
        b'{"intents": [{"kind": "price", "aggregate": "A/retail", "aggregate_version": 1,'
        b' "payload": {"sku": "A", "price": 0.1000, "price_type": "retail"}}]}',
    )
    assert json.loads(staged(db)[0]["payload"], parse_float=str)["price"] == "0.1000"


def test_invalid_intents_are_rejected_with_the_staging_rules_and_not_staged(
    serve: Serve, db: Engine
) -> None:
    base = serve()
    response = post(
        base,
        {
            "intents": [
                price("A", 1, "1e3"),
                price("B", 0),
                {**price("C", 1), "kind": "telepathy"},
                {**price("D", 1), "schema_version": "9"},
                price("E", 1),
                {"kind": "price", "aggregate": "F", "aggregate_version": "1", "payload": {}},
            ]
        },
    )
    results = response.json()["results"]
    assert ["rejected", "rejected", "rejected", "rejected", "staged", "rejected"] == [
        r["status"] for r in results
    ]
    assert ["invalid-contract", "invalid-contract", "unknown-kind", "unsupported-schema"] == [
        r["reason"] for r in results[:4]
    ]
    assert "простым десятичным числом" in results[0]["detail"]  # Russian by default
    assert ["E/retail"] == [r["aggregate"] for r in staged(db)]


def test_the_detail_follows_accept_language_and_the_codes_stay_english(
    serve: Serve, db: Engine
) -> None:
    """Contract 15: ``status`` and ``reason`` are codes, English whatever the request asks;
    ``detail`` (and a refused request's) in the language of ``Accept-Language``, Russian when
    it names neither."""
    base = serve()
    body = {"intents": [price("A", 1, "1e3"), {**price("C", 1), "kind": "telepathy"}]}
    asked = {
        None: ["простым десятичным числом", "не настроен (EXCHANGE_KINDS)"],
        "de-DE,de;q=0.9": ["простым десятичным числом", "не настроен (EXCHANGE_KINDS)"],
        "ru-RU,ru;q=0.9,en;q=0.8": ["простым десятичным числом", "не настроен (EXCHANGE_KINDS)"],
        "en-US,en;q=0.9": ["must be a plain decimal", "is not configured"],
    }
    for accept, words in asked.items():
        headers = {**AUTH, **({"Accept-Language": accept} if accept else {})}
        results = post(base, body, headers).json()["results"]
        assert ["rejected", "rejected"] == [r["status"] for r in results], accept
        assert ["invalid-contract", "unknown-kind"] == [r["reason"] for r in results], accept
        for result, word in zip(results, words, strict=True):
            assert word in result["detail"], (accept, result)
    refused = post(base, b"not json", {**AUTH})
    assert 400 == refused.status_code
    assert refused.json()["error"].startswith("the body is not JSON")
    assert refused.json()["detail"].startswith("тело сообщения — не JSON")
    wrong = post(base, body, {"Authorization": "Bearer wrong", "Accept-Language": "en"})
    assert {
        "error": "missing or wrong bearer token",
        "detail": "missing or wrong bearer token",
    } == (wrong.json())
    assert "токен" in post(base, body, {"Authorization": "Bearer wrong"}).json()["detail"]
    assert [] == staged(db)


def test_the_same_intent_twice_is_a_duplicate_and_staged_once(serve: Serve, db: Engine) -> None:
    base = serve()
    post(base, {"intents": [price("A", 1, "840.0")]})
    again = post(base, {"intents": [price("A", 1, "840.00"), price("A", 1, "840.00")]})
    assert ["duplicate", "duplicate"] == [r["status"] for r in again.json()["results"]]
    assert 1 == len(staged(db))


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong"}, 401), ({"Authorization": "Basic x"}, 401)],
)
def test_without_the_token_401(
    serve: Serve, db: Engine, headers: dict[str, str], status: int
) -> None:
    response = post(serve(), {"intents": [price("A", 1)]}, headers=headers)
    assert status == response.status_code and TOKEN not in response.text
    assert [] == staged(db)


def test_closed_when_the_token_is_unset(serve: Serve) -> None:
    response = post(
        serve(intake_token=None), {"intents": []}, headers={"Authorization": "Bearer x"}
    )
    assert 403 == response.status_code and "closed" in response.json()["error"]


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"intents": {}}', b'{"intents": [1]}', b'{"x": []}']
)
def test_a_body_of_another_shape_is_400(serve: Serve, body: bytes) -> None:
    assert 400 == post(serve(), body).status_code


def test_more_than_the_maximum_is_413_and_nothing_is_staged(serve: Serve, db: Engine) -> None:
    response = post(serve(intake_max_items=3), {"intents": [price(f"S{n}", 1) for n in range(4)]})
    assert 413 == response.status_code and [] == staged(db)


@pytest.mark.parametrize(
    ("body", "content_type", "status", "error"),
    [
        (
            b'{"intents": [], "intents": []}',
            "application/json",
            400,
            "the body names key 'intents' twice in one object",
        ),
        (
            b"[" * 300 + b"]" * 300,
            "application/json",
            400,
            "the body nests 300 levels deep, more than the 256 allowed (a payload may nest at most "
            "64)",
        ),
        (
            b"{}",
            "text/plain",
            415,
            "the body must be JSON, sent with Content-Type: application/json",
        ),
    ],
    ids=["key-twice", "nested", "not-json"],
)
def test_a_refused_request_says_why_in_one_plain_sentence(
    serve: Serve, body: bytes, content_type: str, status: int, error: str
) -> None:
    """The fresh review: «the body names a key 'a' appears twice» was two sentences run into
    one. The answer keeps the contract's shape for API clients (a status and an English
    ``error``), in plain grammar; its ``detail`` says it in Russian (contract 15)."""
    response = post(serve(), body, headers={**AUTH, "Content-Type": content_type})
    assert (status, error) == (response.status_code, response.json()["error"])
    assert re.search("[а-я]", response.json()["detail"]), response.json()
