"""One file, one import job (issue 21 follow-up): serve keeps an exchange's import jobs by
session and by the file a name means in that session's folder, not by the name as 1C (or
whoever holds its password) spelled it. Keyed by the raw name, ``./offers.xml`` after
``offers.xml`` had been imported missed the finished job, so the new file was appended to the
old one instead of replacing it (contract 9a: a ``file`` for a name already imported starts
afresh) and its prices were lost in a file that is no longer XML; during an import, a second
spelling was appended to the very file being read, or started a second import of it."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

import pytest
from sqlalchemy import text
from web_helpers import PASSWORD, USER

from exchange.db.engine import make_engine
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.web.files import Spelling, spelling

Serve = Callable[..., str]
RETAIL = CmlType("t-retail", "Розничная", "руб")
TYPES = {"1c_price_types": {"Розничная": "retail"}}


def offers(price: str) -> bytes:
    package = Package(types=[RETAIL], offers=[CmlOffer("A", [CmlPrice("t-retail", price, "руб")])])
    return offers_xml(package)


@pytest.fixture
def onec(serve: Serve) -> Iterator[OneCClient]:
    c = OneCClient(serve(**TYPES), USER, PASSWORD)
    assert c.checkauth().status == "success"
    c.init()
    yield c
    c.close()


def staged_prices(db_url: str) -> list[str]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT payload FROM staging_intents ORDER BY id"))
            return [str(row[0]) for row in rows]
    finally:
        engine.dispose()


@pytest.mark.parametrize("again", ["./offers.xml", ".//offers.xml", ".\\offers.xml"])
def test_a_file_sent_again_under_another_spelling_of_its_name_replaces_it(
    onec: OneCClient, db_url: str, tmp_path: Path, again: str
) -> None:
    first = offers("1.00")
    assert onec.upload("offers.xml", first).status == "success"
    answer, _ = onec.import_file("offers.xml")
    assert answer.status == "success", answer.text

    second = offers("2.00")
    assert onec.upload(again, second).status == "success"
    answer, _ = onec.import_file(again)
    assert answer.status == "success", answer.text  # appended to the old one: not XML
    assert "Принято цен: 1" in answer.text, answer.text
    (kept,) = [p for p in (tmp_path / "1c").rglob("offers.xml")]
    assert kept.read_bytes() == second
    prices = staged_prices(db_url)
    assert len(prices) == 2 and "2.00" in prices[1], prices


def test_the_spelling_of_a_linux_folder_folds_nothing(tmp_path: Path) -> None:
    """Asked of the file system itself: here (ext4, tmpfs) ``Offers.xml`` and ``offers.xml``
    are two files, so they keep two jobs; the probe leaves nothing behind."""
    assert spelling(tmp_path) == Spelling()
    assert list(tmp_path.iterdir()) == []


def test_a_folding_file_system_gives_every_spelling_of_a_name_one_key() -> None:
    composed = "Цены/Прайс-é.xml"
    decomposed = unicodedata.normalize("NFD", composed)
    names = [composed, decomposed, "цены/прайс-É.XML", "Цены./Прайс-é.xml. "]
    windows = Spelling(folds_case=True, drops_trailing=True)
    macos = Spelling(folds_case=True, folds_unicode=True)
    linux = Spelling()
    assert len({macos.key(PurePosixPath(n)) for n in names[:3]}) == 1
    assert len({windows.key(PurePosixPath(n)) for n in (composed, names[2], names[3])}) == 1
    assert len({linux.key(PurePosixPath(n)) for n in names}) == 4


def test_a_file_being_imported_is_not_appended_to_under_another_spelling(
    serve: Serve, tmp_path: Path
) -> None:
    """While ``offers.xml`` is read, ``./offers.xml`` is the same file: refused (``send it
    later``), never appended to the file under the reader. Margin: 60,000 offers take about
    1 s to read here (the whole test 2.2-2.7 s), the second upload follows the first
    ``progress`` within milliseconds; before the fix its 1,112 bytes went onto the file."""
    c = OneCClient(serve(progress_wait=0.0, **TYPES), USER, PASSWORD)
    try:
        assert c.checkauth().status == "success"
        c.init()
        many = [CmlOffer(f"A{n}", [CmlPrice("t-retail", "1.00", "руб")]) for n in range(60_000)]
        big = offers_xml(Package(types=[RETAIL], offers=many))
        assert c.upload("offers.xml", big).status == "success"
        started = c.read(c._request("GET", "import", filename="offers.xml"))
        assert started.status == "progress", started.text
        again = c.upload("./offers.xml", offers("2.00"))
        assert again.status == "failure" and "пришлите его позже" in again.text, again.text
        (kept,) = [p for p in (tmp_path / "1c").rglob("offers.xml")]
        assert kept.read_bytes() == big
        answer, _ = c.import_file("offers.xml")
        assert answer.status == "success" and "Принято цен: 60000" in answer.text, answer.text
    finally:
        c.close()
