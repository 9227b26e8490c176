"""Contract 5b, the batch API: the request ``SiteClient.send_batch`` makes, how ``batch.chunks``
cuts a claim, and how ``batch.split`` hands every item the answer that ``classify`` then judges
exactly as a single answer. The worker's side (breaker, pause, fallback) is in
tests/integration/test_batch_pipeline.py, which needs a database."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from exchange.domain.retry import Decision, RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.answers import classify
from exchange.targets.shop_api.batch import chunks, endpoint_missing, split
from exchange.targets.shop_api.client import BATCH_PATH, BODY_CAP, Response, SiteClient, body

BASE = "https://shop.example.com"
TOKEN = "tok-5b-7e21"
CREATED = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
NOW = datetime(2026, 8, 23, 8, 0, tzinfo=UTC)

Handler = Callable[[httpx.Request], httpx.Response]


def price(sku: str, version: int = 5, price_text: str = '"840.00"') -> OutgoingMessage:
    payload = (
        f'{{"sku": "{sku}", "price": {price_text}, "currency": "RUB", "price_type": "retail"}}'
    )
    return OutgoingMessage(f"mid-{sku}-{version}", "price", sku, version, payload, CREATED)


A, B, C, D, E, F, G, H = (price(f"SKU-{n}") for n in "ABCDEFGH")


def send_batch(messages: list[OutgoingMessage], handler: Handler) -> Any:
    async def run() -> Any:
        client = SiteClient(
            BASE, TOKEN, timeout=5.0, concurrency=2, transport=httpx.MockTransport(handler)
        )
        try:
            return await client.send_batch(messages)
        finally:
            await client.aclose()

    return asyncio.run(run())


def results(*entries: dict[str, Any], **headers: str) -> Handler:
    """A site that answers 200 with these results."""
    return lambda request: httpx.Response(200, json={"results": list(entries)}, headers=headers)


def ok(m: OutgoingMessage, receipt: str = "R-1") -> dict[str, Any]:
    return {"message_id": m.message_id, "status": 200, "body": {"receipt": receipt}}


def judged(messages: list[OutgoingMessage], handler: Handler) -> dict[str, Classification]:
    """What classify makes of each item's answer, by message_id."""
    answers = split(send_batch(messages, handler), [m.message_id for m in messages])
    assert [m.message_id for m in messages] == list(answers)
    return {m.message_id: classify(answers[m.message_id], m.version) for m in messages}


def decided(messages: list[OutgoingMessage], handler: Handler) -> dict[str, Decision]:
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=300.0)
    return {
        message_id: decide(c, attempt=1, now=NOW, policy=policy, rng=random.Random(0))
        for message_id, c in judged(messages, handler).items()
    }


def sent_request(messages: list[OutgoingMessage]) -> httpx.Request:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"results": []})

    send_batch(messages, handler)
    [request] = seen
    return request


# -- the request -----------------------------------------------------------------------------


def test_send_batch_posts_to_the_batch_endpoint_with_the_token_and_no_idempotency_key() -> None:
    request = sent_request([A, B])

    assert ("POST", f"{BASE}{BATCH_PATH}") == (request.method, str(request.url))
    assert f"Bearer {TOKEN}" == request.headers["Authorization"]
    assert "application/json" == request.headers["Content-Type"]
    assert "Idempotency-Key" not in request.headers


def test_send_batch_items_are_the_single_request_bodies_in_order() -> None:
    document = json.loads(sent_request([A, B, C]).content, parse_float=Decimal)

    assert {"items"} == set(document)
    assert [json.loads(body(m), parse_float=Decimal) for m in (A, B, C)] == document["items"]


def test_send_batch_keeps_the_exact_decimal_text_of_payloads() -> None:
    posting = OutgoingMessage(
        "mid-doc", "financial_posting", "DOC-1", 1, '{"amount": 12345678901234567890.1230}', CREATED
    )

    content = sent_request([posting, price("SKU-1", price_text="999999999999.9999")]).content

    assert b'"amount": 12345678901234567890.1230' in content
    assert b'"price": 999999999999.9999' in content


