"""Each route reads at most its own body limit (issue 21 item 5, contract 9): a sign-in or a
form a small one, the JSON intake its own (derived from EXCHANGE_INTAKE_MAX_ITEMS), 1C's
``file`` the ``file_limit`` it announced. A Content-Length above the limit is refused with 413
before the body is read; a chunked body that runs past it is cut."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from pathlib import Path

import httpx
import pytest
from doortools import connect, response, status
from web_helpers import PASSWORD, TOKEN, USER, running, web_settings

from exchange.web.config import FORM_BODY_LIMIT, INTAKE_BYTES_PER_ITEM

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def _head(path: str, *headers: str) -> bytes:
    return "\r\n".join([f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]).encode()


def _chunked(total: int, size: int = 8192) -> bytes:
    out = b""
    for offset in range(0, total, size):
        piece = b"a" * min(size, total - offset)
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def test_a_sign_in_of_10_mib_is_refused_413_before_its_body_is_read(
    db_url: str, tmp_path: Path
) -> None:
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        sock = connect(base)
        form = "Content-Type: application/x-www-form-urlencoded"
        sock.sendall(_head("/login", form, f"Content-Length: {10 * 1024 * 1024}"))
        started = time.monotonic()
        raw = response(sock, 10)  # not a byte of the body was sent
        sock.close()
        assert status(raw) == 413, raw[:200]
        assert time.monotonic() - started < 5


def test_a_chunked_sign_in_past_the_form_limit_is_cut_with_413(db_url: str, tmp_path: Path) -> None:
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        sock = connect(base)
        form = "Content-Type: application/x-www-form-urlencoded"
        sock.sendall(_head("/login", form, "Transfer-Encoding: chunked"))
        with contextlib.suppress(ConnectionError):  # it may hang up before reading it all
            sock.sendall(_chunked(2 * FORM_BODY_LIMIT))
        raw = response(sock, 10)
        sock.close()
        assert status(raw) == 413, raw[:200]


def test_a_sign_in_form_within_the_limit_is_still_read(db_url: str, tmp_path: Path) -> None:
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        answer = httpx.post(
            f"{base}/login",
            data={"name": "nobody", "password": "x" * (FORM_BODY_LIMIT // 2)},
            timeout=30,
        )
        assert answer.status_code != 413


def test_the_intakes_limit_is_its_item_limit_times_16_kib(db_url: str, tmp_path: Path) -> None:
    items = 100  # 1.6 MiB (the floor, 1 MiB, does not apply)
    limit = items * INTAKE_BYTES_PER_ITEM
    settings = web_settings(db_url, tmp_path / "1c", intake_max_items=items)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with running(settings) as base:
        sock = connect(base)
        sock.sendall(
            _head(
                "/api/v1/intents",
                *(f"{k}: {v}" for k, v in auth.items()),
                f"Content-Length: {limit + 1}",
            )
        )
        assert status(response(sock, 10)) == 413
        sock.close()

        padded = json.dumps({"intents": []}).encode() + b" " * (limit - 100)
        within = httpx.post(f"{base}/api/v1/intents", content=padded, headers=auth, timeout=30)
        assert within.status_code == 200, within.text
        over = httpx.post(
            f"{base}/api/v1/intents",
            content=iter([padded, b" " * 200]),  # chunked: no Content-Length to refuse early
            headers=auth,
            timeout=30,
        )
        assert over.status_code == 413


def test_a_1c_file_part_is_bounded_by_the_file_limit_init_announced(
    db_url: str, tmp_path: Path
) -> None:
    file_limit = 64 * 1024
    settings = web_settings(db_url, tmp_path / "1c", **{"1c_file_limit": file_limit})
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with running(settings) as base, httpx.Client(base_url=base, timeout=30) as client:
        headers = {"Authorization": f"Basic {basic}"}
        auth = client.get("/1c_exchange.php?type=catalog&mode=checkauth", headers=headers)
        lines = auth.text.splitlines()
        assert lines[0] == "success", auth.text
        session = {"Cookie": f"{lines[1]}={lines[2]}"}
        init = client.get("/1c_exchange.php?type=catalog&mode=init", headers=session)
        assert f"file_limit={file_limit}" in init.text

        def upload(name: str, body: bytes | object) -> httpx.Response:
            return client.post(
                f"/1c_exchange.php?type=catalog&mode=file&filename={name}",
                content=body,  # type: ignore[arg-type]
                headers=session,
            )

        exact = upload("a.xml", b"<" * file_limit)
        assert exact.status_code == 200 and exact.text.startswith("success"), exact.text

        over = upload("b.xml", b"<" * (file_limit + 1))
        assert over.status_code == 413

        chunked = upload("c.xml", iter([b"<" * file_limit, b"<"]))
        assert chunked.text.startswith("failure"), chunked.text
        assert "file_limit" in chunked.text
        folders = [p for p in (tmp_path / "1c").iterdir() if p.is_dir()]
        assert not any((folder / "c.xml").exists() for folder in folders)


def test_a_chunked_1c_orders_file_past_the_file_limit_is_cut_with_413(
    db_url: str, tmp_path: Path
) -> None:
    """``type=sale&mode=file`` (orders, dropped unread) is bounded like the catalogue's
    ``file``: a chunked body, which no Content-Length announces, is cut past ``file_limit``
    instead of being read to its end, however long 1C's password lets a client send."""
    file_limit = 64 * 1024
    settings = web_settings(db_url, tmp_path / "1c", **{"1c_file_limit": file_limit})
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with running(settings) as base, httpx.Client(base_url=base, timeout=30) as client:
        auth = client.get(
            "/1c_exchange.php?type=sale&mode=checkauth",
            headers={"Authorization": f"Basic {basic}"},
        )
        lines = auth.text.splitlines()
        assert lines[0] == "success", auth.text
        session = {"Cookie": f"{lines[1]}={lines[2]}"}
        path = "/1c_exchange.php?type=sale&mode=file&filename=orders.xml"

        within = client.post(path, content=iter([b"<" * file_limit]), headers=session)
        assert within.status_code == 200 and within.text.startswith("success"), within.text

        over = client.post(path, content=iter([b"<" * file_limit] * 64), headers=session)
        assert over.status_code == 413, over.text[:200]  # read to its end, it was a success
