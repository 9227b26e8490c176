"""With TLS, or behind ``EXCHANGE_HTTP_BEHIND_PROXY=true`` (a proxy that terminates TLS),
the workbench's cookies are ``Secure`` and HSTS is sent (contract 9, issue 21 item 11); on
loopback plain HTTP neither is (a browser would drop a Secure cookie there)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from securitytools import Pki
from sqlalchemy import Engine
from web_helpers import running, web_settings
from workbench_helpers import PASSWORD, add_operator, log_in

from exchange.db.engine import make_engine


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def _cookie_headers(response: httpx.Response) -> dict[str, str]:
    return {header.split("=", 1)[0]: header for header in response.headers.get_list("set-cookie")}


def _secure(header: str) -> bool:
    return "secure" in [part.strip().lower() for part in header.split(";")]


def _sign_in_and_switch_language(client: httpx.Client) -> tuple[httpx.Response, httpx.Response]:
    login = log_in(client, "olga", PASSWORD)
    assert login.status_code == 303, login.text
    # A Secure cookie is not sent back over plain HTTP (the test's side of the proxy): by hand.
    client.cookies.set("exchange_wb", login.cookies["exchange_wb"])
    page = client.get("/?lang=en")
    assert page.status_code == 200
    return login, page


def test_behind_the_proxy_cookies_are_secure_and_hsts_is_sent(
    db_url: str, db: Engine, tmp_path: Path
) -> None:
    add_operator(db, "olga", "operator")
    settings = web_settings(db_url, tmp_path / "1c", http_behind_proxy=True)
    with running(settings) as base, httpx.Client(base_url=base) as client:
        login, page = _sign_in_and_switch_language(client)
        assert _secure(_cookie_headers(login)["exchange_wb"])
        assert _secure(_cookie_headers(page)["exchange_lang"])
        for answer in (login, page, client.get("/login"), client.get("/healthz")):
            assert answer.headers["strict-transport-security"].startswith("max-age=")


def test_with_tls_cookies_are_secure_and_hsts_is_sent(
    db_url: str, db: Engine, tmp_path: Path, pki: Pki
) -> None:
    add_operator(db, "olga", "operator")
    settings = web_settings(
        db_url, tmp_path / "1c", http_tls_cert=str(pki.site_cert), http_tls_key=str(pki.site_key)
    )
    with running(settings) as base:
        secure_base = base.replace("http://", "https://")
        with httpx.Client(
            base_url=secure_base, verify=ssl.create_default_context(cafile=str(pki.ca))
        ) as client:
            login, page = _sign_in_and_switch_language(client)
            assert _secure(_cookie_headers(login)["exchange_wb"])
            assert _secure(_cookie_headers(page)["exchange_lang"])
            assert login.headers["strict-transport-security"].startswith("max-age=")


def test_on_loopback_plain_http_neither_secure_cookies_nor_hsts(
    db_url: str, db: Engine, tmp_path: Path
) -> None:
    add_operator(db, "olga", "operator")
    with running(web_settings(db_url, tmp_path / "1c")) as base, httpx.Client(base_url=base) as c:
        login, page = _sign_in_and_switch_language(c)
        assert not _secure(_cookie_headers(login)["exchange_wb"])
        assert not _secure(_cookie_headers(page)["exchange_lang"])
        assert "strict-transport-security" not in login.headers
