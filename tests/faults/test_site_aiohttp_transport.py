"""SiteClient's default wire (aiohttp directly, exchange/site.py) against the real site
simulator: every failure becomes the TransportFailure that httpx's own transport gives, with
``maybe_sent`` right, bodies are capped, redirects not followed, the pool bounded."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from exchange.site import (
    BODY_CAP,
    OutgoingMessage,
    Response,
    SiteClient,
    SiteResult,
    TransportFailure,
    _AiohttpWire,
)
from exchange.sitesim import Faults, SiteSimulator

TOKEN = "transport-token"


def message(n: int) -> OutgoingMessage:
    payload = f'{{"sku": "SKU-{n}", "price": "1.00", "currency": "RUB", "price_type": "retail"}}'
    return OutgoingMessage(
        f"m-{n}", "price", f"SKU-{n}", 1, payload, datetime(2026, 1, 1, tzinfo=UTC)
    )


def send(
    url: str, *messages: OutgoingMessage, timeout: float = 5.0, concurrency: int = 2
) -> list[SiteResult]:
    async def run() -> list[SiteResult]:
        client = SiteClient(url, TOKEN, timeout=timeout, concurrency=concurrency)
        assert isinstance(client._wire, _AiohttpWire)  # the default under test
        try:
            return list(await asyncio.gather(*(client.send(m) for m in messages)))
        finally:
            await client.aclose()

    return asyncio.run(run())


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


def test_a_delivered_update_is_a_200_with_its_receipt(site: SiteSimulator) -> None:
    [result] = send(site.url, message(1))
    assert isinstance(result, Response) and 200 == result.status
    assert b"receipt" in result.body and result.body_error is None


def test_a_refused_connection_is_not_sent() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    [result] = send(f"http://127.0.0.1:{port}", message(1))
    assert isinstance(result, TransportFailure)
    assert ("ConnectError", False) == (result.error_class, result.maybe_sent)


def test_no_answer_in_time_is_a_read_timeout_that_may_have_been_sent(site: SiteSimulator) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=3.0)
    [result] = send(site.url, message(1), timeout=0.3)
    assert isinstance(result, TransportFailure)
    assert ("ReadTimeout", True) == (result.error_class, result.maybe_sent)


def test_a_connection_shut_after_the_effect_may_have_been_sent(site: SiteSimulator) -> None:
    site.faults = Faults(drop_after_effect_rate=1.0)
    [result] = send(site.url, message(1))
    assert isinstance(result, TransportFailure)
    assert ("RemoteProtocolError", True) == (result.error_class, result.maybe_sent)
    assert 1 == len(site.effects())


def test_a_reset_connection_may_have_been_sent(site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="reset")
    [result] = send(site.url, message(1))
    assert isinstance(result, TransportFailure)
    assert ("ReadError", True) == (result.error_class, result.maybe_sent)


def test_a_redirect_is_an_answer_not_followed(site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="redirect")
    [result] = send(site.url, message(1))
    assert isinstance(result, Response) and 307 == result.status


def test_a_body_cut_off_is_a_body_error(site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="cut-off")
    [result] = send(site.url, message(1))
    assert isinstance(result, Response) and 200 == result.status
    assert result.body_error is not None and result.body_error.startswith("ReadError")


def test_a_huge_body_is_read_only_up_to_the_cap(site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="huge")
    [result] = send(site.url, message(1))
    assert isinstance(result, Response) and 200 == result.status
    assert BODY_CAP == len(result.body)


def test_no_more_connections_than_the_concurrency(site: SiteSimulator) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=0.4)
    started = time.monotonic()
    results = send(site.url, *(message(n) for n in range(4)), concurrency=2)
    assert {200} == {r.status for r in results if isinstance(r, Response)} and 4 == len(results)
    assert time.monotonic() - started >= 0.75  # two rounds of two, not four at once


def test_waiting_for_a_pooled_connection_past_the_timeout_is_not_sent(
    site: SiteSimulator,
) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=2.0)
    started = time.monotonic()
    first, second = send(site.url, message(1), message(2), timeout=0.5, concurrency=1)
    took = time.monotonic() - started
    assert isinstance(first, TransportFailure) and isinstance(second, TransportFailure)
    # One deadline bounds the pool's wait and the rest: the second request waits for the
    # first's connection, which its own deadline frees at about the second's deadline. Got
    # in time, it is sent (a ReadTimeout, maybe sent); else it never was (ConnectTimeout).
    # Either way both end within the timeout, and a request the site received is never
    # called "not sent".
    assert took < 0.5 + 0.75, f"took {took:.2f} s"
    outcomes = {(r.error_class, r.maybe_sent) for r in (first, second)}
    assert outcomes <= {("ReadTimeout", True), ("ConnectTimeout", False)}, outcomes
    received = {effect.message_id for effect in site.effects()}
    not_sent = {f"m-{n}" for n, r in ((1, first), (2, second)) if not r.maybe_sent}
    assert not received & not_sent
