"""Sign-in CSRF (issue 33 item 7): ``POST /login`` took any form from anywhere, so a page
elsewhere could sign an operator's browser into its author's account (her actions then
recorded under his name, her notes typed into it). The sign-in form is protected as every
other form is: a CSRF token, bound (before there is a session) to a ``SameSite=Strict``
sign-in cookie, and the Origin, else the Referer, naming this site where the browser sends
one. A refused sign-in signs nobody in, changes nothing and costs no throttle slot; the form
it answers with works at once. On both databases."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select
from workbench_helpers import (
    LOGIN_COOKIE,
    PASSWORD,
    add_operator,
    close_all,
    log_in,
    new_client,
)

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import operator_sessions
from exchange.words import WORDS

FORGED = WORDS["login_forged"]["ru"].split(":")[0]  # «Эта форма входа устарела или …»
MALLORY = {"name": "mallory", "password": PASSWORD}


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def bench(serve: Callable[..., Any], db: Engine) -> str:
    base: str = serve()
    add_operator(db, "olga", "operator")
    add_operator(db, "mallory", "operator")  # the attacker's own account
    return base


def _sessions(db: Engine) -> int:
    with transaction(db, read_only=True) as connection:
        return int(
            connection.execute(select(func.count()).select_from(operator_sessions)).scalar_one()
        )


def _refused(answer: httpx.Response) -> bool:
    return (
        answer.status_code == 403
        and FORGED in answer.text
        and "exchange_wb" not in answer.cookies  # no session cookie
    )


def _token(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    assert found, page.text
    return found.group(1)


def test_a_sign_in_posted_from_another_site_signs_nobody_in(bench: str, db: Engine) -> None:
    """What a page elsewhere can send: the form's fields, with the browser's cookies of this
    site where it sends them, never the token of the form it cannot read."""
    victim = new_client(bench)
    victim.get("/login")  # she opened the sign-in page before: her browser holds its cookie
    before = _sessions(db)
    for headers in ({"Origin": "https://attacker.example"}, {}):
        answer = victim.post("/login", data=MALLORY, headers=headers)
        assert _refused(answer), answer.text[:300]
    guessed = victim.post("/login", data={**MALLORY, "csrf": "0" * 64})
    assert _refused(guessed)
    assert before == _sessions(db)
    assert 303 == log_in(victim, "olga", PASSWORD).status_code  # her own form still works


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://attacker.example"},
        {"Origin": "null"},  # a sandboxed frame, a data: page
        {"Referer": "https://attacker.example/signin.html"},
    ],
)
def test_a_sign_in_whose_origin_or_referer_is_another_site_is_refused_even_with_a_token(
    bench: str, db: Engine, headers: dict[str, str]
) -> None:
    client = new_client(bench)
    token = _token(client.get("/login"))
    before = _sessions(db)
    assert _refused(client.post("/login", data={**MALLORY, "csrf": token}, headers=headers))
    assert before == _sessions(db)


def test_the_real_form_signs_in_with_this_sites_origin_and_refreshes_a_stale_one(
    bench: str,
) -> None:
    client = new_client(bench)
    page = client.get("/login")
    (set_cookie,) = [c for c in page.headers.get_list("set-cookie") if LOGIN_COOKIE in c]
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/login"):
        assert flag.lower() in set_cookie.lower(), set_cookie
    here = {"Origin": bench, "Referer": f"{bench}/login"}
    stale = client.post("/login", data={"name": "olga", "password": PASSWORD, "csrf": "x"})
    assert _refused(stale)
    # The refusal carries a working form: sent again as it stands, it signs in.
    fresh = {"name": "olga", "password": PASSWORD, "csrf": _token(stale)}
    answer = client.post("/login", data=fresh, headers=here)
    assert (303, "/") == (answer.status_code, answer.headers["location"])
    assert "exchange_wb" in answer.cookies