def test_send_batch_refuses_two_items_of_one_aggregate() -> None:
    with pytest.raises(ValueError, match="one per aggregate"):
        send_batch([price("SKU-1", 1), price("SKU-1", 2)], results())


def test_send_batch_refuses_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="at least one message"):
        send_batch([], results())


# -- chunks ----------------------------------------------------------------------------------


def test_chunks_are_slices_of_at_most_the_size_in_claim_order() -> None:
    assert [[A, B, C], [D, E, F], [G, H]] == chunks([A, B, C, D, E, F, G, H], 3)


def test_chunks_of_size_one_are_single_messages() -> None:
    assert [[A], [B]] == chunks([A, B], 1)


def test_chunks_never_put_two_messages_of_one_aggregate_in_one_request() -> None:
    first, second = price("SKU-1", 1), price("SKU-1", 2)

    assert [[first, A], [second, B]] == chunks([first, second, A, B], 2)


@given(
    aggregates=st.lists(st.sampled_from(["SKU-1", "SKU-2", "SKU-3", "DOC-1"]), max_size=30),
    size=st.integers(1, 7),
)
def test_chunks_keep_every_message_once_at_most_size_and_one_per_aggregate(
    aggregates: list[str], size: int
) -> None:
    messages = [price(a, n + 1) for n, a in enumerate(aggregates)]

    groups = chunks(messages, size)

    assert sorted(m.message_id for m in messages) == sorted(m.message_id for g in groups for m in g)
    assert all(1 <= len(g) <= size for g in groups)
    assert all(len({m.aggregate for m in g}) == len(g) for g in groups)
    for aggregate in set(aggregates):  # an aggregate's messages keep their order
        ordered = [m.version for g in groups for m in g if m.aggregate == aggregate]
        assert sorted(ordered) == ordered


def test_chunks_refuse_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="1 or more"):
        chunks([A], 0)


# -- per-item answers: each judged as its single answer --------------------------------------


def test_mixed_results_are_each_classified_as_their_single_answer() -> None:
    stale_equal, stale_greater = price("SKU-EQ", 5), price("SKU-GT", 4)
    busy, rejected, refused, odd = price("SKU-T"), price("SKU-R"), price("SKU-P"), price("SKU-U")
    messages = [A, stale_equal, stale_greater, busy, rejected, refused, odd]
    handler = results(
        ok(A, "R-17"),
        {
            "message_id": stale_equal.message_id,
            "status": 409,
            "body": {"error": "stale", "current_version": 5},
        },
        {
            "message_id": stale_greater.message_id,
            "status": 409,
            "body": {"error": "stale", "current_version": 9},
        },
        {"message_id": busy.message_id, "status": 503, "body": {"error": "busy"}},
        {"message_id": rejected.message_id, "status": 422, "body": {"error": "rejected"}},
        {"message_id": refused.message_id, "status": 401, "body": {"error": "unauthorized"}},
        {"message_id": odd.message_id, "status": 302, "body": {}},
    )

    verdicts = {k: c.verdict for k, c in judged(messages, handler).items()}
    decisions = decided(messages, handler)

    assert {
        A.message_id: Verdict.DELIVERED,
        stale_equal.message_id: Verdict.DELIVERED,
        stale_greater.message_id: Verdict.STALE_AT_SITE,
        busy.message_id: Verdict.TEMPORARY,
        rejected.message_id: Verdict.TERMINAL,
        refused.message_id: Verdict.PAUSE,
        odd.message_id: Verdict.UNKNOWN,
    } == verdicts
    assert {
        A.message_id: ("delivered", None),
        stale_equal.message_id: ("delivered", None),
        stale_greater.message_id: ("cancelled", "stale-at-site"),
        busy.message_id: ("delayed", None),
        rejected.message_id: ("quarantined", "http-422"),
        refused.message_id: ("new", None),
        odd.message_id: ("quarantined", "unknown-response"),
    } == {k: (d.to_state.value, d.reason) for k, d in decisions.items()}
    assert "R-17" == decisions[A.message_id].receipt
    assert False is decisions[refused.message_id].charged


