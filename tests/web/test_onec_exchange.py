"""The 1C standard exchange (contract 9a) against a real ``exchange serve``: the protocol,
its refusals (each a ``failure`` 1C shows and an entry operators see, nothing half-staged),
progress while importing, two nodes at once, archives, cleanup, and the package rules."""

from __future__ import annotations

import html
import io
import json
import re
import socket
import stat
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import Engine, insert, select
from web_helpers import PASSWORD, USER
from workbench_helpers import add_operator, close_all, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, http_keys, price_owners, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, catalogue_xml, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

Serve = Callable[..., str]
RETAIL = CmlType("t-retail", "Розничная", "руб")
PURCHASE = CmlType("t-purchase", "Закупочная", "руб")
TYPES = {"1c_price_types": {"Розничная": "retail"}}


def package(*prices: tuple[str, str], generated_at: str = "2026-12-01T10:00:00") -> bytes:
    return offers_xml(
        Package(
            types=[RETAIL, PURCHASE],
            offers=[
                CmlOffer(sku, [CmlPrice("t-retail", value, "руб"), CmlPrice("t-purchase", "1")])
                for sku, value in prices
            ],
            generated_at=generated_at,
        )
    )


def staged(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [
            dict(r) for r in connection.execute(select(staging).order_by(staging.c.id)).mappings()
        ]


def entries(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [
            dict(r)
            for r in connection.execute(
                select(cml_exchanges).order_by(cml_exchanges.c.id)
            ).mappings()
        ]


OPEN: list[OneCClient] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def client(base: str, **kwargs: Any) -> OneCClient:
    c = OneCClient(base, USER, PASSWORD, **kwargs)
    OPEN.append(c)
    return c


def session(base: str, **kwargs: Any) -> OneCClient:
    c = client(base, **kwargs)
    assert c.checkauth().status == "success"
    c.init()
    return c


def test_checkauth_answers_success_cookie_and_sessid_and_init_the_limits(serve: Serve) -> None:
    base = serve(**TYPES)
    response = httpx.get(
        f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, PASSWORD)
    )
    lines = response.text.splitlines()
    assert lines[0] == "success" and lines[1] == "EXCHANGE_1C_SESSION"
    assert lines[3].startswith("sessid=") and lines[4].startswith("timestamp=")
    init = httpx.get(
        f"{base}/1c_exchange.php?type=catalog&mode=init&{lines[3]}",
        headers={"Cookie": f"{lines[1]}={lines[2]}"},
    )
    assert init.text.splitlines() == ["zip=yes", f"file_limit={4 * 1024 * 1024}"]


def test_a_wrong_password_fails_and_writes_nothing_to_the_database(
    serve: Serve, db: Engine
) -> None:
    """Without a session nothing is written (anyone may send it): counted in memory instead
    (tests/security/test_onec_anonymous.py)."""
    base = serve(**TYPES)
    response = httpx.get(
        f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, "guess-1234")
    )
    assert response.text.splitlines()[0] == "failure"
    assert "Неверное имя пользователя или пароль" in response.text
    assert [] == entries(db)


def test_the_exchange_is_closed_when_its_credentials_are_unset(serve: Serve) -> None:
    base = serve(**{"1c_user": None, "1c_password": None})
    response = httpx.get(f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=("", ""))
    assert response.text.splitlines()[0] == "failure"
    assert "Обмен с 1С закрыт" in response.text


def test_a_forged_cookie_or_a_foreign_sessid_is_refused(serve: Serve) -> None:
    base = serve(**TYPES)
    c = session(base)
    name, value = c.cookie or ("", "")
    forged = value[:-1] + ("0" if value[-1] != "0" else "1")
    response = httpx.get(
        f"{base}/1c_exchange.php?type=catalog&mode=init", headers={"Cookie": f"{name}={forged}"}
    )
    assert response.text.startswith("failure\n")
    response = httpx.get(
        f"{base}/1c_exchange.php?type=catalog&mode=init&sessid={'f' * 32}",
        headers={"Cookie": f"{name}={value}"},
    )
    assert response.text.startswith("failure\n")
    c.close()


def test_the_cookie_key_is_generated_once_kept_in_the_database_and_shared(
    serve: Serve, db: Engine
) -> None:
    first = session(serve(**TYPES))
    second_base = serve(**TYPES)  # another serve process on the same database
    name, value = first.cookie or ("", "")
    response = httpx.get(
        f"{second_base}/1c_exchange.php?type=catalog&mode=init",
        headers={"Cookie": f"{name}={value}"},
    )
    assert response.text.startswith("zip=")
    with transaction(db, read_only=True) as connection:
        [key] = connection.execute(select(http_keys.c.value)).scalars().all()
    assert len(key) >= 48
    first.close()


