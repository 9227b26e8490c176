"""The attacker's catalogue, 1C's files (issue 21, items 12 and 14): whatever names and
archives a signed-in 1C (or one who stole its password) sends, ``exchange serve`` answers a
``failure`` with the reason or does what the name says; never a 500, never a file it cannot
account for, never a name that splits a line."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from web_helpers import PASSWORD, USER

from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.web.files import MAX_UNPACKED

Serve = Callable[..., str]
RETAIL = CmlType("t-retail", "Розничная", "руб")
TYPES = {"1c_price_types": {"Розничная": "retail"}}


def offers(price: str = "1.00") -> bytes:
    return offers_xml(
        Package(types=[RETAIL], offers=[CmlOffer("A", [CmlPrice("t-retail", price, "руб")])])
    )


def archive(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def onec(serve: Serve) -> Iterator[OneCClient]:
    """A 1C node signed in to a serve whose retail prices are mapped."""
    c = OneCClient(serve(**TYPES), USER, PASSWORD)
    assert c.checkauth().status == "success"
    c.init()
    yield c
    c.close()


def raw_upload(c: OneCClient, name: str, data: bytes) -> httpx.Response:
    return c._request("POST", "file", body=data, filename=name)


def files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "1c").rglob("*") if p.is_file())


def test_a_file_name_too_long_for_the_file_system_is_a_failure_with_the_reason(
    onec: OneCClient, tmp_path: Path
) -> None:
    """A 304-character name (ENAMETOOLONG) is refused, not a 500, at upload and at import."""
    name = "a" * 300 + ".xml"
    response = raw_upload(onec, name, offers())
    assert response.status_code == 200, response.text
    answer = onec.read(response)
    assert answer.status == "failure" and "слишком длинное" in answer.text
    imported = onec.read(onec._request("GET", "import", filename=name))
    assert imported.status == "failure" and "слишком длинное" in imported.text
    assert [] == files(tmp_path)


@pytest.mark.parametrize(
    "name", ["offers\r\n.xml", "offers\n.xml", "of\x1bfers.xml", "goods/\x7f.xml", "a\x85.xml"]
)
def test_a_file_name_with_a_control_character_is_refused(
    onec: OneCClient, tmp_path: Path, name: str
) -> None:
    answer = onec.read(raw_upload(onec, name, offers()))
    assert answer.status == "failure" and "управляющий символ" in answer.text
    assert len(answer.lines) == 1  # the reason is one line, whatever the name held
    assert [] == files(tmp_path)


@pytest.mark.parametrize(
    "name", ["x.xml.Part", "x.XML.SPOOL", "x.xml.Rows.DB", "v8.zip.UNPACKED", "goods/y.xml.PART"]
)
def test_the_services_own_file_names_are_reserved_in_any_case(
    onec: OneCClient, tmp_path: Path, name: str
) -> None:
    """On a file system that ignores case (Windows), ``x.xml.Part`` is the service's own
    ``x.xml.part``."""
    answer = onec.read(raw_upload(onec, name, b"<x/>"))
    assert answer.status == "failure" and "занято сервисом" in answer.text
    assert [] == files(tmp_path)


def test_an_archive_named_in_capitals_is_unpacked_and_read(
    onec: OneCClient, tmp_path: Path
) -> None:
    assert onec.upload("V8_0001_01.ZIP", archive([("offers.xml", offers())])).status == "success"
    answer, _ = onec.import_file("offers.xml")
    assert answer.status == "success" and "Принято цен: 1" in answer.text, answer.text


def test_an_archive_of_too_many_files_is_refused_before_it_fills_the_disk(
    onec: OneCClient, tmp_path: Path
) -> None:
    """Refused at MAX_UNPACKED XML files; the images before them are dropped unread, never
    unpacked. (The 20,000 images this test once had came after the XML files: the refusal
    came first and they were never read.)"""
    members = [(f"import_files/{n}.jpg", b"") for n in range(1_000)]
    members += [(f"f{n}.xml", b"") for n in range(MAX_UNPACKED + 1)]
    assert onec.upload("v8.zip", archive(members)).status == "success"
    answer, _ = onec.import_file("f0.xml")
    assert answer.status == "failure", answer.text
    assert f"больше {MAX_UNPACKED} файлов XML" in answer.text
    assert len(files(tmp_path)) <= MAX_UNPACKED + 1  # the archive and what was written first
    assert not any(name.endswith(".jpg") for name in files(tmp_path))


def test_images_in_an_archive_are_dropped_unread_and_the_prices_beside_them_staged(
    onec: OneCClient, tmp_path: Path
) -> None:
    members = [("offers.xml", offers())] + [(f"import_files/{n}.jpg", b"\xff") for n in range(50)]
    assert onec.upload("v8.zip", archive(members)).status == "success"
    assert onec.import_file("offers.xml")[0].status == "success"
    image, _ = onec.import_file("import_files/1.jpg")
    assert image.status == "success" and "принят и пропущен" in image.text
    assert not any(name.endswith(".jpg") for name in files(tmp_path))


def test_the_default_1c_folder_is_private_and_under_systemds_state_directory(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not ``/tmp/exchange-1c`` (predictable, world-readable): ``$STATE_DIRECTORY/1c``, 0700."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    c = OneCClient(serve(**TYPES, **{"1c_dir": None}), USER, PASSWORD)
    folder = tmp_path / "state" / "1c"
    assert stat_mode(folder) == 0o700
    assert c.checkauth().status == "success"
    c.init()
    assert c.upload("offers.xml", offers()).status == "success"
    assert [p.name for p in folder.rglob("offers.xml")] == ["offers.xml"]
    c.close()


def test_without_systemd_the_default_1c_folder_is_beside_sqlite_or_in_the_users_cache(
    serve: Serve, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    serve(**TYPES, **{"1c_dir": None})
    if db_url.startswith("sqlite"):
        folder = Path(db_url.removeprefix("sqlite:///")).parent / "exchange-1c"
    else:
        folder = tmp_path / "cache" / "exchange" / "1c"
    assert stat_mode(folder) == 0o700


def test_a_configured_1c_folder_open_to_others_is_made_private_at_start(
    serve: Serve, tmp_path: Path
) -> None:
    folder = tmp_path / "1c"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    serve(**TYPES)
    assert stat_mode(folder) == 0o700


def stat_mode(folder: Path) -> int:
    return folder.stat().st_mode & 0o777
