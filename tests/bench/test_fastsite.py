"""The benchmark's own site (bench/fastsite.py) keeps the site's promises, so its counts can be
trusted: idempotency by key, 409 stale, the batch API, the bearer token.

The simulator runs as the bench runs it: a separate process on a free loopback port.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from exchange.domain.identity import message_id
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.client import body

FASTSITE = Path(__file__).resolve().parents[2] / "bench" / "fastsite.py"
TOKEN = "smoke-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(FASTSITE), "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until it listens (or dies: EOF)
        found = re.search(r"http://\S+", line)
        assert found, f"fastsite did not start: {line!r}"
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def http(site_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site_url, timeout=30) as client:
        client.post("/bench/reset").raise_for_status()
        yield client


def update(sku: str, version: int, price: str) -> tuple[str, bytes]:
    payload = f'{{"currency": "RUB", "price": "{price}", "price_type": "retail", "sku": "{sku}"}}'
    created = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    message = OutgoingMessage(
        message_id("price", sku, version), "price", sku, version, payload, created
    )
    return message.message_id, body(message)


def post(http: httpx.Client, key: str, body: bytes) -> httpx.Response:
    return http.post("/api/v1/updates", content=body, headers={**AUTH, "Idempotency-Key": key})


def stats(http: httpx.Client) -> dict[str, Any]:
    answer: dict[str, Any] = http.get("/bench/stats").json()
    return answer


def test_the_same_key_and_body_twice_is_one_effect_and_the_same_answer(
    http: httpx.Client,
) -> None:
    key, body = update("SKU-1", 3, "840.00")
    first = post(http, key, body)
    second = post(http, key, body)
    assert 200 == first.status_code
    assert "receipt" in first.json()
    assert (200, first.content) == (second.status_code, second.content)
    figures = stats(http)
    assert (1, 1, 1) == (figures["effects"], figures["replays"], figures["max_effects_per_key"])


def test_the_same_key_with_another_body_is_refused_without_an_effect(
    http: httpx.Client,
) -> None:
    key, body = update("SKU-1", 3, "840.00")
    _, other = update("SKU-1", 3, "840.01")
    assert 200 == post(http, key, body).status_code
    refused = post(http, key, other)
    assert (422, {"error": "idempotency-key-reuse"}) == (refused.status_code, refused.json())
    assert 1 == stats(http)["effects"]


def test_a_version_at_or_below_the_held_one_is_409_stale_with_the_current_version(
    http: httpx.Client,
) -> None:
    assert 200 == post(http, *update("SKU-2", 5, "1.00")).status_code
    stale = post(http, *update("SKU-2", 4, "2.00"))
    assert (409, {"error": "stale", "current_version": 5}) == (stale.status_code, stale.json())
    assert 1 == stats(http)["effects"]


def test_a_batch_answers_per_item_and_replays_a_key_already_applied(
    http: httpx.Client,
) -> None:
    key_a, body_a = update("SKU-A", 1, "10.00")
    key_b, body_b = update("SKU-B", 1, "20.00")
    applied = post(http, key_a, body_a).json()
    answer = http.post(
        "/api/v1/updates:batch",
        content=b'{"items": [' + body_a + b", " + body_b + b"]}",
        headers=AUTH,
    )
    assert 200 == answer.status_code
    results = answer.json()["results"]
    assert [key_a, key_b] == [r["message_id"] for r in results]
    assert [200, 200] == [r["status"] for r in results]
    assert applied == results[0]["body"]
    figures = stats(http)
    assert (2, 2, 1) == (figures["effects"], figures["distinct_effect_keys"], figures["replays"])


def test_a_request_without_the_token_is_401_and_has_no_effect(http: httpx.Client) -> None:
    key, body = update("SKU-1", 1, "1.00")
    refused = http.post("/api/v1/updates", content=body, headers={"Idempotency-Key": key})
    assert 401 == refused.status_code
    assert 0 == stats(http)["effects"]


def test_latency_holds_every_update_at_least_that_long() -> None:
    """``--latency MS`` (the scale section's shop across a network): no answer comes sooner."""
    proc = subprocess.Popen(
        [sys.executable, str(FASTSITE), "--port", "0", "--token", TOKEN, "--latency", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"http://\S+", proc.stdout.readline())
        assert found, "fastsite did not start"
        with httpx.Client(base_url=found.group(0), timeout=30) as client:
            key, body = update("SKU-L", 1, "1.00")
            started = time.monotonic()
            answer = post(client, key, body)
            held = time.monotonic() - started
        assert 200 == answer.status_code
        assert held >= 0.3
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