def test_a_configured_secret_key_signs_instead_of_the_stored_one(serve: Serve, db: Engine) -> None:
    base = serve(http_secret_key="configured-key-0123456789", **TYPES)
    session(base).close()
    with transaction(db, read_only=True) as connection:
        assert [] == connection.execute(select(http_keys)).all()


@pytest.mark.parametrize("mode", ["rollback", "", "import_all"])
def test_an_unknown_mode_fails_clearly(serve: Serve, db: Engine, mode: str) -> None:
    c = session(serve(**TYPES))
    answer = c.read(c._request("GET", mode))
    assert answer.status == "failure" and "Неизвестная команда" in answer.text
    assert entries(db)[-1]["outcome"] == "failure"
    c.close()


@pytest.mark.parametrize(
    "name",
    ["../escape.xml", "goods/../../escape.xml", "/tmp/escape.xml", "..\\escape.xml", "C:\\x.xml"],
)
def test_a_file_name_that_leaves_the_exchange_folder_is_refused(
    serve: Serve, db: Engine, tmp_path: Path, name: str
) -> None:
    c = session(serve(**TYPES))
    answer = c.upload(name, b"<x/>")
    assert answer.status == "failure" and "не допускается" in answer.text
    assert not (tmp_path / "escape.xml").exists() and not Path("/tmp/escape.xml").exists()
    assert entries(db)[-1]["outcome"] == "failure"
    c.close()


def test_an_oversized_file_fails_and_is_removed(serve: Serve, db: Engine, tmp_path: Path) -> None:
    c = session(serve(**{**TYPES, "1c_max_file_bytes": 4096}), use_zip=False)
    assert c.upload("offers.xml", b"x" * 3000).status == "success"
    answer = c.upload("offers.xml", b"x" * 3000)
    assert answer.status == "failure" and "больше 4096 байт" in answer.text
    assert not list((tmp_path / "1c").rglob("offers.xml"))
    c.close()


def test_a_truncated_upload_appends_nothing(serve: Serve, db: Engine, tmp_path: Path) -> None:
    base = serve(**TYPES)
    c = session(base, use_zip=False)
    data = package(("A", "10.00"))
    assert c.upload("offers.xml", data[:100]).status == "success"
    url = urlsplit(base)
    name, value = c.cookie or ("", "")
    with socket.create_connection((url.hostname, url.port)) as raw:
        raw.sendall(
            (
                f"POST /1c_exchange.php?type=catalog&mode=file&filename=offers.xml HTTP/1.1\r\n"
                f"Host: x\r\nCookie: {name}={value}\r\nContent-Length: 100000\r\n\r\n"
            ).encode()
            + data[100:200]
        )
        raw.shutdown(socket.SHUT_WR)
        raw.recv(1000)
    for _ in range(50):  # the server sees the cut after the client is gone
        if any("offers.xml" in (e["detail"] or "") for e in entries(db)):
            break
        time.sleep(0.05)
    assert any(
        e["outcome"] == "failure" and "upload of 'offers.xml'" in e["detail"] for e in entries(db)
    ), entries(db)
    assert not list((tmp_path / "1c").rglob("*.part"))
    # the rest arrives again, whole: the file holds the first chunk and this one only
    assert c.upload("offers.xml", data[100:]).status == "success"
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "success", answer.text
    assert 1 == len(staged(db))
    c.close()


