"""Issue 12 item 4: a secret that comes back from outside is masked by value, in any quoting,
before it reaches anything that stores or shows it.

The site (or a library on the way, such as httpx on the proxy path) may repeat the token: an
error that prints the Authorization header as a bytes repr, a 4xx/5xx body that echoes the
request's headers as JSON. The promise: neither ``last_error``, the history, the log, the
status nor any report format ever holds the token, however it was quoted.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import FAST, one_channel_messages, price_row, run_worker, stage
from exchange.ops.quarantine import Filters
from exchange.report import collect as report
from exchange.settings import load_settings
from exchange.targets.shop_api.client import SiteClient

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# A token of visible ASCII that every quoting spells differently: a backslash and a quote
# (repr, JSON), "+", "/" and "=" (percent-encoding), "&" and "<" (HTML).
TOKEN = "tok\\Sec'ret+/=&<-99ZZ"


def quoted(token: str) -> dict[str, str]:
    header = f"Bearer {token}"
    return {
        "bytes repr": repr(header.encode()),  # what httpx's LocalProtocolError prints
        "str repr": repr(header),
        "json": json.dumps({"authorization": header}),
        "percent": httpx.URL("https://x/", params={"t": token}).query.decode(),
    }


def site(request: httpx.Request) -> httpx.Response:
    """Fails each SKU in a way that repeats the token it was sent; the site itself is up (its
    health check, which the worker's pace asks after a temporary failure, answers 200)."""
    if request.method == "GET":
        return httpx.Response(200, json={"status": "ok"})
    token = request.headers["authorization"].removeprefix("Bearer ")
    sku = json.loads(request.content)["aggregate"]
    forms = quoted(token)
    if sku == "SKU-REPR":  # the proxy path: httpx refusing a header, quoting it as bytes
        raise httpx.LocalProtocolError(f"Illegal header value {forms['bytes repr']}")
    if sku == "SKU-ECHO":  # a 422 that echoes the request's headers
        return httpx.Response(422, text=json.dumps({"error": "bad", "request": forms}))
    return httpx.Response(503, text=f"upstream said {forms['str repr']} {forms['percent']}")


@pytest.fixture
def captured_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    stream = io.StringIO()
    yield stream
    root.setLevel(saved[0])
    for handler in list(root.handlers):
        if handler not in saved[1]:
            root.removeHandler(handler)


def test_a_token_repeated_by_the_site_or_a_library_is_stored_shown_and_reported_masked(
    db_url: str, engine: Engine, captured_log: io.StringIO
) -> None:
    settings = load_settings(
        database_url=db_url,
        site_url="https://shop.example.com",
        site_token=TOKEN,
        worker_id="test-worker",
        **{**FAST, "max_attempts": 2, "log_level": "DEBUG"},
    )
    logs.configure(settings, stream=captured_log)
    stage(engine, [price_row(sku, 1) for sku in ("SKU-REPR", "SKU-ECHO", "SKU-503")])
    worker = bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(1)
    )
    run_worker(worker)

    with transaction(engine, read_only=True) as connection:
        stored = {
            row.aggregate: (row.state, row.reason, row.last_error)
            for row in connection.execute(select(messages))
        }
        details = [row.detail or "" for row in connection.execute(select(history))]
        data = report.collect(
            connection,
            Filters(),
            datetime.now(UTC),
            secrets=report.known_secrets(settings),
        )
    assert {"SKU-REPR", "SKU-ECHO", "SKU-503"} == set(stored)
    assert all(state == "quarantined" for state, _, _ in stored.values()), stored
    assert all("***" in (last_error or "") for _, _, last_error in stored.values()), stored
    shown: dict[str, str] = {
        "last_error": repr(stored),
        "history": "\n".join(details),
        "log": captured_log.getvalue(),
        "csv": report.render(data, "csv", "en").decode("utf-8"),
        "json": report.render(data, "json", "en").decode("utf-8"),
        "html": report.render(data, "html", "en").decode("utf-8"),
    }
    pieces = ["Sec'ret", "Sec\\'ret", "Sec\\\\'ret", "ret+/=", "ret%2B%2F", "-99ZZ"]
    leaks = {where: p for where, text in shown.items() for p in pieces if p in text}
    assert {} == leaks


async def _health(client: SiteClient) -> Any:
    try:
        return await client.health()
    finally:
        await client.aclose()


def test_the_site_client_masks_its_token_in_an_answer_body_and_an_error() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, content=b"you sent " + request.headers["authorization"].encode())

    transport = httpx.MockTransport(echo)
    client = SiteClient("https://x", TOKEN, timeout=1, concurrency=1, transport=transport)
    result = asyncio.run(_health(client))
    assert b"you sent Bearer ***" == result.body


@pytest.mark.parametrize("token", ["tok\r\nX-Evil: 1", "tok\x00", "tokén", "tok en"])
def test_the_site_client_refuses_a_token_that_cannot_go_into_a_header_without_showing_it(
    token: str,
) -> None:
    with pytest.raises(ValueError) as caught:
        SiteClient("https://x", token, timeout=1, concurrency=1)
    assert "tok" not in str(caught.value).replace("token", "")
