"""Sign-in CSRF in a real browser (issue 33 item 7): a page on another site that posts its
author's name and password to ``/login`` (as the issue's attacker did) leaves the operator's
browser signed in as nobody; the real form still signs her in. Debian's chromium, driven by
Playwright; the attacker's page is served by Playwright itself at an address of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from browser_helpers import new_page, sign_in
from sqlalchemy import Engine
from workbench_helpers import PASSWORD, add_operator

ATTACKER = "http://attacker.test/"


def _attackers_page(base: str) -> str:
    return (
        "<!doctype html><html><body>"
        f'<form id="f" method="post" action="{base}/login">'
        '<input name="name" value="mallory">'
        f'<input name="password" value="{PASSWORD}">'
        "</form><script>document.getElementById('f').submit()</script>"
        "</body></html>"
    )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_sign_in_form_on_another_site_leaves_the_browser_signed_in_as_nobody(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    add_operator(db, "mallory", "operator")
    page = new_page(browser)
    page.goto(f"{base}/login")  # she opened the sign-in page before: the browser has its cookie
    page.route(
        f"{ATTACKER}**",
        lambda route: route.fulfill(
            status=200, content_type="text/html", body=_attackers_page(base)
        ),
    )
    with page.expect_navigation(url=f"{base}/login"):
        page.goto(ATTACKER)
    assert "mallory" not in page.content()
    page.goto(f"{base}/")
    assert page.url.endswith("/login"), page.url  # nobody is signed in
    sign_in(page, base, "olga")  # the real form still works
    assert "olga" in page.content()
