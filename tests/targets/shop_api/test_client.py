"""Contract 5: the request the service makes to the site (``site.SiteClient``), with respx."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.contracts import Accepted, StagingRow, validate
from exchange.targets.shop_api.client import (
    BODY_CAP,
    OutgoingMessage,
    Response,
    SiteClient,
    TransportFailure,
    body,
)

BASE = "https://shop.example.com"
TOKEN = "tok-3f9a1c77"
CREATED = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
CONTRACT_FIELDS = {"message_id", "kind", "aggregate", "version", "payload", "created_at"}


def message(
    payload: str,
    *,
    kind: str = "price",
    aggregate: str = "SKU-17",
    version: int = 184,
    created_at: datetime = CREATED,
) -> OutgoingMessage:
    """The message intake would make of this staging row."""
    result = validate(
        StagingRow(1, kind, aggregate, version, payload, "1", None, created_at), DEFAULT_KINDS
    )
    assert isinstance(result, Accepted), result
    return OutgoingMessage(result.message_id, kind, aggregate, version, result.payload, created_at)


def respx_wire() -> httpx.AsyncBaseTransport:
    """respx (using="httpx") answers at httpx's client, before any transport; SiteClient takes
    its httpx wire when it is given a transport. The default wire, aiohttp, meets a real server
    instead, as does httpx with its own transport: tests/faults/test_site_wires.py."""
    return httpx.AsyncHTTPTransport()


PRICE = message('{"sku": "SKU-17", "price": "840.00", "currency": "RUB", "price_type": "retail"}')


def send(outgoing: OutgoingMessage) -> Response | TransportFailure:
    async def run() -> Response | TransportFailure:
        client = SiteClient(BASE, TOKEN, timeout=5.0, concurrency=2, transport=respx_wire())
        try:
            return await client.send(outgoing)
        finally:
            await client.aclose()

    return asyncio.run(run())


def health() -> Response | TransportFailure:
    async def run() -> Response | TransportFailure:
        client = SiteClient(BASE + "/", TOKEN, timeout=5.0, concurrency=2, transport=respx_wire())
        try:
            return await client.health()
        finally:
            await client.aclose()

    return asyncio.run(run())


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert len(set(keys)) == len(keys), f"duplicate keys in {keys}"
    return dict(pairs)


def body_of(request: httpx.Request) -> dict[str, Any]:
    parsed = json.loads(
        request.content.decode("utf-8"), parse_float=Decimal, object_pairs_hook=no_duplicate_keys
    )
    assert isinstance(parsed, dict)
    return parsed


def sent_request(outgoing: OutgoingMessage) -> httpx.Request:
    with respx.mock(base_url=BASE, using="httpx", assert_all_called=True) as router:
        route = router.post("/api/v1/updates").mock(
            return_value=httpx.Response(200, json={"receipt": "R-1"})
        )
        send(outgoing)
    return route.calls.last.request


# -- the request -----------------------------------------------------------------------------


def test_send_posts_to_api_v1_updates() -> None:
    request = sent_request(PRICE)

    assert ("POST", f"{BASE}/api/v1/updates") == (request.method, str(request.url))


def test_send_carries_the_bearer_token() -> None:
    assert f"Bearer {TOKEN}" == sent_request(PRICE).headers["Authorization"]


def test_send_idempotency_key_is_the_message_id() -> None:
    assert PRICE.message_id == sent_request(PRICE).headers["Idempotency-Key"]


def test_send_content_type_is_application_json() -> None:
    assert "application/json" == sent_request(PRICE).headers["Content-Type"]


def test_send_body_has_exactly_the_contract_fields() -> None:
    body = body_of(sent_request(PRICE))

    assert {
        "message_id": PRICE.message_id,
        "kind": "price",
        "aggregate": "SKU-17",
        "version": 184,
        "payload": {"sku": "SKU-17", "price": "840.00", "currency": "RUB", "price_type": "retail"},
        "created_at": "2026-08-23T07:20:00Z",
    } == body
    assert CONTRACT_FIELDS == set(body)


def test_send_created_at_is_utc_with_z() -> None:
    late = message(
        '{"sku": "SKU-17", "price": "1"}',
        created_at=datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )

    assert "2026-12-31T23:59:59Z" == body_of(sent_request(late))["created_at"]


def test_send_price_payload_decimal_is_exact() -> None:
    precise = message('{"sku": "SKU-17", "price": 999999999999.9999}')

    assert "999999999999.9999" == body_of(sent_request(precise))["payload"]["price"]


def test_send_posting_payload_numbers_are_exact() -> None:
    posting = message(
        '{"amount": 12345678901234567890.123456789, "fee": 0.1, "tiny": 1e-30, "n": 7}',
        kind="financial_posting",
        aggregate="DOC-000184",
        version=1,
    )

    payload = body_of(sent_request(posting))["payload"]

    assert {
        "amount": Decimal("12345678901234567890.123456789"),
        "fee": Decimal("0.1"),
        "tiny": Decimal("1e-30"),
        "n": 7,
    } == payload


@pytest.mark.parametrize(
    "aggregate",
    ["Товар №17 🍎", 'SKU "17"', "SKU\\17", "SKU\u202e17"],
    ids=["cyrillic-emoji", "quotes", "backslash", "bidi"],
)
def test_send_body_keeps_text_aggregates_exactly(aggregate: str) -> None:
    outgoing = message(
        json.dumps({"sku": aggregate, "price": "1.00"}, ensure_ascii=False), aggregate=aggregate
    )

    body = body_of(sent_request(outgoing))

    assert (aggregate, aggregate) == (body["aggregate"], body["payload"]["sku"])
    assert outgoing.message_id == body["message_id"]


# -- the answer ------------------------------------------------------------------------------


def test_send_returns_status_body_and_retry_after() -> None:
    with respx.mock(base_url=BASE, using="httpx") as router:
        router.post("/api/v1/updates").mock(
            return_value=httpx.Response(503, content=b"down", headers={"Retry-After": "120"})
        )
        result = send(PRICE)

    assert Response(503, b"down", "120", None) == result


def test_redirect_is_not_followed() -> None:
    with respx.mock(base_url=BASE, using="httpx", assert_all_called=False) as router:
        router.post("/api/v1/updates").mock(
            return_value=httpx.Response(302, headers={"Location": f"{BASE}/elsewhere"})
        )
        elsewhere = router.route(path="/elsewhere").mock(return_value=httpx.Response(200))
        result = send(PRICE)

    assert isinstance(result, Response)
    assert 302 == result.status
    assert 0 == elsewhere.call_count


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("connection refused"), httpx.ConnectTimeout("connect timed out")],
    ids=["connect-error", "connect-timeout"],
)
def test_failure_before_sending_is_transport_failure_not_maybe_sent(error: Exception) -> None:
    with respx.mock(base_url=BASE, using="httpx") as router:
        router.post("/api/v1/updates").mock(side_effect=error)
        result = send(PRICE)

    assert TransportFailure(type(error).__name__, str(error), maybe_sent=False) == result


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("read timed out"),
        httpx.WriteTimeout("write timed out"),
        httpx.ReadError("connection reset"),
        httpx.RemoteProtocolError("server disconnected"),
    ],
    ids=["read-timeout", "write-timeout", "read-error", "protocol-error"],
)
def test_failure_after_sending_may_have_arrived(error: Exception) -> None:
    with respx.mock(base_url=BASE, using="httpx") as router:
        router.post("/api/v1/updates").mock(side_effect=error)
        result = send(PRICE)

    assert TransportFailure(type(error).__name__, str(error), maybe_sent=True) == result


def test_body_larger_than_the_cap_is_truncated() -> None:
    big = b"0123456789" * (BODY_CAP // 5)

    with respx.mock(base_url=BASE, using="httpx") as router:
        router.post("/api/v1/updates").mock(return_value=httpx.Response(200, content=big))
        result = send(PRICE)

    assert isinstance(result, Response)
    assert big[:BODY_CAP] == result.body


def test_body_within_the_cap_is_kept_whole() -> None:
    body = b"x" * (BODY_CAP - 1)

    with respx.mock(base_url=BASE, using="httpx") as router:
        router.post("/api/v1/updates").mock(return_value=httpx.Response(200, content=body))
        result = send(PRICE)

    assert Response(200, body, None, None) == result


# -- health ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 401, 403])
def test_health_gets_api_v1_health_with_the_token(status: int) -> None:
    with respx.mock(base_url=BASE, using="httpx", assert_all_called=True) as router:
        route = router.get("/api/v1/health").mock(return_value=httpx.Response(status))
        result = health()

    request = route.calls.last.request
    assert ("GET", f"{BASE}/api/v1/health") == (request.method, str(request.url))
    assert f"Bearer {TOKEN}" == request.headers["Authorization"]
    assert isinstance(result, Response)
    assert status == result.status


def test_health_connection_refused_is_transport_failure() -> None:
    with respx.mock(base_url=BASE, using="httpx") as router:
        router.get("/api/v1/health").mock(side_effect=httpx.ConnectError("refused"))
        result = health()

    assert isinstance(result, TransportFailure)
    assert not result.maybe_sent


# -- the body's text -------------------------------------------------------------------------


@given(
    message_id=st.text(),
    kind=st.text(),
    aggregate=st.text(),
    version=st.integers(min_value=1, max_value=2**63 - 1),
)
def test_body_is_the_text_json_dumps_writes_for_its_fields(
    message_id: str, kind: str, aggregate: str, version: int
) -> None:
    payload = '{"price": 840.00}'
    outgoing = OutgoingMessage(message_id, kind, aggregate, version, payload, CREATED)
    head = json.dumps(
        {"message_id": message_id, "kind": kind, "aggregate": aggregate, "version": version},
        ensure_ascii=False,
    )[:-1]

    assert (
        head + f', "payload": {payload}, "created_at": "2026-08-23T07:20:00Z"}}'
    ).encode() == body(outgoing)


# -- how a body goes out on the aiohttp wire -------------------------------------------------


@pytest.mark.parametrize(
    ("size", "one_write"),
    [(0, True), (20 * 1024, True), (256 * 1024, True), (256 * 1024 + 1, False)],
)
def test_a_body_up_to_256_kib_goes_with_its_headers_in_one_write_and_a_larger_one_is_streamed(
    size: int, one_write: bool
) -> None:
    # A batch of 100 items is ~20 KB: streamed in 16 KB chunks it cost the worker ~6 us a
    # message (bench/run.py). Past 256 KiB the body is streamed, so that bytes never block
    # the loop, and the request counts as written only once its last chunk went out (a deaf
    # site is then a WriteTimeout, tests/faults/test_site_wires.py).
    from exchange.targets.shop_api import wire_aiohttp
    from exchange.targets.shop_api.request import Progress

    progress = Progress()
    content = b"x" * size
    payload = wire_aiohttp._body(content, progress)

    async def streamed() -> bytes:
        chunks = [chunk async for chunk in payload._value]
        assert progress.written, "written once its last chunk is handed on"
        return b"".join(chunks)

    if one_write:
        assert content == payload
        assert progress.written
    else:
        assert not progress.written, "a streamed body is not written until its last chunk"
        assert content == asyncio.run(streamed())
