"""Each way in of ``exchange serve`` accepts only its own credentials (contract 9, issue 21
item 1): a workbench session never opens the 1C exchange or the JSON intake, a 1C session
never opens the workbench, and a 1C session exists only from its own ``checkauth`` (a Basic
request may name only a ``sessid`` this service issued)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, select
from web_helpers import PASSWORD, USER, running, web_settings
from workbench_helpers import add_operator, close_all, new_client, signed_in

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import operators, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.web.keys import credentials_digest

RETAIL = CmlType("t-retail", "Розничная", "руб")
ONEC_COOKIE = "EXCHANGE_1C_SESSION"
WB_COOKIE = "exchange_wb"


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
def base(db_url: str, tmp_path: Path) -> Iterator[str]:
    settings = web_settings(db_url, tmp_path / "1c", **{"1c_price_types": {"Розничная": "retail"}})
    with running(settings) as url:
        yield url


def _offers() -> bytes:
    return offers_xml(
        Package(types=[RETAIL], offers=[CmlOffer("SKU-1", [CmlPrice("t-retail", "10", "руб")])])
    )


def _staged(engine: Engine) -> int:
    with transaction(engine, read_only=True) as connection:
        return len(connection.execute(select(staging.c.id)).all())


LOADED = 60.0  # seconds: an answer on a machine running everything else at once


def _first_line(response: httpx.Response) -> str:
    return response.text.splitlines()[0] if response.text else ""


def _exchange_with_cookie(base: str, value: str) -> list[str]:
    """init, file and import of one offers file carrying ``value`` as the 1C cookie."""
    url = f"{base}/1c_exchange.php?type=catalog&mode="
    headers = {"Cookie": f"{ONEC_COOKIE}={value}"}
    return [
        # httpx's 5 s default is too short for an import on a loaded machine
        _first_line(httpx.get(url + "init", headers=headers, timeout=LOADED)),
        _first_line(
            httpx.post(
                url + "file&filename=offers.xml",
                content=_offers(),
                headers=headers,
                timeout=LOADED,
            )
        ),
        _first_line(httpx.get(url + "import&filename=offers.xml", headers=headers, timeout=LOADED)),
    ]


def test_a_viewers_workbench_cookie_does_not_open_the_1c_exchange(
    base: str, db: Engine, tmp_path: Path
) -> None:
    add_operator(db, "victor", "viewer")
    stolen = signed_in(base, "victor").cookies[WB_COOKIE]
    assert _exchange_with_cookie(base, stolen) == ["failure", "failure", "failure"]
    assert _staged(db) == 0
    # The workbench session string never became an exchange folder.
    folders = list((tmp_path / "1c").iterdir()) if (tmp_path / "1c").exists() else []
    assert [f.name for f in folders if "~" in f.name or "." in f.name] == []


def test_a_removed_operators_workbench_cookie_does_not_open_the_1c_exchange(
    base: str, db: Engine
) -> None:
    add_operator(db, "olga", "operator")
    stolen = signed_in(base, "olga").cookies[WB_COOKIE]
    with transaction(db) as connection:
        connection.execute(operators.delete().where(operators.c.name == "olga"))
    assert _exchange_with_cookie(base, stolen) == ["failure", "failure", "failure"]
    assert _staged(db) == 0


def test_a_1c_session_cookie_does_not_open_the_workbench(base: str) -> None:
    answer = httpx.get(f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, PASSWORD))
    lines = answer.text.splitlines()
    assert lines[0] == "success"
    bench = new_client(base, cookies={WB_COOKIE: lines[2]})
    assert bench.get("/").status_code == 303
    assert bench.post("/logout", data={"csrf": "0" * 64}).status_code == 403


def test_a_workbench_cookie_does_not_open_the_json_intake(base: str, db: Engine) -> None:
    add_operator(db, "olga", "operator")
    client = signed_in(base, "olga")
    answer = client.post("/api/v1/intents", json={"intents": []})
    assert answer.status_code == 401


def test_basic_auth_may_name_only_a_sessid_this_service_issued(base: str, tmp_path: Path) -> None:
    url = f"{base}/1c_exchange.php?type=catalog&mode="
    auth = (USER, PASSWORD)
    # A sessid the service never issued (another node's folder guessed, or any 32 hex digits)
    # is no session, even with the right password.
    for sessid in ("f" * 32, "0123456789abcdef" * 2):
        assert _first_line(httpx.get(url + f"init&sessid={sessid}", auth=auth)) == "failure"
        assert not (tmp_path / "1c" / sessid).exists()
    # The sessid checkauth issued works with Basic on every request (no cookie).
    lines = httpx.get(url + "checkauth", auth=auth).text.splitlines()
    sessid = next(line[7:] for line in lines if line.startswith("sessid="))
    assert httpx.get(url + f"init&sessid={sessid}", auth=auth).text.startswith("zip=")
    assert (tmp_path / "1c" / sessid).is_dir()
    # ... and not without the password.
    assert _first_line(httpx.get(url + f"init&sessid={sessid}")) == "failure"


def _checkauth(base: str, user: str, password: str) -> tuple[str, str]:
    """The cookie value and the ``sessid`` a ``checkauth`` issues."""
    answer = httpx.get(f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(user, password))
    lines = answer.text.splitlines()
    assert lines[0] == "success", answer.text
    return lines[2], next(line[7:] for line in lines if line.startswith("sessid="))


@pytest.mark.parametrize(
    "rotated", [{"1c_password": "rotated-Pa55word-2"}, {"1c_user": "exchange-2"}]
)
def test_a_1c_session_holds_only_for_the_1c_credentials_that_opened_it(
    db_url: str, db: Engine, tmp_path: Path, rotated: dict[str, str]
) -> None:
    """Contract 9: a new 1C password or user (a leaked one rotated, serve restarted) ends every
    1C session opened under the old, by its cookie and by its ``sessid`` with Basic, in every
    serve process; a process still holding the old credentials keeps them. Nothing secret is in
    what ``checkauth`` answers (the cookie, the sessid)."""
    types = {"1c_price_types": {"Розничная": "retail"}}
    with running(web_settings(db_url, tmp_path / "1c", **types)) as old:
        answer = httpx.get(
            f"{old}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, PASSWORD)
        )
        assert PASSWORD not in answer.text
        assert credentials_digest(USER, PASSWORD) not in answer.text
        cookie, sessid = _checkauth(old, USER, PASSWORD)
        with running(web_settings(db_url, tmp_path / "1c", **types, **rotated)) as new:
            user, password = rotated.get("1c_user", USER), rotated.get("1c_password", PASSWORD)
            url = f"{new}/1c_exchange.php?type=catalog&mode="
            # The old cookie, alone or with its sessid, opens nothing.
            assert _exchange_with_cookie(new, cookie) == ["failure", "failure", "failure"]
            assert (
                _first_line(httpx.get(url + f"init&sessid={sessid}", cookies={ONEC_COOKIE: cookie}))
                == "failure"
            )
            # Its sessid named with the new credentials (Basic) is no session either.
            assert (
                _first_line(httpx.get(url + f"init&sessid={sessid}", auth=(user, password)))
                == "failure"
            )
            assert not (tmp_path / "1c" / sessid).exists()
            assert _staged(db) == 0
            # A checkauth with the new credentials opens a session there as before.
            fresh, fresh_sessid = _checkauth(new, user, password)
            assert fresh_sessid != sessid
            assert _exchange_with_cookie(new, fresh)[1:] == ["success", "success"]
            assert _staged(db) == 1
            # The serve still started with the old credentials takes the old session (and
            # not the new one): each process holds the credentials it was started with.
            assert (
                _first_line(
                    httpx.get(
                        f"{old}/1c_exchange.php?type=catalog&mode=init",
                        cookies={ONEC_COOKIE: fresh},
                    )
                )
                == "failure"
            )
            assert _exchange_with_cookie(old, cookie)[1:] == ["success", "success"]
