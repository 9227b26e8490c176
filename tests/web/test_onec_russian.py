"""What 1C shows its Russian administrator is Russian (issue 24 item 4, contract 9a): every
answer of ``exchange serve``'s 1C exchange after its first line is Russian text in
windows-1251 with that charset named, as 1C-Bitrix's catalog.import.1c answers; no English
word outside an allow-list of codes (file names, settings, XML element names, the reasons'
codes). And the history details the message page shows are Russian."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import httpx
import pytest
from web_helpers import PASSWORD, USER

from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.ops.find import known_reasons
from exchange.words import detail_words, error_words, onec_words

# What may stay as it is inside a Russian text: codes a person types, configures or finds in a
# file, and the names the test's own data carries.
ALLOWED = {
    "EXCHANGE_1C_USER",
    "EXCHANGE_1C_PASSWORD",
    "EXCHANGE_1C_PRICE_TYPES",
    "EXCHANGE_BITRIX_PRICE_TYPES",
    "EXCHANGE_WOO_PRICE_FIELDS",
    "CommerceML",
    "XML",
    "UTF-8",
    "zip",
    "checkauth",
    "init",
    "file_limit",
    "invalid-contract",
    "null",
    "RabbitMQ",
    "HTTP",
    "staging_intents",
    "success",
    "DTD",
    "olga",  # the test's operator
    *known_reasons(),
}
DATA = re.compile(
    r"price\.\S+|'[^']*'|\"[^\"]*\"|<[^>]*>|\{[^}]*\}|\S+\.[A-Za-z]{3}\b|SKU-\S+|w-\S+|http-\d+"
)


def english_words(text: str) -> list[str]:
    text = DATA.sub(" ", text)  # names and data said back, quoted or as files
    words = re.findall(r"[A-Za-z][A-Za-z0-9_\-]*", text)
    return sorted({w for w in words if w not in ALLOWED})


RETAIL = CmlType("t-retail", "Розничная", "руб")
PURCHASE = CmlType("t-purchase", "Закупочная", "руб")


def offers(*prices: tuple[str, str]) -> bytes:
    return offers_xml(
        Package(
            types=[RETAIL, PURCHASE],
            offers=[
                CmlOffer(sku, [CmlPrice("t-retail", value, "руб"), CmlPrice("t-purchase", "1")])
                for sku, value in prices
            ],
            generated_at="2026-12-01T10:00:00",
        )
    )


@pytest.fixture
def clients() -> Iterator[list[OneCClient]]:
    made: list[OneCClient] = []
    yield made
    for c in made:
        c.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_answer_1c_shows_its_administrator_is_russian_in_windows_1251(
    serve: Callable[..., str], clients: list[OneCClient]
) -> None:
    base = serve(**{"1c_price_types": {"Розничная": "retail"}})
    url = f"{base}/1c_exchange.php"
    answers: dict[str, httpx.Response] = {}
    answers["wrong password"] = httpx.get(
        url, params={"type": "catalog", "mode": "checkauth"}, auth=(USER, "wrong-pass-1")
    )
    answers["no session"] = httpx.get(url, params={"type": "catalog", "mode": "init"})
    answers["unknown type"] = httpx.get(
        url, params={"type": "stock", "mode": "init"}, auth=(USER, PASSWORD)
    )

    c = OneCClient(base, USER, PASSWORD, use_zip=False)
    clients.append(c)
    c.checkauth()
    c.init()
    sent: list[tuple[str, str, bytes | None]] = [
        ("file", "offers.xml", offers(("A", "10.00"), ("B", "2.50"))),
        ("import", "offers.xml", None),
        ("file", "broken.xml", b"<?xml version='1.0'?><a><b></a>"),
        ("import", "broken.xml", None),
        ("file", "other.xml", b"<?xml version='1.0'?><root/>"),
        ("import", "other.xml", None),
        ("file", "picture.jpg", b"\xff\xd8\xff"),
        ("import", "picture.jpg", None),
        ("import", "never-sent.xml", None),
        ("file", "../escape.xml", b"<x/>"),
        ("deactivate", "", None),
        ("unknown", "", None),
    ]
    cookie = {"Cookie": f"{c.cookie[0]}={c.cookie[1]}"} if c.cookie else {}
    for mode, name, body in sent:
        params = {"type": "catalog", "mode": mode, "filename": name, "sessid": c.sessid or ""}
        key = f"{mode} {name}".strip()
        for _ in range(100):  # import answers progress while it reads
            answers[key] = httpx.request(
                "POST" if body is not None else "GET",
                url,
                params=params,
                content=body,
                headers=cookie,
                timeout=60,
            )
            if not answers[key].content.startswith(b"progress"):
                break
    again = OneCClient(base, USER, PASSWORD, use_zip=False)
    clients.append(again)
    again.checkauth()
    again.init()
    again.upload("offers.xml", offers(("A", "10.00"), ("B", "2.50")))
    for mode in ("import",):
        answers["the same file again"] = httpx.get(
            url,
            params={
                "type": "catalog",
                "mode": mode,
                "filename": "offers.xml",
                "sessid": again.sessid or "",
            },
            headers={"Cookie": f"{again.cookie[0]}={again.cookie[1]}"} if again.cookie else {},
            timeout=60,
        )
    answers["sale file"] = httpx.post(
        url,
        params={"type": "sale", "mode": "file", "sessid": c.sessid or ""},
        headers=cookie,
        content=b"<x/>",
    )
    answers["sale success"] = httpx.get(
        url, params={"type": "sale", "mode": "success", "sessid": c.sessid or ""}, headers=cookie
    )
    answers["complete"] = httpx.get(
        url,
        params={"type": "catalog", "mode": "complete", "sessid": c.sessid or ""},
        headers=cookie,
    )

    english: dict[str, list[str]] = {}
    for what, response in answers.items():
        assert "charset=windows-1251" in response.headers["Content-Type"], what
        text = response.content.decode("cp1251")
        first, _, rest = text.partition("\n")
        assert first in ("success", "failure", "progress"), (what, text)
        assert re.search("[а-яА-Я]", rest), (what, text)
        if words := english_words(rest):
            english[what] = words
    assert english == {}, english
    assert "Принято цен: 2" in answers["import offers.xml"].content.decode("cp1251")
    assert "уже был принят" in answers["the same file again"].content.decode("cp1251")


SERVICE_TEXTS = [
    "not authorized: wrong user or password, or no session (checkauth)",
    "too many wrong passwords from this address: try again in 30 s",
    "the 1C exchange is closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not set on the "
    "service",
    "upload of 'offers.xml' was cut short: 100 of 200 bytes",
    "'offers.xml' is being imported: send it later",
    "a part of 'offers.xml' is larger than file_limit=4096 bytes (init announced it)",
    "file 'offers.xml' is larger than 4096 bytes",
    "reading offers.xml: 120 offers so far",
    "catalogue read: 2 price types, 300 articles kept",
    "no price of a mapped type: the file has Закупочная, Розничная; map them in "
    "EXCHANGE_1C_PRICE_TYPES",
    "4 prices staged from 2 offers; 1 offers without prices: nothing to send; 2 of unmapped "
    "price types not sent (Закупочная); 1 not sent: not of the base unit "
    "(Коэффициент/МинКоличество); 1 offers without an article: their 2 prices not sent "
    "(quarantined); 1 offers with more than 64 prices not sent (invalid-contract)",
    "the file is empty",
    "a document type declaration (DTD) is not allowed in a CommerceML file",
    "file name 'a\\x1b.xml' holds a control character: not allowed",
    "file name 'x.xml.part' is reserved",
    "archive member 'a.xml' expands more than 100 times",
    "the archive unpacks to more than 1000 bytes",
    "v8.zip holds more than 1000 XML files: not unpacked",
    "file name 'v8.zip.unpacked/x.xml' is reserved",
    "v8.zip is damaged: its data does not unpack",
    "v8.zip is damaged: its list of files lies past its end",
    "v8.zip holds a file name that is not valid UTF-8",
    # the reader's limits (exchange/intake/commerceml/parse.py), issue 34 item 7
    "a text node longer than 65536 characters in <Наименование>",
    "more than 1024 comments or processing instructions in the file",
    "a text longer than 1048576 bytes with no element in it",
    "more than 16 fields in one <Предложение>",
    "elements nested deeper than 64",
    "the file is nested too deeply",
    "no root element in the first 1048576 bytes of the file",
]


@pytest.mark.parametrize("text", SERVICE_TEXTS)
def test_each_text_of_the_service_is_said_to_1c_in_russian(text: str) -> None:
    said = onec_words(text)
    said.encode("cp1251")  # every character has a windows-1251 byte
    assert re.search("[а-яА-Я]", said) and not english_words(said), said


DETAILS = [
    ("from staging row #12", "из строки staging_intents № 12"),
    (
        'HTTP 500: {"error":"poison"} (attempt 5 of 5)',
        'HTTP 500: {"error":"poison"} (попытка 5 из 5)',
    ),
    (
        'result-unknown: site busy, not charged: HTTP 429: {"error":"rate limited"}',
        "результат неизвестен: сайт перегружен, попытка не засчитана: HTTP 429: "
        '{"error":"rate limited"}',
    ),
    (
        "superseded by price.SKU-1_retail.v2.ab",
        "вытеснено более новой версией price.SKU-1_retail.v2.ab",
    ),
    ("version 3 never arrived within 1 s", "версия 3 не пришла за 1 с"),
    (
        "price type 'purchase' is mapped to null by EXCHANGE_WOO_PRICE_FIELDS: left out of this "
        "shop on purpose",
        "вид цены 'purchase' сопоставлен с null в EXCHANGE_WOO_PRICE_FIELDS: в этот магазин "
        "намеренно не отправляется",
    ),
    ("confirmed by RabbitMQ", "RabbitMQ подтвердил приём"),
    ("retried by olga (was http-422)", "повтор: оператор olga (причина была http-422)"),
    (
        "the lease of w-1 expired during attempt 2 of 5; the result of that attempt is unknown",
        "аренда обработчика w-1 истекла во время попытки 2 из 5; результат этой попытки неизвестен",
    ),
]


@pytest.mark.parametrize(("english", "russian"), DETAILS)
def test_the_history_details_the_message_page_shows_are_russian(english: str, russian: str) -> None:
    assert russian == detail_words(english)
    assert russian == error_words(english, "ru"), "the page's said() says it"
    assert english == error_words(english, "en")
    assert not english_words(russian), russian
