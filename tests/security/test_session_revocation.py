"""Signing out ends that session, and a password set again (``operator add`` for an existing
name), ``operator remove`` and removing then adding a name again end every session of that
name (contract 9, issue 21 item 9), in every serve process sharing the database: a cookie
replayed afterwards opens nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from web_helpers import running, web_settings
from workbench_helpers import add_operator, close_all, csrf_of, new_client, signed_in

from exchange.db.engine import make_engine, transaction
from exchange.ops import operators
from exchange.queue import control

WB_COOKIE = "exchange_wb"
NEW_PASSWORD = "a new password 2"


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
def two(db_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two serve processes on one database."""
    with ExitStack() as stack:
        yield (
            stack.enter_context(running(web_settings(db_url, tmp_path / "a"))),
            stack.enter_context(running(web_settings(db_url, tmp_path / "b"))),
        )


def _replay(base: str, cookie: str) -> httpx.Client:
    return new_client(base, cookies={WB_COOKIE: cookie})


def _pause_with(client: httpx.Client, csrf: str) -> httpx.Response:
    return client.post("/delivery/pause", data={"csrf": csrf, "note": "replayed"})


def _paused(engine: Engine) -> bool:
    with transaction(engine, read_only=True) as connection:
        return control.operator_pause(connection) is not None


def test_signing_out_ends_the_session_in_every_serve_process(
    two: tuple[str, str], db: Engine
) -> None:
    first, second = two
    add_operator(db, "olga", "operator")
    client = signed_in(first, "olga")
    cookie, csrf = client.cookies[WB_COOKIE], csrf_of(client)
    assert _replay(second, cookie).get("/").status_code == 200  # one session, both processes
    assert client.post("/logout", data={"csrf": csrf}).status_code == 303
    for base in (first, second):
        replayed = _replay(base, cookie)
        assert replayed.get("/").status_code == 303, base
        assert _pause_with(replayed, csrf).status_code == 403, base
    assert not _paused(db)


def test_signing_out_ends_only_that_session(two: tuple[str, str], db: Engine) -> None:
    first, second = two
    add_operator(db, "olga", "operator")
    leaving, staying = signed_in(first, "olga"), signed_in(second, "olga")
    assert leaving.post("/logout", data={"csrf": csrf_of(leaving)}).status_code == 303
    assert staying.get("/").status_code == 200


def test_a_new_password_ends_every_session_of_that_name(two: tuple[str, str], db: Engine) -> None:
    first, second = two
    add_operator(db, "olga", "operator")
    add_operator(db, "victor", "viewer")
    sessions = [signed_in(first, "olga"), signed_in(second, "olga")]
    other = signed_in(first, "victor")
    kept = [(c.cookies[WB_COOKIE], csrf_of(c)) for c in sessions]
    add_operator(db, "olga", "operator", NEW_PASSWORD)  # what `exchange operator add` does
    for base in (first, second):
        for cookie, csrf in kept:
            replayed = _replay(base, cookie)
            assert replayed.get("/").status_code == 303
            assert _pause_with(replayed, csrf).status_code == 403
    assert not _paused(db)
    assert other.get("/").status_code == 200  # another name's session is untouched
    assert signed_in(first, "olga", NEW_PASSWORD).get("/").status_code == 200


def test_removing_and_adding_a_name_again_does_not_revive_its_sessions(
    two: tuple[str, str], db: Engine
) -> None:
    first, second = two
    add_operator(db, "olga", "operator")
    client = signed_in(first, "olga")
    cookie, csrf = client.cookies[WB_COOKIE], csrf_of(client)
    with transaction(db) as connection:
        operators.remove(connection, "olga")
    assert _replay(second, cookie).get("/").status_code == 303
    add_operator(db, "olga", "operator")  # the same name and even the same password
    for base in (first, second):
        replayed = _replay(base, cookie)
        assert replayed.get("/").status_code == 303
        assert _pause_with(replayed, csrf).status_code == 403
    assert not _paused(db)


def test_a_session_opened_against_a_password_since_changed_is_not_recorded(db: Engine) -> None:
    """A sign-in verifies outside any transaction; if the password is set again meanwhile,
    the session it then tries to open is refused."""
    add_operator(db, "olga", "operator")
    with transaction(db, read_only=True) as connection:
        verified = operators.credentials(connection, "olga")
    assert verified is not None
    add_operator(db, "olga", "operator", NEW_PASSWORD)
    now = datetime.now(UTC)
    with transaction(db) as connection:
        assert not operators.open_session(
            connection, "olga", verified, "token-1", now, timedelta(hours=1)
        )
        assert operators.session_of(connection, "token-1", now) is None
