"""The CommerceML reader: safe (no entity is expanded or fetched), streamed, and total: any
input gives intents or a clear CmlError, never another exception."""

from __future__ import annotations

import io
import json
import re
import string
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exchange.dev.cml_gen import (
    CmlOffer,
    CmlPrice,
    CmlType,
    Package,
    catalogue_xml,
    offers_xml,
    write_big_offers,
)
from exchange.intake.commerceml.mapping import Mapper, amount, currency
from exchange.intake.commerceml.parse import (
    BLOCK,
    MAX_DEPTH,
    MAX_MARKUP,
    MAX_PRICES,
    MAX_PROLOG,
    MAX_RUN,
    CmlError,
    Header,
    parse,
)
from exchange.intake.contracts import Accepted, Rejected, StagingRow, validate
from exchange.settings import DEFAULT_KINDS

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<КоммерческаяИнформация ВерсияСхемы="2.07"><ПакетПредложений><Предложения><Предложение>
<Ид>&lol9;</Ид><Цены><Цена><ИдТипаЦены>t</ИдТипаЦены><ЦенаЗаЕдиницу>1</ЦенаЗаЕдиницу></Цена>
</Цены></Предложение></Предложения></ПакетПредложений></КоммерческаяИнформация>
""".encode()


def external_entity(target: Path) -> bytes:
    return f"""<?xml version="1.0"?>
