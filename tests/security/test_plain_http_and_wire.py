"""What goes on the wire: plain http:// only to this machine unless explicitly allowed, and
requests that carry the contract's fields and headers and nothing of the staging table besides.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from securitytools import RecordingSite, Sent, Wiretap
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.db.migrate import upgrade
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, posting_row, price_row, run_worker, stage
from exchange.domain.identity import message_id
from exchange.errors import ConfigurationError
from exchange.settings import load_settings
from exchange.targets.shop_api.wire_aiohttp import AiohttpWire

CONTRACT_FIELDS = {"message_id", "kind", "aggregate", "version", "payload", "created_at"}
# Contract 5's headers, User-Agent, and what HTTP/1.1 itself needs: httpx adds all five,
# aiohttp (the default wire) all but "connection" (keep-alive is HTTP/1.1's default).
DOCUMENTED_HEADERS = {"authorization", "idempotency-key", "content-type", "user-agent"}
HTTP_FRAMING = {"host", "content-length", "accept", "accept-encoding", "connection"}

# -- plain http:// -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://127.203.4.5/shop",
        "http://[::1]:8080",
        "http://localhost:8080",
        "http://LocalHost",
    ],
)
def test_plain_http_to_a_loopback_site_is_accepted(url: str) -> None:
    assert url.rstrip("/") == load_settings(site_url=url).site_url


@pytest.mark.parametrize(
    "url",
    [
        "http://shop.example.com",
        "http://10.0.0.5:8080",
        "http://[2001:db8::1]/api",
        "http://127.0.0.1.nip.io",
        "http://localhost.example.com",
        "http://0.0.0.0:8080",
    ],
)
def test_plain_http_to_any_other_host_is_refused_with_one_line_naming_the_switch(
    url: str,
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        load_settings(site_url=url)
    message = str(refused.value)
    assert 1 == len(message.splitlines())
    assert "EXCHANGE_SITE_URL" in message and "EXCHANGE_SITE_ALLOW_HTTP=true" in message


def test_plain_http_to_another_host_is_accepted_when_explicitly_allowed() -> None:
    settings = load_settings(site_url="http://shop.example.com", site_allow_http=True)
    assert "http://shop.example.com" == settings.site_url


@pytest.mark.parametrize("url", ["https://shop.example.com", "https://10.0.0.5:8443"])
def test_https_is_accepted_for_any_host(url: str) -> None:
    assert url == load_settings(site_url=url).site_url


def test_run_with_plain_http_to_another_host_exits_2_with_one_line_and_no_secret(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exchange", "run", "--once"],
        env={
            "PATH": "/usr/bin:/bin",
            "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
            "EXCHANGE_SITE_URL": "http://shop.example.com/api",
            "EXCHANGE_SITE_TOKEN": "tok-plain-http-secret",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 2 == done.returncode, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "EXCHANGE_SITE_ALLOW_HTTP" in line, line
    assert "shop.example.com" in line
    for secret in ("tok-plain-http-secret",):
        assert secret not in done.stdout + done.stderr


# -- the requests ----------------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'wire.db'}"
    engine = make_engine(url)
    upgrade(engine)
    yield url, engine
    engine.dispose()


@pytest.mark.parametrize("wire", ["aiohttp", "httpx"])
def test_requests_carry_exactly_the_contract_fields_and_headers_whatever_staging_holds(
    engine: tuple[str, Engine], wire: str
) -> None:
    """aiohttp: the default wire, recorded by the server it talks to. httpx: the wire of an
    injected transport (tests) or a proxy, recorded by a wiretap transport."""
    url, db = engine
    # Every staging column 1C may fill, the optional ones included.
    extra = {
        "source_ref": "Реализация 0042 (внутренняя пометка)",
        "schema_version": "1",
        "created_at": datetime(2026, 8, 23, 7, 20, tzinfo=UTC),
    }
    stage(db, [price_row("SKU-1", 3, "840.10", **extra), posting_row("DOC-1", 1, **extra)])
    sent = deliver_recording(url, db, wire)
    updates = [s for s in sent if s.path == "/api/v1/updates"]
    assert 2 == len(updates)
    bodies = {json.loads(s.content)["kind"]: json.loads(s.content) for s in updates}
    for sent in updates:
        body = json.loads(sent.content)
        assert CONTRACT_FIELDS == set(body), sorted(body)
        assert set(sent.headers) - HTTP_FRAMING == DOCUMENTED_HEADERS, sorted(sent.headers)
        assert body["message_id"] == sent.headers["idempotency-key"]
        assert "Bearer test-token" == sent.headers["authorization"]
        assert "application/json" == sent.headers["content-type"]
        assert sent.headers["user-agent"].startswith("exchange/")
        assert "2026-08-23T07:20:00Z" == body["created_at"]
        assert "Реализация" not in sent.content.decode("utf-8")  # source_ref stays at home
    assert {"sku": "SKU-1", "price": "840.10", "currency": "RUB", "price_type": "retail"} == (
        bodies["price"]["payload"]
    )
    assert {"document": "DOC-1", "line": 1, "amount": "10.00"} == bodies["financial_posting"][
        "payload"
    ]
    assert message_id("price", "SKU-1", 3) == bodies["price"]["message_id"]


def deliver_recording(url: str, db: Engine, wire: str) -> list[Sent]:
    """Deliver what is staged through the given wire; every request as it was sent."""
    if wire == "aiohttp":
        with RecordingSite() as recording:
            worker = bootstrap.worker(fast_settings(url, recording.url), db)
            assert isinstance(worker.target.client._wire, AiohttpWire)
            run_worker(worker)
            return recording.sent
    wiretap = Wiretap()
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        worker = bootstrap.worker(fast_settings(url, site.url), db, transport=wiretap)
        run_worker(worker)
        assert 2 == len(site.effects())
    return wiretap.sent
