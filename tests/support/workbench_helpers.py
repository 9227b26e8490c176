"""Shared set-up of the workbench tests: operators, a quarantine made the way production makes
one (a worker delivering to the site simulator, which refuses some aggregates with 422), and
a signed-in HTTP client that reads the CSRF token the pages carry."""

from __future__ import annotations

import html
import re
import threading
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.ops import operators

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

PASSWORD = "correct horse battery"
SKU = "SKU-0042"
HOSTILE_SKU = "<script>alert(\"x\")</script>=cmd|' /C calc'!A0"


def add_operator(engine: Engine, name: str, role: str, password: str = PASSWORD) -> None:
    with transaction(engine) as connection:
        operators.add(connection, name, role, password, datetime.now(UTC))


def deliver(db_url: str, site: SiteSimulator) -> None:
    """One worker's run until idle against ``site``, in a thread of its own (Playwright's
    synchronous API keeps an event loop running in the test's thread)."""
    failed: list[BaseException] = []

    def run() -> None:
        engine = make_engine(db_url)
        try:
            worker = bootstrap.worker(fast_settings(db_url, site.url, max_attempts=2), engine)
            run_worker(worker)
        except BaseException as exc:
            failed.append(exc)
        finally:
            engine.dispose()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(120)
    if failed:
        raise failed[0]


def quarantine_some(db_url: str, site: SiteSimulator, *skus: str) -> None:
    """Stage a price for each SKU; the site refuses them (422), so they end quarantined."""
    engine = make_engine(db_url)
    try:
        stage(engine, [price_row(sku, 1, "199.90") for sku in skus])
    finally:
        engine.dispose()
    site.faults.reject.update(skus)
    deliver(db_url, site)


def state_of(engine: Engine, aggregate: str) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.state).where(messages.c.aggregate == aggregate)
            ).scalar_one()
        )


def message_id_of(engine: Engine, aggregate: str) -> str:
    with transaction(engine, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.aggregate == aggregate)
            ).scalar_one()
        )


OPEN: list[httpx.Client] = []  # closed after each test (tests/web/test_workbench.py)


def new_client(base: str, **options: Any) -> httpx.Client:
    opened = httpx.Client(base_url=base, follow_redirects=False, timeout=60, **options)
    OPEN.append(opened)
    return opened


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()


def signed_in(base: str, name: str, password: str = PASSWORD) -> httpx.Client:
    return _sign_in(new_client(base), name, password)


def _sign_in(client: httpx.Client, name: str, password: str) -> httpx.Client:
    answer = log_in(client, name, password)
    assert answer.status_code == 303, answer.text
    return client


LOGIN_COOKIE = "exchange_wb_login"


def log_in(
    client: httpx.Client, name: str, password: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """A sign-in as the browser's form posts it (issue 33 item 7): the form read first, its
    CSRF token and sign-in cookie sent back (by hand where the cookie is ``Secure`` and the
    test speaks plain HTTP, as behind the proxy)."""
    page = client.get("/login", headers=headers)
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    assert found, page.text
    sent = [c for c in page.headers.get_list("set-cookie") if c.startswith(f"{LOGIN_COOKIE}=")]
    if any("; secure" in c.lower() for c in sent):  # not sent back over plain HTTP
        client.cookies.set(LOGIN_COOKIE, page.cookies[LOGIN_COOKIE], path="/login")
    data = {"csrf": found.group(1), "name": name, "password": password}
    return client.post("/login", data=data, headers=headers)


def csrf_of(client: httpx.Client, path: str = "/") -> str:
    page = client.get(path).text
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert found, page
    return found.group(1)


def post(client: httpx.Client, path: str, data: dict[str, Any]) -> httpx.Response:
    return client.post(path, data={"csrf": csrf_of(client), **data})


def confirm_fields(page: str) -> dict[str, list[str]]:
    """The hidden fields of a preview page's confirmation form, as a browser would send them."""
    found = re.search(r'<form method="post" action="/action/confirm".*?</form>', page, re.S)
    assert found, page
    fields: dict[str, list[str]] = {}
    for name, value in re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(0)
    ):
        fields.setdefault(html.unescape(name), []).append(html.unescape(value))
    return fields