<!DOCTYPE x [ <!ENTITY secret SYSTEM "file://{target}"> ]>
<КоммерческаяИнформация ВерсияСхемы="2.07"><ПакетПредложений><Предложения><Предложение>
<Ид>&secret;</Ид><Цены><Цена><ИдТипаЦены>t</ИдТипаЦены><ЦенаЗаЕдиницу>1</ЦенаЗаЕдиницу></Цена>
</Цены></Предложение></Предложения></ПакетПредложений></КоммерческаяИнформация>
""".encode()


class Collect:
    def __init__(self) -> None:
        self.offers: list[CmlOffer | object] = []
        self.types: list[object] = []
        self.articles: list[tuple[str, str]] = []
        self.names: list[tuple[str, str]] = []

    def price_type(self, price_type: object) -> None:
        self.types.append(price_type)

    def article(self, product_id: str, article: str) -> None:
        self.articles.append((product_id, article))

    def product_name(self, product_id: str, name: str) -> None:
        self.names.append((product_id, name))

    def offer(self, offer: object) -> None:
        self.offers.append(offer)


def read(data: bytes) -> tuple[Header, Collect]:
    sink = Collect()
    return parse(io.BytesIO(data), sink), sink


def test_a_billion_laughs_file_is_refused_before_any_expansion() -> None:
    with pytest.raises(CmlError, match="document type declaration"):
        read(BILLION_LAUGHS)


def test_an_external_entity_is_never_fetched(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    with pytest.raises(CmlError) as caught:
        read(external_entity(secret))
    assert "TOP-SECRET" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"<a>", "not a CommerceML file"),
        ("<КоммерческаяИнформация>".encode(), "not well-formed XML at line 1"),
        (b"<html/>", "not a CommerceML file"),
        ("<Ид>1</Ид>".encode(), "not a CommerceML file"),
        (("<КоммерческаяИнформация>" + "<Ид>" * 100).encode(), "nested deeper than 64"),
        (b"\xef\xbb\xbf<?xml version='1.0'?><\xd0\x9a", "not well-formed XML"),
    ],
)
def test_bad_input_is_one_clear_line(data: bytes, message: str) -> None:
    with pytest.raises(CmlError, match=message) as caught:
        read(data)
    assert "\n" not in str(caught.value)


def test_windows_1251_is_read() -> None:
    text = (
        '<?xml version="1.0" encoding="windows-1251"?>'
        '<КоммерческаяИнформация ВерсияСхемы="2.05"><ПакетПредложений><Предложения>'
        "<Предложение><Ид>Стол</Ид><Цены><Цена><ИдТипаЦены>t</ИдТипаЦены>"
        "<ЦенаЗаЕдиницу>5</ЦенаЗаЕдиницу></Цена></Цены></Предложение>"
        "</Предложения></ПакетПредложений></КоммерческаяИнформация>"
    )
    header, sink = read(text.encode("cp1251"))
    assert header.offers_package and [o.id for o in sink.offers] == ["Стол"]  # type: ignore[attr-defined]


def test_a_tax_name_inside_a_price_is_not_taken_for_anything() -> None:
    data = offers_xml(Package(offers=[CmlOffer("A", [CmlPrice("t", "1.5")])]))
    data = data.replace(
        "</Цена>".encode(), "<Налог><Наименование>НДС</Наименование></Налог></Цена>".encode()
    )
    _, sink = read(data)
    [offer] = sink.offers
    assert offer.prices[0].value == "1.5"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12450", "12450"),
        ("7706.3", "7706.3"),
        ("2 042,66", "2042.66"),
        ("1\u00a0000.00", "1000.00"),
        ("abc", "abc"),
        ("1e5", "1e5"),
    ],
)
def test_amount_is_read_as_a_decimal_never_a_float(raw: str, expected: str) -> None:
    assert expected == amount(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("руб", "RUB"),
        ("руб.", "RUB"),
        ("RUR", "RUB"),
        ("643", "RUB"),
        ("USD", "USD"),
        ("грн", "грн"),
    ],
)
def test_currency_names_map_to_iso_and_others_pass_for_intake_to_refuse(
    raw: str, expected: str
) -> None:
    assert expected == currency(raw)


# -- properties -----------------------------------------------------------------------------

text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)
prices = st.builds(
    CmlPrice,
    type_id=st.sampled_from(["t1", "t2", "Розничная", "unknown"]),
    value=st.one_of(
        st.decimals(
            min_value=-10, max_value=10**13, places=2, allow_nan=False, allow_infinity=False
        ).map(str),
        text,
    ),
    currency=st.one_of(st.none(), st.sampled_from(["руб", "RUB", "USD", "грн", "643"]), text),
    coefficient=st.one_of(st.none(), st.sampled_from(["1", "10", "0.5", "x"])),
    min_quantity=st.one_of(st.none(), st.sampled_from(["1", "5", "y"])),
)
offers = st.builds(
    CmlOffer,
    id=st.text(alphabet=string.ascii_letters + string.digits + "#-", min_size=0, max_size=20),
    prices=st.lists(prices, max_size=4),
    article=st.one_of(st.none(), text),
    with_prices=st.booleans(),
)
packages = st.builds(
    Package,
    offers=st.lists(offers, max_size=6),
    types=st.just([CmlType("t1", "Розничная", "руб"), CmlType("t2", "Оптовая", "USD")]),
    schema=st.sampled_from(["2.03", "2.04", "2.05", "2.07", "2.08", "2.09", "2.10", "3.1"]),
    namespace=st.sampled_from([None, "urn:1C.ru:commerceml_2", "urn:1C.ru:commerceml_3"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(package=packages, sku_mode=st.sampled_from(["id", "article"]))
def test_any_well_formed_package_gives_intents_that_intake_can_judge(
    package: Package, sku_mode: str
) -> None:
    rows: list[tuple[str, str]] = []
    mapper = Mapper(
        price_types={"Розничная": "retail", "t2": "wholesale"},
        sku_mode=sku_mode,  # type: ignore[arg-type]
        known_types={},
        articles={},
        out=lambda aggregate, payload, _name: rows.append((aggregate, payload)),
    )
    try:
        parse(io.BytesIO(offers_xml(package)), mapper)
    except CmlError as exc:  # a clear failure is allowed (e.g. a text node too long)
        assert "\n" not in str(exc)
        return
    mapper.failure()  # never raises
    for aggregate, payload in rows:
        data = json.loads(payload)
        assert isinstance(data["price"], str) and data["price_type"] in ("retail", "wholesale")
        verdict = validate(
            StagingRow(0, "price", aggregate, 1, payload, "1", "ref", datetime.now(UTC)),
            DEFAULT_KINDS,
        )
        assert isinstance(verdict, Accepted | Rejected)
        if isinstance(verdict, Accepted):
            assert aggregate == f"{data['sku']}/{data['price_type']}"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), cut=st.integers(0, 2000))
def test_any_bytes_or_a_cut_package_give_a_clear_failure_never_an_exception(
    data: bytes, cut: int
) -> None:
    sample = offers_xml(Package(offers=[CmlOffer("A", [CmlPrice("t1", "1")])]))
    for candidate in (data, sample[:cut], sample[:cut] + data):
        try:
            read(candidate)
        except CmlError as exc:
            assert "\n" not in str(exc)


def test_a_long_description_in_a_catalogue_is_no_concern_but_a_huge_field_is_refused() -> None:
    from exchange.dev.cml_gen import catalogue_xml

    catalogue = catalogue_xml(articles=[("P1", "A-1")]).replace(
        "<Наименование>Товар</Наименование>".encode(),
        ("<Описание>" + "слово " * 30_000 + "</Описание>").encode(),
    )
    _, sink = read(catalogue)
    assert [("P1", "A-1")] == sink.articles
    huge = offers_xml(Package(offers=[CmlOffer("x" * 70_000, [CmlPrice("t1", "1")])]))
    with pytest.raises(CmlError, match="text node longer than"):
        read(huge)


# -- the guards of the C parser (no handler can be set on it) -------------------------------

OFFER = (
    "<Предложение><Ид>A</Ид><Цены><Цена><ИдТипаЦены>t1</ИдТипаЦены>"
    "<ЦенаЗаЕдиницу>1</ЦенаЗаЕдиницу></Цена></Цены></Предложение>"
)


def offers_file(inside: str, *, prolog: str = "", after: str = "") -> bytes:
    """An offers file with ``inside`` in an element of the package, before one offer."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        + prolog
        + '<КоммерческаяИнформация ВерсияСхемы="2.07"><ПакетПредложений>'
        + inside
        + f"<Предложения>{OFFER}</Предложения>{after}</ПакетПредложений></КоммерческаяИнформация>"
    ).encode()


