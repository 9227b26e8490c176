"""Bytes that are not UTF-8 in ``Authorization`` (issue 33 item 8): on the JSON intake and 1C's
``checkauth`` they answered 500, were never counted as a wrong secret, and each kept a slot of
the guess throttle, so that a stranger's flood of them locked the right token and the right 1C
password out until ``serve`` restarted. Such a header is a wrong secret: refused (401 /
``failure``), counted, and its slot released whatever happens."""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from doortools import connect, response, status
from web_helpers import PASSWORD, TOKEN, USER, running, web_settings

from exchange.web import throttle

# Slots the guess throttle grants at once, shrunk from 10,000 so that a leak of each bad
# request's slot shows after a dozen of them rather than after 10,000 (the rule is the same).
SLOTS = 6
FLOOD = 2 * SLOTS
BAD = b"\xff\xfe\x80 \xc3("  # no UTF-8 reading of these
SIGNED = b"\xff\xfe\x80\xc3.1700000000.abc"  # a signed value's shape, those bytes its session


def _request(door: str, authorization: bytes) -> bytes:
    if door == "1c":
        head = b"GET /1c_exchange.php?type=catalog&mode=checkauth HTTP/1.1\r\n"
        return head + b"Host: 127.0.0.1\r\nAuthorization: " + authorization + b"\r\n\r\n"
    body = b'{"intents": []}'
    return (
        b"POST /api/v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n".encode()
        + b"Authorization: "
        + authorization
        + b"\r\n\r\n"
        + body
    )


def _bad(door: str) -> bytes:
    return (b"Basic " if door == "1c" else b"Bearer ") + BAD


def _right(door: str) -> bytes:
    if door == "1c":
        return b"Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode())
    return f"Bearer {TOKEN}".encode()


def _send(base: str, source: str, raw: bytes) -> bytes:
    sock = connect(base, source=source, timeout=30)
    try:
        sock.sendall(raw)
        return response(sock, 30)
    finally:
        sock.close()


def _refused_as_wrong(door: str, answer: bytes) -> bool:
    """What a wrong secret is answered: 401 at the intake, ``failure`` (200) to 1C."""
    body = answer.partition(b"\r\n\r\n")[2]
    if door == "1c":
        return status(answer) == 200 and body.startswith(b"failure\n")
    return status(answer) == 401


def _accepted(door: str, answer: bytes) -> bool:
    body = answer.partition(b"\r\n\r\n")[2]
    if door == "1c":
        return status(answer) == 200 and body.startswith(b"success\n")
    return status(answer) == 200 and b'"results"' in body


@pytest.mark.timing
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("door", ["1c", "intake"])
def test_authorization_bytes_that_are_not_utf8_are_a_wrong_secret_and_never_lock_the_door(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    monkeypatch.setattr(
        throttle,
        "GUESS_LIMITS",
        throttle.Limits(per_name=SLOTS, per_address=SLOTS, overall=SLOTS),
    )
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        # Counted as a wrong secret: an address's second one is held twice as long (2 s).
        first = _send(base, "127.0.0.3", _request(door, _bad(door)))
        assert _refused_as_wrong(door, first), first[:300]
        start = time.monotonic()
        again = _send(base, "127.0.0.3", _request(door, _bad(door)))
        assert _refused_as_wrong(door, again), again[:300]
        assert time.monotonic() - start >= 2.0
        # A flood from many addresses (each 127.0.0.x is this host), in parallel.
        sources = [f"127.0.0.{10 + n}" for n in range(FLOOD)]
        with ThreadPoolExecutor(FLOOD) as pool:
            answers = list(pool.map(lambda s: _send(base, s, _request(door, _bad(door))), sources))
        for answer in answers:
            assert _refused_as_wrong(door, answer), answer[:300]
        # No slot was kept: the right secret, from an address that guessed nothing, gets in.
        right = _send(base, "127.0.0.2", _request(door, _right(door)))
        assert _accepted(door, right), right[:300]


def test_a_check_that_fails_counts_as_wrong_and_releases_its_slot() -> None:
    """``Guesses.judge``: whatever the check does, the slot ``admit`` took is given back."""
    now = [0.0]
    guesses = throttle.Guesses("intake", lambda: now[0])

    def broken() -> bool:
        raise UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")

    assert guesses.admit("198.51.100.1").allowed
    with pytest.raises(UnicodeEncodeError):
        guesses.judge("198.51.100.1", broken)
    assert ({}, 0) == (guesses.throttle.busy, guesses.throttle.busy_all)
    assert 1 == guesses.throttle.records["addr:198.51.100.1"].failures


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cookie_whose_bytes_are_not_utf8_is_no_session_never_an_error(
    db_url: str, tmp_path: Path
) -> None:
    """The same bytes in a session cookie: the workbench's is no session (to the sign-in
    page), 1C's no exchange (``failure``), never a 500."""
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        workbench = _send(
            base,
            "127.0.0.2",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: exchange_wb=" + SIGNED + b"\r\n\r\n",
        )
        assert 303 == status(workbench), workbench[:300]
        assert b"Location: /login" in workbench
        onec = _send(
            base,
            "127.0.0.2",
            b"GET /1c_exchange.php?type=catalog&mode=init HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Cookie: EXCHANGE_1C_SESSION=" + SIGNED + b"\r\n\r\n",
        )
        assert _refused_as_wrong("1c", onec), onec[:300]