def test_an_item_equals_the_single_answer_with_its_status_and_body() -> None:
    body = {"error": "stale", "current_version": 5}
    handler = results({"message_id": A.message_id, "status": 409, "body": body})

    single = classify(Response(409, json.dumps(body).encode()), A.version)

    assert {A.message_id: single} == judged([A], handler)


def test_an_item_retry_after_sets_its_delay() -> None:
    handler = results(
        {"message_id": A.message_id, "status": 429, "body": {}, "retry_after": 7},
        {"message_id": B.message_id, "status": 503, "body": {}, "retry_after": "11"},
    )

    decisions = decided([A, B], handler)

    assert (7.0, 11.0) == (decisions[A.message_id].delay_s, decisions[B.message_id].delay_s)


def test_the_batch_answers_retry_after_applies_to_items_without_their_own() -> None:
    handler = results(
        {"message_id": A.message_id, "status": 503, "body": {}},
        {"message_id": B.message_id, "status": 503, "body": {}, "retry_after": "2"},
        **{"Retry-After": "30"},
    )

    decisions = decided([A, B], handler)

    assert (30.0, 2.0) == (decisions[A.message_id].delay_s, decisions[B.message_id].delay_s)


def test_an_item_409_without_stale_is_temporary() -> None:
    handler = results({"message_id": A.message_id, "status": 409, "body": {"error": "busy"}})

    assert Verdict.TEMPORARY == judged([A], handler)[A.message_id].verdict


def test_an_item_body_keeps_its_exact_decimal_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        text = f'{{"results": [{{"message_id": "{A.message_id}", "status": 200, '
        text += '"body": {"receipt": "R-1", "amount": 840.10, "n": 1e5}}]}'
        return httpx.Response(200, content=text.encode())

    answer = split(send_batch([A], handler), [A.message_id])[A.message_id]

    assert Response(200, b'{"receipt": "R-1", "amount": 840.10, "n": 1E+5}') == answer


def test_an_item_body_of_plain_values_is_written_as_json_writes_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        text = f'{{"results": [{{"message_id": "{A.message_id}", "status": 200, "body": '
        text += '{"receipt":"R-1","n":7,"ok":true,"none":null,"text":"Товар \\"1\\"\\u0001"}}]}'
        return httpx.Response(200, content=text.encode())

    answer = split(send_batch([A], handler), [A.message_id])[A.message_id]

    expected = (
        '{"receipt": "R-1", "n": 7, "ok": true, "none": null, "text": "Товар \\"1\\"\\u0001"}'
    )
    assert Response(200, expected.encode()) == answer


def test_an_item_without_a_body_is_an_empty_body() -> None:
    handler = results({"message_id": A.message_id, "status": 200})

    classification = judged([A], handler)[A.message_id]

    assert (Verdict.DELIVERED, "") == (classification.verdict, classification.receipt)


def test_results_for_messages_not_in_the_request_are_ignored() -> None:
    handler = results(ok(A), {"message_id": "someone-else", "status": 422, "body": {}})

    assert {A.message_id: Verdict.DELIVERED} == {
        k: c.verdict for k, c in judged([A], handler).items()
    }


# -- an item the answer does not answer: unknown, never guessed delivered --------------------


def test_an_item_missing_from_the_results_is_unknown_while_the_others_count() -> None:
    decisions = decided([A, B], results(ok(A)))

    assert ("delivered", None) == (decisions[A.message_id].to_state.value, None)
    assert ("quarantined", "unknown-response") == (
        decisions[B.message_id].to_state.value,
        decisions[B.message_id].reason,
    )
    assert "no result for this message" in decisions[B.message_id].detail


def test_an_item_answered_twice_is_unknown() -> None:
    handler = results(ok(A), {"message_id": A.message_id, "status": 422, "body": {}}, ok(B))

    verdicts = {k: c.verdict for k, c in judged([A, B], handler).items()}

    assert {A.message_id: Verdict.UNKNOWN, B.message_id: Verdict.DELIVERED} == verdicts