def test_malformed_xml_fails_with_the_line_and_stages_nothing(serve: Serve, db: Engine) -> None:
    c = session(serve(**TYPES), use_zip=False)
    data = package(("A", "10.00"), ("B", "11.00"))
    c.upload("offers.xml", data[: len(data) // 2])
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure" and "не является правильным XML: строка" in answer.text
    assert [] == staged(db)
    assert entries(db)[-1]["outcome"] == "failure"
    c.close()


def test_a_file_that_is_not_commerceml_fails(serve: Serve, db: Engine) -> None:
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", b"<?xml version='1.0'?><html><body>hi</body></html>")
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure" and "Это не файл CommerceML" in answer.text
    assert [] == staged(db)
    c.close()


def test_a_file_without_a_mapped_price_type_fails_naming_the_types_found(
    serve: Serve, db: Engine
) -> None:
    c = session(serve(**{"1c_price_types": {"Оптовая": "wholesale"}}), use_zip=False)
    c.upload("offers.xml", package(("A", "10.00")))
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure"
    assert "Закупочная" in answer.text and "Розничная" in answer.text
    assert [] == staged(db)
    c.close()


def test_unmapped_types_and_prices_not_of_the_base_unit_are_never_sent_and_counted(
    serve: Serve, db: Engine
) -> None:
    data = offers_xml(
        Package(
            types=[RETAIL, PURCHASE],
            offers=[
                CmlOffer("A", [CmlPrice("t-retail", "10.50"), CmlPrice("t-purchase", "7")]),
                CmlOffer("B", [CmlPrice("t-retail", "99", coefficient="10")]),
                CmlOffer("C", [CmlPrice("t-retail", "98", min_quantity="5")]),
                CmlOffer("D", [CmlPrice("t-retail", "1 234,5")]),
                CmlOffer("E", with_prices=False),
            ],
        )
    )
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", data)
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "success"
    payloads = [json.loads(r["payload"]) for r in staged(db)]
    assert [("A", "10.50", "RUB"), ("D", "1234.5", "RUB")] == [
        (p["sku"], p["price"], p["currency"]) for p in payloads
    ]
    [entry] = entries(db)
    assert (2, 3) == (entry["intents"], entry["not_sent"])
    assert "not of the base unit" in entry["detail"] and "Закупочная" in entry["detail"]
    c.close()


def test_currencies_map_to_iso_and_an_unknown_one_is_quarantined_invalid_contract(
    serve: Serve, db: Engine, db_url: str
) -> None:
    data = offers_xml(
        Package(
            types=[RETAIL],
            offers=[
                CmlOffer(sku, [CmlPrice("t-retail", "5", currency)])
                for sku, currency in (
                    ("A", "руб"),
                    ("B", "RUR"),
                    ("C", "643"),
                    ("D", "USD"),
                    ("E", "грн"),
                    ("F", None),
                )
            ],
        )
    )
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", data)
    assert c.import_file("offers.xml")[0].status == "success"
    currencies = {
        json.loads(r["payload"])["sku"]: json.loads(r["payload"])["currency"] for r in staged(db)
    }
    assert {"A": "RUB", "B": "RUB", "C": "RUB", "D": "USD", "E": "грн", "F": "RUB"} == currencies
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    with transaction(db, read_only=True) as connection:
        [quarantined] = (
            connection.execute(select(messages).where(messages.c.state == "quarantined"))
            .mappings()
            .all()
        )
    assert quarantined["reason"] == "invalid-contract" and quarantined["aggregate"] == "E/retail"
    c.close()


def test_the_same_file_twice_stages_nothing_new_and_a_later_package_wins(
    serve: Serve, db: Engine
) -> None:
    base = serve(**TYPES)
    first = package(("A", "10.00"), generated_at="2026-12-01T10:00:00")
    for _ in range(2):
        log = client(base, use_zip=False).exchange([("offers.xml", first)])
        assert log.answers["offers.xml"].status == "success"
    assert 1 == len(staged(db))
    assert "nothing new" in entries(db)[-1]["detail"]
    later = package(("A", "12.00"), generated_at="2026-12-01T11:00:00")
    client(base, use_zip=False).exchange([("offers.xml", later)])
    rows = staged(db)
    assert [1, 2] == [r["aggregate_version"] for r in rows]
    assert rows[1]["source_ref"] == "1C exchange offers.xml 2026-12-01T11:00:00"


def test_a_package_version_is_above_every_version_seen_of_its_aggregates(
    serve: Serve, db: Engine
) -> None:
    from exchange.dev.testing import stage as stage_rows

    stage_rows(
        db,
        [
            {
                "kind": "price",
                "aggregate": "A/retail",
                "aggregate_version": 5000,
                "payload": json.dumps(
                    {"sku": "A", "price": "1", "currency": "RUB", "price_type": "retail"}
                ),
            }
        ],
    )
    client(serve(**TYPES), use_zip=False).exchange([("offers.xml", package(("A", "2")))])
    assert [5000, 5001] == [r["aggregate_version"] for r in staged(db)]


def test_import_answers_progress_while_working_and_success_only_once_staged(
    serve: Serve, db: Engine, tmp_path: Path
) -> None:
    from exchange.dev.cml_gen import write_big_offers

    # 2,000 offers take some 0.2 s to import on an idle machine (bench.onec_upload times
    # 100,000): the first answer, after progress_wait (0.01 s), is "progress" with a margin of
    # twenty, and a loaded machine only widens it.
    path = tmp_path / "big.xml"
    write_big_offers(path, 2_000)
    c = session(
        serve(progress_wait=0.01, **{"1c_price_types": {"Розничная": "retail"}}), use_zip=False
    )
    assert c.upload("offers.xml", path.read_bytes()).status == "success"
    statuses = []
    while True:
        answer = c.read(c._request("GET", "import", filename="offers.xml"))
        statuses.append(answer.status)
        if answer.status != "progress":
            break
        assert len(staged(db)) in (0, 2_000)  # one publishing commit: whole or nothing
    assert statuses[0] == "progress" and statuses[-1] == "success"
    assert 2_000 == len(staged(db))
    c.close()


def chunk(c: OneCClient, data: bytes) -> str:
    return c.read(c._request("POST", "file", body=data, filename="offers.xml")).status


def test_two_nodes_exchanging_at_once_do_not_mix_their_files(serve: Serve, db: Engine) -> None:
    base = serve(**TYPES)
    a, b = session(base, use_zip=False), session(base, use_zip=False)
    one, two = package(("A1", "1"), ("A2", "2")), package(("B1", "3"))
    for start in range(0, max(len(one), len(two)), 200):  # interleaved chunks, one file name
        if start < len(one):
            assert (
                a.read(
                    a._request("POST", "file", body=one[start : start + 200], filename="offers.xml")
                ).status
                == "success"
            )
        if start < len(two):
            assert (
                b.read(
                    b._request("POST", "file", body=two[start : start + 200], filename="offers.xml")
                ).status
                == "success"
            )
    assert a.import_file("offers.xml")[0].status == "success"
    assert b.import_file("offers.xml")[0].status == "success"
    skus = sorted(json.loads(r["payload"])["sku"] for r in staged(db))
    assert ["A1", "A2", "B1"] == skus
    a.close()
    b.close()


def test_complete_removes_the_exchange_folder(serve: Serve, tmp_path: Path) -> None:
    base = serve(**TYPES)
    c = client(base)
    c.exchange([("offers.xml", package(("A", "1")))])
    assert [] == [p for p in (tmp_path / "1c").iterdir()]


def test_a_zip_archive_with_a_catalogue_and_offers_in_folders_is_unpacked_and_read(
    serve: Serve, db: Engine
) -> None:
    catalogue = catalogue_xml(types=[RETAIL], articles=[("P1", "ART-1")])
    offers = offers_xml(Package(offers=[CmlOffer("P1#C1", [CmlPrice("t-retail", "7.25")])]))
    log = client(serve(**TYPES, **{"1c_sku": "article"})).exchange(
        [("import.xml", catalogue), ("goods/1/prices.xml", offers), ("import_files/a.jpg", b"\xff")]
    )
    assert {"success"} == {a.status for a in log.answers.values()}
    [row] = staged(db)
    assert row["aggregate"] == "ART-1#C1/retail"


def _zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with (
        warnings.catch_warnings(),  # a name twice is what some tests send
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        warnings.simplefilter("ignore", UserWarning)
        for info, data in members:
            archive.writestr(info, data)
    return buffer.getvalue()


def _link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ([("../evil.xml", b"<x/>")], "ведёт за пределы папки обмена"),
        ([("/abs/evil.xml", b"<x/>")], "абсолютный путь"),
        ([(_link("offers.xml"), b"/etc/passwd")], "ссылка: не допускается"),
        ([("offers.xml", b"\0" * 5_000_000)], "распаковывается больше чем в"),
        # attack onec_zipdup: which copy would be read is an accident of the archive's order
        ([("offers.xml", package(("Z", "1"))), ("offers.xml", package(("Z", "2")))], "дважды"),
        ([("offers.xml", package(("Z", "1"))), ("Offers.XML", package(("Z", "2")))], "дважды"),
    ],
)
def test_an_unsafe_archive_is_refused(
    serve: Serve, db: Engine, tmp_path: Path, members: list[Any], reason: str
) -> None:
    c = session(serve(**TYPES))
    assert c.upload("v8_1.zip", _zip(members)).status == "success"
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure" and reason in answer.text
    assert not (tmp_path / "evil.xml").exists() and [] == staged(db)
    c.close()


def test_sale_is_answered_so_that_1c_finishes(serve: Serve) -> None:
    base = serve(**TYPES)
    c = client(base)
    c.checkauth()
    name, value = c.cookie or ("", "")
    cookie = {"Cookie": f"{name}={value}"}
    url = f"{base}/bitrix/admin/1c_exchange.php?type=sale&mode="
    assert httpx.get(url + "init", headers=cookie).text.startswith("zip=no\nfile_limit=")
    query = httpx.get(url + "query", headers=cookie)
    assert "windows-1251" in query.headers["content-type"]
    assert "КоммерческаяИнформация" in query.content.decode("cp1251")
    assert httpx.get(url + "success", headers=cookie).text.startswith("success")
    assert httpx.post(url + "file&filename=o.zip", content=b"x", headers=cookie).text.startswith(
        "success"
    )
    c.close()


def test_1c_appending_its_query_to_an_address_with_a_query_is_understood(serve: Serve) -> None:
    base = serve(**TYPES)
    response = httpx.get(
        f"{base}/1c_exchange.php?site=1?type=catalog&mode=checkauth", auth=(USER, PASSWORD)
    )
    assert response.text.startswith("success\n")


def test_basic_auth_on_every_request_without_a_cookie_works(serve: Serve, db: Engine) -> None:
    base = serve(**TYPES)
    auth = (USER, PASSWORD)
    url = f"{base}/1c_exchange.php?type=catalog&mode="
    assert httpx.get(url + "init", auth=auth).text.startswith("zip=")
    data = package(("A", "1"))
    assert httpx.post(url + "file&filename=offers.xml", content=data, auth=auth).text.startswith(
        "success"
    )
    for _ in range(100):
        text = httpx.get(url + "import&filename=offers.xml", auth=auth).text
        if not text.startswith("progress"):
            break
    assert text.startswith("success")
    assert 1 == len(staged(db))


def test_a_database_fault_during_import_is_a_failure_1c_can_read_and_stages_nothing(
    serve: Serve, db: Engine
) -> None:
    from sqlalchemy import text

    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", package(("A", "1")))
    with transaction(db) as connection:  # the publishing transaction will fail on this
        connection.execute(text("ALTER TABLE cml_packages RENAME TO cml_packages_gone"))
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure"
    assert [] == staged(db)


def test_a_catalogue_from_an_earlier_exchange_resolves_a_later_prices_only_file(
    serve: Serve, db: Engine
) -> None:
    base = serve(**{"1c_price_types": {"Розничная": "retail"}, "1c_sku": "article"})
    catalogue = catalogue_xml(types=[CmlType("g-1", "Розничная")], articles=[("P7", "ART 7")])
    assert {"success"} == {
        a.status for a in client(base).exchange([("import.xml", catalogue)]).answers.values()
    }
    prices = offers_xml(Package(schema="2.09", offers=[CmlOffer("P7", [CmlPrice("g-1", "5")])]))
    log = client(base).exchange([("prices___1.xml", prices)])
    assert log.answers["prices___1.xml"].status == "success"
    [row] = staged(db)
    assert row["aggregate"] == "ART 7/retail"


def test_an_offer_without_an_article_in_article_mode_is_quarantined_not_dropped(
    serve: Serve, db: Engine
) -> None:
    offers = offers_xml(
        Package(types=[RETAIL], offers=[CmlOffer("NOART", [CmlPrice("t-retail", "5")])])
    )
    log = client(serve(**TYPES, **{"1c_sku": "article"}), use_zip=False).exchange(
        [("offers.xml", offers)]
    )
    assert log.answers["offers.xml"].status == "success"
    assert "without an article" in entries(db)[-1]["detail"]
    [row] = staged(db)
    assert json.loads(row["payload"])["sku"] == ""  # intake quarantines it, invalid-contract


def test_offers_repeated_in_a_package_or_with_an_over_long_article_are_counted_as_not_sent(
    serve: Serve, db: Engine
) -> None:
    """Contract 15 (issue 33 items 10, 11), through serve's reader process (PostgreSQL: each
    frame staged as read; SQLite: the scratch file): two goods sharing an Артикул, the later
    wins and the earlier is not sent; an article over 100 characters is one record, not a
    package that fails. Both are counted in the answer to 1C and on the exchange's entry."""
    offers = offers_xml(
        Package(
            types=[RETAIL],
            offers=[
                CmlOffer("good-1", [CmlPrice("t-retail", "100")], article="ART-1"),
                CmlOffer("good-2", [CmlPrice("t-retail", "120")], article="ART-1"),
                CmlOffer("good-3", [CmlPrice("t-retail", "7")], article="Ж" * 300),
                CmlOffer("good-4", [CmlPrice("t-retail", "8")], article="ART-4"),
            ],
        )
    )
    log = client(serve(**TYPES, **{"1c_sku": "article"}), use_zip=False).exchange(
        [("offers.xml", offers)]
    )
    answer = log.answers["offers.xml"]
    assert answer.status == "success", answer
    assert "повторённых в пакете: 1" in answer.text, answer.text
    assert "длиннее 100 символов: 1" in answer.text, answer.text
    entry = entries(db)[-1]
    assert (4, 2) == (entry["intents"], entry["not_sent"]), entry["detail"]
    assert 4 == len(staged(db))


def test_exchange_status_shows_the_last_failures(serve: Serve, db: Engine, db_url: str) -> None:
    import os
    import subprocess
    import sys

    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", b"<not-xml")
    c.import_file("offers.xml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env["EXCHANGE_DATABASE_URL"] = db_url
    result = subprocess.run(
        [sys.executable, "-m", "exchange", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    figures = json.loads(result.stdout)["exchanges_1c"]
    assert figures["by_outcome"]["failure"] == 1
    assert "not well-formed XML" in figures["failures"][0]["reason"]
    text = subprocess.run(
        [sys.executable, "-m", "exchange", "status"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "1C exchange" in text and "offers.xml" in text


def test_a_file_sent_again_after_its_import_starts_afresh_and_a_repeated_import_is_answered(
    serve: Serve, db: Engine
) -> None:
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", package(("A", "1.00")))
    assert c.import_file("offers.xml")[0].status == "success"
    again, _ = c.import_file("offers.xml")  # the answer was lost: 1C asks again
    assert again.status == "success" and 1 == len(staged(db))
    c.upload("offers.xml", package(("A", "2.00"), generated_at="2026-12-01T12:00:00"))
    assert c.import_file("offers.xml")[0].status == "success"
    assert ["1.00", "2.00"] == [json.loads(r["payload"])["price"] for r in staged(db)]


def test_a_second_archive_in_one_session_is_read_anew(serve: Serve, db: Engine) -> None:
    c = session(serve(**TYPES))
    for n, price in enumerate(("1.00", "2.00")):
        archive = _zip(
            [("offers.xml", package(("A", price), generated_at=f"2026-12-01T1{n}:00:00"))]
        )
        assert c.upload(f"v8_0001_0{n + 1}.zip", archive).status == "success"
        assert c.import_file("offers.xml")[0].status == "success"
    assert ["1.00", "2.00"] == [json.loads(r["payload"])["price"] for r in staged(db)]


def test_an_archive_sent_again_under_its_name_is_unpacked_and_read_anew(
    serve: Serve, db: Engine, tmp_path: Path
) -> None:
    """Issue 21, item 2: the second archive of one name in one exchange starts afresh (its
    file, what the first unpacked and the mark), so its new prices are staged, not 'nothing
    new' from the first one's files."""
    c = session(serve(**TYPES))
    for n, price in enumerate(("1.00", "2.00")):
        archive = _zip(
            [("offers.xml", package(("A", price), generated_at=f"2026-12-01T1{n}:00:00"))]
        )
        assert c.upload("v8_0001_01.zip", archive).status == "success"
        answer, _ = c.import_file("offers.xml")
        assert answer.status == "success" and "nothing new" not in answer.text, answer.text
    assert ["1.00", "2.00"] == [json.loads(r["payload"])["price"] for r in staged(db)]


def test_chunks_of_one_archive_append_and_a_resent_archive_drops_what_the_old_one_held(
    serve: Serve, db: Engine
) -> None:
    """1C sends a large archive as several ``file`` requests: they append. An archive sent
    again after it was unpacked takes away the files the old one unpacked."""
    c = session(serve(**TYPES))
    first = _zip([("old.xml", package(("A", "1.00"))), ("offers.xml", package(("B", "1.00")))])
    c.max_chunk = 100  # several ``file`` requests for one archive
    assert c.upload("v8.zip", first).status == "success"
    assert c.import_file("offers.xml")[0].status == "success"
    second = _zip([("offers.xml", package(("B", "3.00"), generated_at="2026-12-02T10:00:00"))])
    assert c.upload("v8.zip", second).status == "success"
    assert c.import_file("offers.xml")[0].status == "success"
    gone, _ = c.import_file("old.xml")
    assert gone.status == "failure" and "не загружался" in gone.text
    assert ["1.00", "3.00"] == [json.loads(r["payload"])["price"] for r in staged(db)]


def test_a_failure_for_prices_of_no_mapped_type_names_them_even_without_a_type_id(
    serve: Serve, db: Engine
) -> None:
    """Issue 21, item 14: a price whose ИдТипаЦены is empty is named, not an empty list
    ('the file has ; map them ...')."""
    offers = offers_xml(Package(types=[], offers=[CmlOffer("A", [CmlPrice("", "5.00")])]))
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", offers)
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "failure" and "в файле: ;" not in answer.text
    assert "в файле: (a price without ИдТипаЦены); укажите нужные" in answer.text, answer.text
    assert [] == staged(db)


def test_an_offer_with_more_than_64_prices_is_counted_and_the_files_other_offers_staged(
    serve: Serve, db: Engine
) -> None:
    """Issue 21, item 10: such an offer is invalid-contract, counted in the exchange's outcome
    (1C's answer, the operators' entry); the other offers of the file are staged."""
    big = CmlOffer("BIG", [CmlPrice("t-retail", f"{n}.00", "руб") for n in range(65)])
    offers = offers_xml(
        Package(types=[RETAIL], offers=[big, CmlOffer("A", [CmlPrice("t-retail", "5.00")])])
    )
    c = session(serve(**TYPES), use_zip=False)
    c.upload("offers.xml", offers)
    answer, _ = c.import_file("offers.xml")
    assert answer.status == "success", answer.text
    assert "предложений, у которых больше 64 цен: 1 (invalid-contract)" in answer.text
    assert "more than 64 prices" in entries(db)[-1]["detail"]
    assert entries(db)[-1]["not_sent"] == 1
    assert ["A/retail"] == [r["aggregate"] for r in staged(db)]


def test_prices_intake_will_refuse_are_counted_as_not_sent_not_as_accepted(
    serve: Serve, db: Engine
) -> None:
    """Contract 9a and 15 (attack onec_cur, onec_owner): a price in currency ``XX`` (the
    contract's own check, ``price_fields_problem``) and one whose (sku, price type) another
    aggregate already owns (``price_owners``: the JSON intake's ``OWN-2``) are refused at
    intake, so 1C is never told they were accepted: counted among the not-sent, in the answer
    and on the exchange's entry."""
    with transaction(db) as connection:
        connection.execute(
            insert(price_owners).values(sku="OWN-2", price_type="retail", aggregate="OWN-2")
        )
    data = offers_xml(
        Package(
            types=[RETAIL],
            offers=[
                CmlOffer("A", [CmlPrice("t-retail", "100", "руб")]),
                CmlOffer("B", [CmlPrice("t-retail", "400", "XX")]),
                CmlOffer("OWN-2", [CmlPrice("t-retail", "20", "руб")]),
            ],
        )
    )
    answer = client(serve(**TYPES), use_zip=False).exchange([("offers.xml", data)])
    said = answer.answers["offers.xml"]
    assert said.status == "success", said
    assert "Принято цен: 1 (предложений: 3)" in said.text, said.text
    assert "с неизвестной валютой или ценой не числом: 1" in said.text, said.text
    assert "уже принадлежат другому агрегату: 1" in said.text, said.text
    entry = entries(db)[-1]
    assert (3, 2) == (entry["intents"], entry["not_sent"]), entry["detail"]


def test_a_price_refused_at_intake_after_the_answer_shows_on_the_exchanges_page(
    serve: Serve, db: Engine, db_url: str
) -> None:
    """Contract 15: the JSON intake's ``OWN-3`` waits in staging, not yet taken, when 1C's
    ``OWN-3/retail`` is published (no owner yet: 1C is told it is accepted); intake then gives
    the pair to ``OWN-3`` and refuses 1C's price. The exchange's page shows that refusal
    against the exchange, so the 1C administrator sees it."""
    stage(db, [price_row("OWN-3", 1)])
    base = serve(**TYPES)
    data = offers_xml(
        Package(types=[RETAIL], offers=[CmlOffer("OWN-3", [CmlPrice("t-retail", "20", "руб")])])
    )
    said = client(base, use_zip=False).exchange([("offers.xml", data)]).answers["offers.xml"]
    assert "Принято цен: 1 (предложений: 1)" in said.text, said.text
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    add_operator(db, "olga", "operator")
    page = signed_in(base, "olga").get("/exchanges").text
    assert "не приняты при загрузке (карантин): 1" in page, page
    close_all()


def test_over_long_ids_cut_to_one_aggregate_are_not_also_repeats(serve: Serve, db: Engine) -> None:
    """Contract 15 (attack onec_long): two over-long Ид shortened to the same ``LLL…/retail``
    are two invalid-contract records, never also «повтор в пакете»: 1C is told 2 not sent and
    the one price that goes on as accepted."""
    data = offers_xml(
        Package(
            types=[RETAIL],
            offers=[
                CmlOffer("L" * 250, [CmlPrice("t-retail", "1", "руб")]),
                CmlOffer("LN-1", [CmlPrice("t-retail", "2", "руб")]),
                CmlOffer("L" * 194, [CmlPrice("t-retail", "3", "руб")]),
            ],
        )
    )
    said = client(serve(**TYPES), use_zip=False).exchange([("offers.xml", data)])
    answer = said.answers["offers.xml"]
    assert "Принято цен: 1 (предложений: 3)" in answer.text, answer.text
    assert "длиннее 100 символов: 2" in answer.text, answer.text
    assert "повтор" not in answer.text, answer.text
    entry = entries(db)[-1]
    assert (3, 2) == (entry["intents"], entry["not_sent"]), entry["detail"]


def test_the_later_offer_of_an_aggregate_wins_whatever_it_holds(
    serve: Serve, db: Engine, db_url: str
) -> None:
    """Contract 15, one rule (docs/1c.ru.md, attack onec_dup): within a package the later offer
    of an aggregate wins whatever it holds. A later copy not of the base unit (Коэффициент 2)
    or with an unknown currency (``XX``) is not sent, and neither is the earlier copy («повтор
    в пакете»): nothing of that aggregate is sent from this package, and 1C is told so."""
    data = offers_xml(
        Package(
            types=[RETAIL],
            offers=[
                CmlOffer("A", [CmlPrice("t-retail", "100", "руб")]),
                CmlOffer("A", [CmlPrice("t-retail", "200", "руб", coefficient="2")]),
                CmlOffer("B", [CmlPrice("t-retail", "300", "руб")]),
                CmlOffer("B", [CmlPrice("t-retail", "400", "XX")]),
                CmlOffer("C", [CmlPrice("t-retail", "5", "руб")]),
            ],
        )
    )
    said = client(serve(**TYPES), use_zip=False).exchange([("offers.xml", data)])
    answer = said.answers["offers.xml"]
    assert "Принято цен: 1 (предложений: 5)" in answer.text, answer.text
    assert "повторённых в пакете: 2" in answer.text, answer.text
    assert "не за базовую единицу: 1" in answer.text, answer.text
    assert "с неизвестной валютой или ценой не числом: 1" in answer.text, answer.text
    assert 4 == entries(db)[-1]["not_sent"]
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    with transaction(db, read_only=True) as connection:
        sent = {
            r.aggregate
            for r in connection.execute(select(messages).where(messages.c.rejected.is_(False)))
        }
    assert {"C/retail"} == sent


def test_a_package_formed_before_one_already_staged_is_refused(serve: Serve, db: Engine) -> None:
    """Contract 9a, versions (attack onec_old_package): a later package wins, and «later» is
    when 1C formed it (``ДатаФормирования``), not when it arrived. A package formed at
    15:00:00 arriving after one formed at 15:00:01 is refused with words 1C shows, recorded
    on the exchange's entry, and stages nothing; the files of one exchange are never compared
    with each other, and a package without ДатаФормирования is numbered as before."""
    base = serve(**TYPES)
    new = package(("OP-1", "222.00"), generated_at="2026-12-05T15:00:01")
    old = package(("OP-1", "111.00"), generated_at="2026-12-05T15:00:00")
    said = client(base, use_zip=False).exchange([("offers-a.xml", new)]).answers
    assert said["offers-a.xml"].status == "success", said
    answer = client(base, use_zip=False).exchange([("offers-b.xml", old)]).answers["offers-b.xml"]
    assert answer.status == "failure", answer
    assert "более старый пакет не заменяет более новый" in answer.text, answer.text
    entry = entries(db)[-1]
    assert entry["outcome"] == "failure" and "formed at 2026-12-05 15:00:00" in entry["detail"]
    assert ["222.00"] == [json.loads(r["payload"])["price"] for r in staged(db)]
    # One exchange's own files: an earlier-formed second file of the same exchange is staged.
    both = client(base, use_zip=False).exchange(
        [
            ("offers.xml", package(("OP-2", "5"), generated_at="2026-12-05T16:00:05")),
            ("prices.xml", package(("OP-3", "6"), generated_at="2026-12-05T16:00:01")),
        ]
    )
    assert all(a.status == "success" for a in both.answers.values()), both.answers
    undated = package(("OP-1", "333.00"), generated_at="")
    late = client(base, use_zip=False).exchange([("offers-c.xml", undated)]).answers
    assert late["offers-c.xml"].status == "success", late
    assert "333.00" == json.loads(staged(db)[-1]["payload"])["price"]


def test_the_exchanges_row_of_an_older_package_says_it_was_refused_and_to_export_anew(
    serve: Serve, db: Engine
) -> None:
    """The 1C administrator's review: the row of an offers.xml refused as older than a package
    already staged read «Цен 0 / Не отправлено 0», and its advice «Запустите обмен ещё раз»
    did nothing when the same file was sent again. The row says the file was refused, and the
    advice says to export the current prices from 1C anew, not to send this file again."""
    base = serve(**TYPES)
    new = package(("OP-1", "222.00"), generated_at="2026-12-05T15:00:01")
    old = package(("OP-1", "111.00"), generated_at="2026-12-05T15:00:00")
    client(base, use_zip=False).exchange([("offers-a.xml", new)])
    for _ in range(2):  # the same older file sent again is refused again
        answer = client(base, use_zip=False).exchange([("offers-b.xml", old)]).answers
        assert answer["offers-b.xml"].status == "failure", answer
        assert "выгрузите текущие цены из 1С заново" in answer["offers-b.xml"].text, answer
    add_operator(db, "olga", "operator")
    page = signed_in(base, "olga").get("/exchanges").text
    rows = [
        r
        for r in re.findall(r"<tr class=.*?</tr>", page, re.S)
        if "offers-b.xml" in re.sub(r"<[^>]+>", "", r)
    ]
    assert len(rows) == 2, page
    for row in rows:
        text = html.unescape(re.sub(r"<[^>]+>", "", row))
        assert "файл не принят: ничего не записано" in text, text
        assert "Повторная отправка этого файла ничего не изменит" in text, text
        assert "Запустите обмен ещё раз" not in text, text
        assert re.search(r'data-label="Не отправлено">—<', row), row
    close_all()