def test_a_doctype_after_a_prolog_longer_than_a_block_is_refused_before_any_expansion(
    tmp_path: Path,
) -> None:
    comment = "<!--" + "x" * (3 * BLOCK) + "-->\n"
    laughs = BILLION_LAUGHS.replace(b'<?xml version="1.0"?>', comment.encode())
    assert laughs.index(b"<!DOCTYPE") > 3 * BLOCK
    with pytest.raises(CmlError, match="document type declaration"):
        read(laughs)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    with pytest.raises(CmlError, match="document type declaration") as caught:
        read(external_entity(secret).replace(b'<?xml version="1.0"?>', comment.encode()))
    assert "TOP-SECRET" not in str(caught.value)


def test_a_prolog_longer_than_its_cap_is_refused() -> None:
    _, sink = read(offers_file("", prolog="<!--" + "x" * (MAX_PROLOG // 2) + "-->"))
    assert len(sink.offers) == 1
    with pytest.raises(CmlError, match="no root element in the first"):
        read(offers_file("", prolog="<!--" + "x" * MAX_PROLOG + "-->"))


RUN = MAX_RUN + 3 * BLOCK  # a run is seen at block ends: it may start late in one


@pytest.mark.parametrize(
    "run",
    [
        "слово " * (RUN // 11),  # one text node over many blocks
        "<!-- -->".join(["a" * 4000] * (RUN // 4000)),  # comments do not end a text
        "<![CDATA[<b>" + "a" * RUN + "]]>",  # nor a '<' inside CDATA
        "<![CDATA[" + "<b>aaaa" * (RUN // 7) + "]]>",
    ],
    ids=["text", "comments", "cdata", "cdata-with-tags"],
)
def test_a_text_run_longer_than_the_cap_across_blocks_is_refused(run: str) -> None:
    """No start tag in MAX_RUN bytes: the text held (a description, never read) is capped."""
    data = offers_file(f"<Описание>{run}</Описание>")
    assert len(data) > MAX_RUN + 2 * BLOCK
    with pytest.raises(CmlError, match=f"a text longer than {MAX_RUN} bytes"):
        read(data)


def test_a_text_under_the_cap_across_blocks_is_read_and_so_are_a_few_comments() -> None:
    _, sink = read(offers_file("<Описание>" + "a" * (MAX_RUN - 3 * BLOCK) + "</Описание>"))
    assert len(sink.offers) == 1
    _, sink = read(offers_file("<!-- c --><?pi x?>" * (MAX_MARKUP // 2)))
    assert len(sink.offers) == 1
    with pytest.raises(CmlError, match=f"more than {MAX_MARKUP} comments"):
        read(offers_file("<!-- c -->" * (MAX_MARKUP + 1)))


def test_nesting_deeper_than_the_cap_across_blocks_is_refused_even_when_closed() -> None:
    """Seen at a block's end: the open path is walked after each block (a deeper subtree that
    opens and closes within one block is dropped with it, never read)."""
    deep = ("<Группа>" + " " * 5000) * (MAX_DEPTH + 1) + " " * BLOCK + "</Группа>" * (MAX_DEPTH + 1)
    with pytest.raises(CmlError, match=f"nested deeper than {MAX_DEPTH}"):
        read(offers_file(deep))
    shallow = ("<Группа>" + " " * 5000) * (MAX_DEPTH - 3) + "</Группа>" * (MAX_DEPTH - 3)
    _, sink = read(offers_file(shallow))
    assert len(sink.offers) == 1


class Counts:
    def __init__(self) -> None:
        self.offers = self.types = self.articles = 0

    def price_type(self, price_type: object) -> None:
        self.types += 1

    def article(self, product_id: str, article: str) -> None:
        self.articles += 1

    def product_name(self, product_id: str, name: str) -> None:
        pass

    def offer(self, offer: object) -> None:
        self.offers += 1


class Pieces:
    """A stream that gives at most ``sizes[i]`` bytes per read, in turn."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.at, self.turn = data, sizes, 0, 0

    def read(self, size: int = -1, /) -> bytes:
        step = min(size, self.sizes[self.turn % len(self.sizes)])
        self.turn += 1
        piece = self.data[self.at : self.at + step]
        self.at += len(piece)
        return piece


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(package=packages, sizes=st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_where_the_blocks_end_changes_nothing_read(package: Package, sizes: list[int]) -> None:
    """Records cut at any byte are read whole: an unfinished offer keeps its fields (a price
    nested in a unit, a tax inside a price, product characteristics beside it) until it ends."""
    data = offers_xml(package)
    data = data.replace(
        "</Цена>".encode(),
        "<Налог><Наименование>НДС</Наименование></Налог>"
        "<Единица><Пересчет><Коэффициент>1</Коэффициент></Пересчет></Единица></Цена>".encode(),
    ).replace(
        "<Наименование>Товар</Наименование>".encode(),
        "<ХарактеристикиТовара><Ид>x</Ид><Цены>0</Цены></ХарактеристикиТовара>".encode(),
    )
    try:
        whole = read(data)
    except CmlError as exc:
        with pytest.raises(CmlError, match=re.escape(str(exc).split(" in <")[0])):
            parse(Pieces(data, sizes), Collect())
        return
    sink = Collect()
    header = parse(Pieces(data, sizes), sink)
    assert (whole[0], whole[1].offers, whole[1].types) == (header, sink.offers, sink.types)


def test_memory_is_flat_in_the_file_size(tmp_path: Path) -> None:
    """The tree keeps the open path and about one block, whatever the file holds: many offers
    or one element of many children that is not read. The small version of bench.cml_memory
    (100 MB files): 2.7 MB of 52,000 elements, and 40,000 children of one element, each
    peak about 0.4-0.5 MiB; the file kept whole, or either tree, is several times 2 MiB."""
    path = tmp_path / "offers.xml"
    write_big_offers(path, 2_000)
    wide = catalogue_xml(articles=[("P1", "A-1")]).replace(
        "<Товары>".encode(),
        ("<Свойства>" + "<Свойство/>" * 40_000 + "</Свойства><Товары>").encode(),
    )
    for data in (path.read_bytes(), wide):
        counts = Counts()
        tracemalloc.start()
        try:
            parse(io.BytesIO(data), counts)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 * 2**20, peak
        assert (counts.offers, counts.articles) in ((2_000, 0), (0, 1))


@pytest.mark.parametrize("namespace", [None, "urn:1C.ru:commerceml_2", "urn:1C.ru:commerceml_3"])
def test_a_prefixed_package_reads_as_an_unprefixed_one(namespace: str | None) -> None:
    """Tags are read by their local name, in a default namespace or under a prefix."""
    package = Package(
        offers=[CmlOffer("A#1", [CmlPrice("t1", "2.50", "руб", "1")], article="X")],
        types=[CmlType("t1", "Розничная")],
        namespace=namespace,
    )
    plain = offers_xml(package)
    prefixed = re.sub(rb"<(/?)([^!?/ >]+)", rb"<\1c:\2", plain).replace(b" xmlns=", b" xmlns:c=")
    if namespace is None:
        prefixed = prefixed.replace(
            "<c:КоммерческаяИнформация".encode(),
            '<c:КоммерческаяИнформация xmlns:c="urn:x"'.encode(),
        )
    assert b"<c:" in prefixed and b"<\xd0" not in prefixed
    header, sink = read(prefixed)
    expected_header, expected = read(plain)
    assert (expected_header, expected.offers, expected.types) == (header, sink.offers, sink.types)
    assert [o.id for o in sink.offers] == ["A#1"]  # type: ignore[attr-defined]


def many_prices(count: int, *, fields: int = 1, price: str = "1.00") -> str:
    """One offer's ``Цены`` of ``count`` prices, each with its type id given ``fields``
    times."""
    one = (
        "<Цена>"
        + "<ИдТипаЦены>t1</ИдТипаЦены>" * fields
        + f"<ЦенаЗаЕдиницу>{price}</ЦенаЗаЕдиницу><Валюта>RUB</Валюта></Цена>"
    )
    return "<Цены>" + one * count + "</Цены>"


def offers_of(*offers: tuple[str, str]) -> bytes:
    body = "".join(f"<Предложение><Ид>{sku}</Ид>{prices}</Предложение>" for sku, prices in offers)
    return (
        '<?xml version="1.0" encoding="UTF-8"?><КоммерческаяИнформация ВерсияСхемы="2.07">'
        "<ПакетПредложений><ТипыЦен><ТипЦены><Ид>t1</Ид><Наименование>Розничная</Наименование>"
        f"</ТипЦены></ТипыЦен><Предложения>{body}</Предложения></ПакетПредложений>"
        "</КоммерческаяИнформация>"
    ).encode()


@pytest.mark.parametrize("sizes", [[BLOCK], [97], [1, 4096, 13]])
def test_an_offer_with_more_than_64_prices_is_invalid_contract_and_the_others_are_read(
    sizes: list[int],
) -> None:
    """Issue 21, item 10: an offer may hold at most MAX_PRICES prices (in one ``Цены`` or
    several): one with more is counted invalid-contract and none of its prices sent; the
    file's other offers are read, whichever blocks the file arrives in."""
    data = offers_of(
        ("BIG", many_prices(MAX_PRICES + 1)),
        ("SPLIT", many_prices(MAX_PRICES // 2 + 1) * 2),
        ("FULL", many_prices(MAX_PRICES, price="3.00")),
        ("ONE", many_prices(1, price="2.00")),
    )
    rows: list[tuple[str, str]] = []
    mapper = Mapper(
        price_types={"Розничная": "retail"},
        sku_mode="id",
        known_types={},
        articles={},
        out=lambda aggregate, payload, _name: rows.append((aggregate, payload)),
    )
    parse(Pieces(data, sizes), mapper)
    assert mapper.counts.too_many_prices == 2 and mapper.counts.offers == 4
    assert f"2 offers with more than {MAX_PRICES} prices not sent" in mapper.counts.summary()
    assert sorted({a for a, _ in rows}) == ["FULL/retail", "ONE/retail"]
    assert len(rows) == MAX_PRICES + 1


def test_memory_stays_bounded_for_an_offer_crafted_with_many_prices_of_many_fields() -> None:
    """Issue 21, item 10: an offer of thousands of prices, each holding its fields many times
    (a few MB), once held every one of them until the offer ended (the 4,096 × 4,096 of
    issue 21). Now its prices are dropped as they are read: the peak stays small.
    bench/cml_memory.py measures a file of 100 MB the same way."""
    data = offers_of(("BIG", many_prices(4000, fields=12)), ("ONE", many_prices(1)))
    assert len(data) > 2_500_000
    counts = Counts()
    tracemalloc.start()
    try:
        parse(io.BytesIO(data), counts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts.offers == 2
    assert peak < 2 * 2**20, peak  # 8.4 MB before issue 21; 0.35 MB after
