"""Text a database cannot hold, sent to the workbench (issue 33 item 9): a NUL byte in the
sign-in name, the search, the quarantine's filters, a message's address or any form field
answered 500 on PostgreSQL (which refuses a NUL in text). Every workbench route shares one
guard (``Core._guarded``): such a request is a clear 400 in Russian, nothing is changed, and
the same request without the NUL still works. On both databases."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select
from workbench_helpers import (
    PASSWORD,
    add_operator,
    close_all,
    csrf_of,
    log_in,
    new_client,
    signed_in,
)

from exchange.db.engine import transaction
from exchange.db.schema import history, operator_sessions
from exchange.words import WORDS

NUL = "a\x00b"
REFUSED = WORDS["bad_text"]["ru"].split(":")[0]  # «В запросе есть знаки, которые нельзя …»


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def bench(serve: Callable[..., Any], db: Engine) -> str:
    base: str = serve()
    add_operator(db, "olga", "operator")
    return base


def _refused(answer: httpx.Response) -> bool:
    return answer.status_code == 400 and REFUSED in answer.text


def _changes(db: Engine) -> tuple[int, int]:
    with transaction(db, read_only=True) as connection:
        return (
            connection.execute(select(func.count()).select_from(history)).scalar_one(),
            connection.execute(select(func.count()).select_from(operator_sessions)).scalar_one(),
        )


PAGES = [
    ("/find", {"q": NUL}),
    ("/quarantine", {"q": NUL}),
    ("/quarantine", {"reason": NUL}),
    ("/quarantine", {"kind": NUL}),
    ("/quarantine", {"aggregate": NUL}),
    ("/export", {"format": "csv", "q": NUL}),
    ("/export", {"format": "csv", "aggregate": NUL}),
    ("/exchanges", {"q": NUL}),
    ("/", {"lang": NUL}),
]


@pytest.mark.parametrize(("path", "params"), PAGES)
def test_a_nul_in_a_page_address_is_a_clear_refusal(
    bench: str, path: str, params: dict[str, str]
) -> None:
    olga = signed_in(bench, "olga")
    clean = {k: v.replace("\x00", "") for k, v in params.items()}
    assert olga.get(path, params=clean).status_code == 200
    assert _refused(olga.get(path, params=params))


def test_a_nul_in_a_message_address_is_a_clear_refusal(bench: str) -> None:
    olga = signed_in(bench, "olga")
    assert 404 == olga.get("/message/ab").status_code
    assert _refused(olga.get("/message/a%00b"))


def test_a_nul_in_the_sign_in_name_signs_nobody_in_and_is_a_clear_refusal(
    bench: str, db: Engine
) -> None:
    before = _changes(db)
    client = new_client(bench)
    answer = log_in(client, "olga\x00", PASSWORD)
    assert _refused(answer)
    assert before == _changes(db)
    assert "exchange_wb" not in client.cookies


FORMS = [
    ("/action/preview", {"action": "retry", "q": NUL}),
    ("/action/preview", {"action": "retry", "message_id": NUL}),
    ("/action/confirm", {"action": "cancel", "message_id": "x", "note": NUL}),
    ("/action/prioritize", {"message_id": NUL, "note": "first"}),
    ("/delivery/pause", {"note": NUL}),
]


@pytest.mark.parametrize(("path", "data"), FORMS)
def test_a_nul_in_a_form_field_is_a_clear_refusal_and_changes_nothing(
    bench: str, db: Engine, path: str, data: dict[str, str]
) -> None:
    olga = signed_in(bench, "olga")
    before = _changes(db)
    answer = olga.post(path, data={"csrf": csrf_of(olga), **data})
    assert _refused(answer)
    assert before == _changes(db)


def test_a_form_whose_bytes_are_not_its_charset_is_a_clear_refusal(bench: str) -> None:
    olga = signed_in(bench, "olga")
    form = f"csrf={csrf_of(olga)}&note=".encode() + b"\xff\xfe"
    answer = olga.post(
        "/delivery/pause",
        content=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert _refused(answer)
    unknown = olga.post(
        "/delivery/pause",
        content=f"csrf={csrf_of(olga)}&note=x".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=no-such"},
    )
    assert _refused(unknown)