@pytest.mark.parametrize("status", ["200", 200.0, True, None, 99, 600])
def test_an_item_without_a_valid_status_is_unknown(status: object) -> None:
    handler = results({"message_id": A.message_id, "status": status, "body": {}})

    classification = judged([A], handler)[A.message_id]

    assert Verdict.UNKNOWN == classification.verdict
    assert "no valid status" in classification.detail


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b'{"results": 3}',
        b'{"receipt": "R-1"}',
        b"[]",
        b'{"results": [{"message_id": "x", "status": 200',  # cut off
        b'{"results": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
    ],
)
def test_a_2xx_that_is_not_a_results_document_is_unknown_for_every_item(content: bytes) -> None:
    verdicts = judged([A, B], lambda request: httpx.Response(200, content=content))

    assert {A.message_id: Verdict.UNKNOWN, B.message_id: Verdict.UNKNOWN} == {
        k: c.verdict for k, c in verdicts.items()
    }


def test_a_results_body_larger_than_a_single_answers_cap_is_read_whole() -> None:
    big = "x" * (BODY_CAP // 2)
    handler = results(*({**ok(m), "body": {"receipt": "R", "note": big}} for m in (A, B, C)))

    verdicts = {k: c.verdict for k, c in judged([A, B, C], handler).items()}

    assert dict.fromkeys([A.message_id, B.message_id, C.message_id], Verdict.DELIVERED) == verdicts


# -- an answer to the whole request: every item, as a single answer --------------------------


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (503, Verdict.TEMPORARY),
        (500, Verdict.TEMPORARY),
        (429, Verdict.TEMPORARY),
        (401, Verdict.PAUSE),
        (403, Verdict.PAUSE),
        (302, Verdict.UNKNOWN),
        (400, Verdict.TERMINAL),
        (413, Verdict.TERMINAL),
        (418, Verdict.UNKNOWN),
    ],
)
def test_a_whole_batch_answer_applies_to_every_item(status: int, verdict: Verdict) -> None:
    handler: Handler = lambda request: httpx.Response(status, json={"error": "whole"})  # noqa: E731

    classified = judged([A, B, C], handler)

    assert [(verdict, status)] * 3 == [(c.verdict, c.http_status) for c in classified.values()]


def test_a_whole_batch_503_with_retry_after_delays_every_item_by_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": "outage"}, headers={"Retry-After": "12"})

    decisions = decided([A, B], handler)

    assert [("delayed", 12.0), ("delayed", 12.0)] == [
        (d.to_state.value, d.delay_s) for d in decisions.values()
    ]


def test_a_read_timeout_of_the_batch_is_temporary_result_unknown_for_every_item() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    classified = judged([A, B], handler)

    assert [(Verdict.TEMPORARY, "ReadTimeout", True)] * 2 == [
        (c.verdict, c.error_class, c.result_unknown) for c in classified.values()
    ]


def test_a_refused_connection_is_temporary_and_not_result_unknown_for_every_item() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    classified = judged([A, B], handler)

    assert [(Verdict.TEMPORARY, False)] * 2 == [
        (c.verdict, c.result_unknown) for c in classified.values()
    ]


def test_a_whole_batch_302_is_never_followed() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(302, headers={"Location": "/elsewhere"})

    judged([A], handler)

    assert [BATCH_PATH] == calls


# -- no batch endpoint -----------------------------------------------------------------------


def test_a_404_to_the_batch_request_means_the_site_has_no_batch_endpoint() -> None:
    result = send_batch([A], lambda request: httpx.Response(404, json={"error": "not found"}))

    assert True is endpoint_missing(result)


@pytest.mark.parametrize("status", [200, 400, 410, 503])
def test_other_answers_do_not_mean_a_missing_endpoint(status: int) -> None:
    assert False is endpoint_missing(Response(status, b"{}"))


def test_a_transport_failure_does_not_mean_a_missing_endpoint() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    assert False is endpoint_missing(send_batch([A], handler))
