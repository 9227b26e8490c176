"""An address ``serve`` does not know is said in the reader's language, Russian by default
(issue 34 item 7: «404 pages»); a handler's own answer is left as it is."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

Serve = Callable[..., str]
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_an_unknown_address_is_said_in_russian_by_default_and_english_on_request(
    serve: Serve,
) -> None:
    base = serve()
    russian = httpx.get(f"{base}/no-such-page")
    assert 404 == russian.status_code
    assert "404: по адресу /no-such-page ничего нет" in russian.text, russian.text
    english = httpx.get(f"{base}/no-such-page?lang=en")
    assert 404 == english.status_code
    assert "404: nothing here at /no-such-page" in english.text, english.text
    chosen = httpx.get(f"{base}/no-such-page", cookies={"exchange_lang": "en"})
    assert "404: nothing here at /no-such-page" in chosen.text  # the workbench's choice first


@SQLITE_ONLY
def test_a_browser_without_the_language_cookie_reads_404_and_405_in_russian(
    serve: Serve,
) -> None:
    """The workbench is Russian by default whatever the browser's Accept-Language (its
    ``_lang``); its 404 and 405 follow the same default, not the browser's English."""
    base = serve()
    browser = {"Accept-Language": "en-US,en;q=0.9"}
    missing = httpx.get(f"{base}/nope", headers=browser)
    assert 404 == missing.status_code
    assert "404: по адресу /nope ничего нет" in missing.text, missing.text
    refused = httpx.delete(f"{base}/quarantine", headers=browser)
    assert 405 == refused.status_code
    assert "405: адрес /quarantine не принимает запрос DELETE" in refused.text, refused.text
    # a program of the JSON intake asks by Accept-Language, as the intake's answers follow
    program = httpx.get(f"{base}/api/v1/nope", headers={"Accept-Language": "en"})
    assert "404: nothing here at /api/v1/nope" in program.text, program.text


@SQLITE_ONLY
def test_a_method_an_address_does_not_take_is_said_in_russian(serve: Serve) -> None:
    answer = httpx.delete(f"{serve()}/api/v1/intents")
    assert 405 == answer.status_code
    assert "405: адрес /api/v1/intents не принимает запрос DELETE" in answer.text, answer.text
    assert "POST" in answer.headers["Allow"]
