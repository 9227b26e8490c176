"""Both of SiteClient's wires against the real site simulator, one fault catalogue: aiohttp
directly (production's default) and httpx with its own transport (the wire production takes
when a proxy is configured in the environment). Each fault must come back as the same
``Response`` or the same ``TransportFailure`` (``error_class``, ``maybe_sent``) on both, since
the history and the classification must not depend on the wire. Also checked here: which wire
runs when (the proxy variables), and that a configured proxy really carries the requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp.http_exceptions import ContentLengthError
from tcpproxy import TcpProxy

from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.client import (
    BODY_CAP,
    Response,
    SiteClient,
    SiteResult,
    TransportFailure,
    body,
)
from exchange.targets.shop_api.wire_aiohttp import _failure

# Request deadlines are asserted in wall-clock time: never beside another timing test.
pytestmark = pytest.mark.timing

TOKEN = "transport-token"
WIRES = ("aiohttp", "httpx")
# Every variable urllib.request.getproxies() (and so httpx) reads on Linux.
PROXY_VARIABLES = [
    name
    for scheme in ("http", "https", "all", "no", "ftp")
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
]
NOWHERE = "http://proxy.invalid:9"  # a proxy that cannot be reached: using it fails loudly


def message(n: int, payload: str | None = None) -> OutgoingMessage:
    payload = payload or (
        f'{{"sku": "SKU-{n}", "price": "1.00", "currency": "RUB", "price_type": "retail"}}'
    )
    return OutgoingMessage(
        f"m-{n}", "price", f"SKU-{n}", 1, payload, datetime(2026, 1, 1, tzinfo=UTC)
    )


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The environment without any proxy variable, whatever the machine running the tests has."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest, no_proxy_settings: pytest.MonkeyPatch) -> str:
    """The wire under test, chosen the way production chooses it. httpx: a proxy is set in the
    environment, as an operator would set it, with loopback exempt (NO_PROXY), so that the
    faults reach the client as the site made them and not as a proxy passes them on."""
    if request.param == "httpx":
        no_proxy_settings.setenv("HTTP_PROXY", NOWHERE)
        no_proxy_settings.setenv("HTTPS_PROXY", NOWHERE)
        no_proxy_settings.setenv("NO_PROXY", "127.0.0.1")
    return str(request.param)


def send(
    wire: str,
    url: str,
    *messages: OutgoingMessage,
    timeout: float = 5.0,
    concurrency: int = 2,
) -> list[SiteResult]:
    async def run() -> list[SiteResult]:
        client = SiteClient(url, TOKEN, timeout=timeout, concurrency=concurrency)
        assert wire == client.wire  # the wire under test, picked by the client itself
        try:
            return list(await asyncio.gather(*(client.send(m) for m in messages)))
        finally:
            await client.aclose()

    return asyncio.run(run())


def failure(result: SiteResult) -> tuple[str, bool]:
    assert isinstance(result, TransportFailure), result
    return result.error_class, result.maybe_sent


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN, keep_requests=True) as simulator:
        yield simulator


# -- which wire runs when -------------------------------------------------------------------


def client_wire(url: str = "https://shop.example.com") -> str:
    async def build() -> str:
        client = SiteClient(url, TOKEN, timeout=1.0, concurrency=1)
        await client.aclose()
        return client.wire

    return asyncio.run(build())


def test_without_a_proxy_in_the_environment_production_runs_the_aiohttp_wire(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    assert "aiohttp" == client_wire("https://shop.example.com")
    assert "aiohttp" == client_wire("http://127.0.0.1:8080")


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("HTTPS_PROXY", "https://shop.example.com"),
        ("https_proxy", "https://shop.example.com"),
        ("HTTP_PROXY", "http://shop.example.com"),
        ("ALL_PROXY", "https://shop.example.com"),
    ],
)
def test_a_proxy_for_the_sites_scheme_in_the_environment_switches_to_the_httpx_wire(
    no_proxy_settings: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    no_proxy_settings.setenv(variable, NOWHERE)
    assert "httpx" == client_wire(url)


@pytest.mark.parametrize(
    ("variables", "url"),
    [
        ({"NO_PROXY": "localhost,127.0.0.1"}, "https://shop.example.com"),  # set in many images
        ({"FTP_PROXY": NOWHERE}, "https://shop.example.com"),
        ({"HTTP_PROXY": NOWHERE}, "https://shop.example.com"),  # httpx would not use it
        ({"HTTPS_PROXY": NOWHERE, "NO_PROXY": "*"}, "https://shop.example.com"),
    ],
)
def test_proxy_variables_that_would_not_proxy_the_site_keep_the_aiohttp_wire(
    no_proxy_settings: pytest.MonkeyPatch, variables: dict[str, str], url: str
) -> None:
    for name, value in variables.items():
        no_proxy_settings.setenv(name, value)
    assert "aiohttp" == client_wire(url)


def test_a_proxy_in_the_environment_carries_the_requests_on_the_httpx_wire(
    site: SiteSimulator, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    # A TCP relay to the site is a forward proxy for plain HTTP: the request line it passes on
    # is in absolute form, which only a client talking to a proxy writes.
    with TcpProxy("127.0.0.1", site.port) as proxy:
        no_proxy_settings.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        site_url = f"http://localhost:{site.port}"  # not the proxy's address, and resolvable
        [result] = send("httpx", site_url, message(1))
        assert 1 <= proxy.accepted
    assert isinstance(result, Response) and 200 == result.status
    [received] = site.received()
    assert f"{site_url}/api/v1/updates" == received.path
    assert 1 == len(site.effects())


# -- the fault catalogue, on both wires ---------------------------------------------------


def test_a_delivered_update_is_a_200_with_its_receipt_and_the_same_request_on_the_wire(
    wire: str, site: SiteSimulator
) -> None:
    [result] = send(wire, site.url, message(1))
    assert isinstance(result, Response) and 200 == result.status
    assert b'{"receipt":"R-1"}' == result.body and result.body_error is None
    [received] = site.received()
    assert ("POST", "/api/v1/updates", body(message(1))) == (
        received.method,
        received.path,
        received.body,
    )
    expected = {
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "idempotency-key": "m-1",
        "user-agent": "exchange/0.1",
    }
    assert expected == {name: received.headers.get(name) for name in expected}


def test_health_and_a_batch_are_answered_alike(wire: str) -> None:
    async def run(url: str) -> tuple[SiteResult, SiteResult]:
        client = SiteClient(url, TOKEN, timeout=5.0, concurrency=2)
        assert wire == client.wire
        try:
            return await client.health(), await client.send_batch([message(1), message(2)])
        finally:
            await client.aclose()

    with SiteSimulator(token=TOKEN, batch_enabled=True) as batch_site:
        health, batch = asyncio.run(run(batch_site.url))
        assert 2 == len(batch_site.effects())
    assert isinstance(health, Response) and (200, b'{"status":"ok"}') == (
        health.status,
        health.body,
    )
    assert isinstance(batch, Response) and 200 == batch.status
    assert b'"receipt":"R-1"' in batch.body and b'"receipt":"R-2"' in batch.body


def test_a_large_batch_goes_with_its_length_never_chunked(wire: str) -> None:
    # A body over the streaming threshold still says its Content-Length: a site (or a proxy)
    # that refuses chunked requests with 411 takes it like a small one.
    messages = [message(n) for n in range(1, 401)]

    async def run(url: str) -> SiteResult:
        client = SiteClient(url, TOKEN, timeout=10.0, concurrency=2)
        try:
            return await client.send_batch(messages)
        finally:
            await client.aclose()

    with SiteSimulator(token=TOKEN, batch_enabled=True, keep_requests=True) as site:
        result = asyncio.run(run(site.url))
        [received] = site.received()
        effects = len(site.effects())
    assert isinstance(result, Response) and 200 == result.status
    assert 400 == effects
    assert "chunked" not in received.headers.get("transfer-encoding", "")
    assert str(len(received.body)) == received.headers["content-length"]
    assert len(received.body) > 16 * 1024, "the body went the streamed way"


def test_a_refused_connection_is_a_connect_error_not_sent(wire: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
        port = probe.getsockname()[1]
        [result] = send(wire, f"http://127.0.0.1:{port}", message(1))
    assert ("ConnectError", False) == failure(result)


def test_no_answer_in_time_is_a_read_timeout_that_may_have_been_sent(
    wire: str, site: SiteSimulator
) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=3.0)  # ten times the timeout
    [result] = send(wire, site.url, message(1), timeout=0.3)
    assert ("ReadTimeout", True) == failure(result)
    assert 1 == len(site.received())


def test_waiting_for_a_pooled_connection_past_the_timeout_is_a_pool_timeout_not_sent(
    wire: str, site: SiteSimulator
) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=2.0)
    started = time.monotonic()
    first, second = send(wire, site.url, message(1), message(2), timeout=0.5, concurrency=1)
    # Both deadlines run together: 0.5 s and a moment; a first request left to wait for the
    # site's answer takes its 2 s: 1.5 s of slack for a loaded machine.
    assert time.monotonic() - started < 2.0, "each request ends within its one deadline"
    assert ("ReadTimeout", True) == failure(first)
    # One deadline bounds the whole request, the pool's wait included. The second waited for
    # the pool; the connection the first frees at its own deadline may reach the second just
    # before the second's: it is then written, and said to be maybe sent. The promise is the
    # safe direction: a request the site received is never said to be "not sent". A request
    # written at the last moment may not be read by the site before the check (seen at a load
    # of 4 with the CPU also burnt by another process): "maybe sent" is then still true.
    if 1 == len(site.received()):
        assert failure(second) in {
            ("PoolTimeout", False),
            ("ConnectTimeout", False),
            ("ReadTimeout", True),
            ("WriteTimeout", True),
        }
    else:
        assert failure(second) in {("ReadTimeout", True), ("WriteTimeout", True)}, (
            "the site received it: maybe sent"
        )


def test_a_site_that_never_reads_the_request_is_a_write_timeout_and_is_hung_up_on(
    wire: str,
) -> None:
    with socket.socket() as deaf:
        deaf.bind(("127.0.0.1", 0))
        deaf.listen(1)  # the connection completes in the backlog and is not read
        port = deaf.getsockname()[1]
        big = message(1, '{"padding": "' + "x" * (32 * 1024 * 1024) + '"}')
        started = time.monotonic()
        [result] = send(wire, f"http://127.0.0.1:{port}", big, timeout=0.3)
        assert ("WriteTimeout", True) == failure(result)
        assert time.monotonic() - started < 5  # 0.3 s bounded; unbounded, never ends
        # The client is done with it: the connection must be gone, not left to flush its
        # unsent rest to a site that does not read (the socket would stay open for ever).
        connection, _ = deaf.accept()
        with connection:
            connection.settimeout(2.0)
            with contextlib.suppress(ConnectionResetError):
                while connection.recv(1 << 20):
                    pass


def test_a_connection_shut_after_the_effect_is_a_protocol_error_that_may_have_been_sent(
    wire: str, site: SiteSimulator
) -> None:
    site.faults = Faults(drop_after_effect_rate=1.0)
    [result] = send(wire, site.url, message(1))
    assert ("RemoteProtocolError", True) == failure(result)
    assert 1 == len(site.effects())


def test_a_reset_connection_is_a_read_error_that_may_have_been_sent(
    wire: str, site: SiteSimulator
) -> None:
    site.faults = Faults(answer_fault="reset")
    [result] = send(wire, site.url, message(1))
    assert ("ReadError", True) == failure(result)
    assert 1 == len(site.received()) and [] == site.effects()


def test_a_redirect_is_an_answer_and_is_not_followed(wire: str, site: SiteSimulator) -> None:
    with SiteSimulator(token=TOKEN, keep_requests=True) as elsewhere:
        site.faults = Faults(answer_fault="redirect", redirect_to=f"{elsewhere.url}/api/v1/updates")
        [result] = send(wire, site.url, message(1))
        assert [] == elsewhere.received()
    assert isinstance(result, Response) and 307 == result.status


def test_a_body_cut_off_is_a_200_with_a_body_error(wire: str, site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="cut-off")
    [result] = send(wire, site.url, message(1))
    assert isinstance(result, Response) and 200 == result.status
    assert result.body_error is not None
    assert "RemoteProtocolError" == result.body_error.split(":")[0], result.body_error


def test_a_huge_body_is_read_only_up_to_the_cap(wire: str, site: SiteSimulator) -> None:
    site.faults = Faults(answer_fault="huge")  # 256 MiB promised and streamed
    [result] = send(wire, site.url, message(1))
    assert isinstance(result, Response) and (200, None) == (result.status, result.body_error)
    assert BODY_CAP == len(result.body)
    assert result.body.startswith(b'{"receipt":"R-1","padding":"')


@pytest.mark.parametrize("retry_after", ["7", "Wed, 21 Oct 2026 07:28:00 GMT"])
def test_retry_after_is_passed_through_as_the_site_wrote_it(
    wire: str, site: SiteSimulator, retry_after: str
) -> None:
    site.faults = Faults(fail_rate=1.0, retry_after=retry_after)
    [result] = send(wire, site.url, message(1))
    assert isinstance(result, Response) and (503, retry_after) == (
        result.status,
        result.retry_after,
    )


def test_no_more_connections_than_the_concurrency(wire: str, site: SiteSimulator) -> None:
    site.faults = Faults(slow_rate=1.0, slow_seconds=0.4)
    started = time.monotonic()
    results = send(wire, site.url, *(message(n) for n in range(4)), concurrency=2)
    assert [200] * 4 == [r.status for r in results if isinstance(r, Response)]
    # two rounds of two, not four at once (0.4 s): a lower bound, which load only helps
    assert time.monotonic() - started >= 0.75


def test_a_certificate_not_trusted_is_a_tls_error_not_sent(wire: str, tmp_path: Path) -> None:
    done = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "key.pem", "-out", "cert.pem",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    with SiteSimulator(token=TOKEN, ssl_context=context, keep_requests=True) as tls_site:
        [result] = send(wire, tls_site.url, message(1))  # self-signed: no CA vouches for it
        assert [] == tls_site.received()
    assert ("TLSError", False) == failure(result)
    assert isinstance(result, TransportFailure) and "CERTIFICATE_VERIFY_FAILED" in result.detail


def test_a_body_cut_off_by_a_socket_error_is_a_read_error_as_httpx_names_it() -> None:
    # The simulator cuts bodies off by closing early (above); a reset mid-body it cannot make
    # on demand, so aiohttp's error for it is built here as aiohttp raises it.
    reset = aiohttp.ClientPayloadError("Response payload is not completed")
    reset.__cause__ = aiohttp.ClientConnectionResetError("Connection reset by peer")
    early = aiohttp.ClientPayloadError("Response payload is not completed")
    early.__cause__ = ContentLengthError("Not enough data to satisfy content length header")
    assert ("ReadError", True) == failure(_failure(reset))
    assert ("RemoteProtocolError", True) == failure(_failure(early))
