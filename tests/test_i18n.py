"""Words for people (contract 15, "Words"; issue 34 item 7): gettext catalogs a translator
edits, every message the code uses translated into Russian, the compiled catalogs current, and
CLDR's plural rules, numbers and dates through Babel (exchange/i18n.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from babel.messages.catalog import Message
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from exchange import i18n
from exchange.i18n import (
    day,
    lang_of_environment,
    lang_of_request,
    moment,
    ngettext,
    number,
    percent,
    typed_time,
)
from exchange.words import messages_counted

REPO = Path(__file__).resolve().parents[1]
KEYWORDS = {
    "_": None,
    "N_": None,
    "NP_": ((1, "c"), 2),
    "ngettext": (1, 2),
    "pgettext": ((1, "c"), 2),
}


def used_messages() -> dict[str, tuple[str, ...]]:
    """Every message the code marks, as Babel's extractor finds it (``make catalogs`` runs the
    same extractor over the same files: babel.cfg)."""
    found: dict[str, tuple[str, ...]] = {}
    for filename, _line, message, _comments, context in extract_from_dir(
        str(REPO / "exchange"), method_map=[("**.py", "python")], keywords=KEYWORDS
    ):
        key = message if isinstance(message, str) else message[0]
        found.setdefault(f"{context}\x04{key}" if context else key, (filename,))
    return found


def catalog(lang: str) -> dict[str, object]:
    path = REPO / "exchange/locale" / lang / "LC_MESSAGES/exchange.po"
    with path.open("rb") as file:
        po = read_po(file, locale=lang)
    return {
        (f"{m.context}\x04" if m.context else "") + (m.id if isinstance(m.id, str) else m.id[0]): m
        for m in po
        if m.id and "fuzzy" not in m.flags
    }


def test_every_message_the_code_uses_has_a_russian_translation() -> None:
    ru = catalog("ru")
    untranslated = []
    for key, where in used_messages().items():
        entry = ru.get(key)
        strings = getattr(entry, "string", None)
        forms = (strings,) if isinstance(strings, str) else tuple(strings or ())
        if not forms or not all(forms):
            untranslated.append(f"{where[0]}: {key!r}")
    assert [] == untranslated, "run `make catalogs` and translate them in ru/LC_MESSAGES"


def test_the_extractor_finds_the_messages_of_the_code() -> None:
    """The check above is only as good as the extraction: it must see ``_``, ``ngettext``
    and ``N_`` wherever the code marks a message."""
    assert {"{count} message", "{count} later version"} <= set(used_messages())


# The message arguments of each marking function (0-based): what must be a literal string.
MARKERS = {"_": (0,), "N_": (0,), "NP_": (0, 1), "ngettext": (0, 1), "pgettext": (0, 1)}


def test_every_marked_message_is_a_literal_the_extractor_can_read() -> None:
    """Babel's extractor skips ``_(text, lang)`` when ``text`` is a variable: such a message
    would escape the check above and never reach the catalog. The code marks literals only
    (a table of labels marks each with ``N_`` and passes the variable to ``_``: allowed where
    the variable holds marked text, so ``_`` of a name is allowed, ``ngettext``/``pgettext``
    of one is not)."""
    hidden = []
    for path in sorted((REPO / "exchange").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            positions = MARKERS.get(node.func.id)
            if positions is None or node.func.id == "_":
                continue
            for index in positions:
                argument = node.args[index] if index < len(node.args) else None
                literal = isinstance(argument, ast.Constant) and isinstance(argument.value, str)
                if not literal:
                    hidden.append(f"{path.relative_to(REPO)}:{node.lineno} {node.func.id}")
    assert [] == hidden


def written(entries: Iterable[Message]) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The translated messages of a catalog (.po or .mo), plural or not, as tuples (Babel
    compiles an untranslated plural message as its own English: not a translation)."""
    found = {}
    for m in entries:
        ids = (m.id,) if isinstance(m.id, str) else tuple(m.id)
        strings = (m.string,) if isinstance(m.string, str) else tuple(m.string)
        if ids[0] and "fuzzy" not in m.flags and all(strings) and strings != ids:
            found[(m.context or "", *ids)] = strings
    return found


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_compiled_catalogs_are_those_of_their_po_files(lang: str) -> None:
    """The wheel carries the .mo files: one compiled before a .po changed says old words."""
    folder = REPO / "exchange/locale" / lang / "LC_MESSAGES"
    with (folder / "exchange.po").open("rb") as file:
        po = read_po(file, locale=lang)
    with (folder / "exchange.mo").open("rb") as file:
        mo = read_mo(file)
    expected, compiled = written(po), written(mo)
    assert expected or lang == "en", "the Russian catalog has no messages"
    assert expected == compiled, "run `make catalogs` (pybabel compile)"


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (0, "0 сообщений"),
        (1, "1 сообщение"),
        (2, "2 сообщения"),
        (4, "4 сообщения"),
        (5, "5 сообщений"),
        (11, "11 сообщений"),
        (12, "12 сообщений"),
        (14, "14 сообщений"),
        (21, "21 сообщение"),
        (22, "22 сообщения"),
        (101, "101 сообщение"),
        (111, "111 сообщений"),
        (1002, "1002 сообщения"),
    ],
)
def test_a_count_takes_the_russian_form_of_its_noun(count: int, said: str) -> None:
    assert said == messages_counted(count, "ru")


def test_english_counts_take_the_english_plural() -> None:
    assert ["1 message", "2 messages", "0 messages"] == [
        messages_counted(n, "en") for n in (1, 2, 0)
    ]


def test_a_count_with_a_fraction_takes_the_genitive_singular() -> None:
    """«1,5 запроса/с», never «1,5 запросов/с»."""
    forms = ("{count} message", "{count} messages")
    assert "{count} сообщения" == ngettext(*forms, Decimal("1.5"), "ru")
    assert "{count} messages" == ngettext(*forms, 1.5, "en")


def test_numbers_percentages_and_dates_as_russian_writes_them() -> None:
    nbsp = "\u00a0"
    assert f"4,3{nbsp}%" == percent(0.043, "ru")
    assert "4.3%" == percent(0.043, "en")
    assert f"50{nbsp}%" == percent(0.5, "ru")
    assert "1,5" == number(1.5, "ru")
    assert "1" == number(1.0, "ru")
    assert f"1{nbsp}234,6" == number(1234.56, "ru")
    assert "05.12.2026" == day(date(2026, 12, 5), "ru")
    assert "2026-12-05" == day(date(2026, 12, 5), "en")
    moscow = timezone(timedelta(hours=3))
    assert "05.12.2026 13:00:00" == moment(datetime(2026, 12, 5, 10, tzinfo=UTC), "ru", moscow)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_value_that_is_not_a_number_is_a_dash_never_an_error(value: float) -> None:
    assert ("—", "—") == (number(value, "ru"), percent(value, "ru"))


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("05.12.2026", datetime(2026, 12, 5)),
        ("5.12.2026", datetime(2026, 12, 5)),
        (" 05.12.2026 08:30 ", datetime(2026, 12, 5, 8, 30)),
        ("05.12.2026 08:30:15", datetime(2026, 12, 5, 8, 30, 15)),
        ("2026-12-05", datetime(2026, 12, 5)),
        (
            "2026-12-05T08:00:00+03:00",
            datetime(2026, 12, 5, 8, tzinfo=timezone(timedelta(hours=3))),
        ),
    ],
)
def test_a_date_field_takes_the_russian_and_the_iso_date(typed: str, read: datetime) -> None:
    assert read == typed_time(typed)


@pytest.mark.parametrize("typed", ["31.02.2026", "05/12/2026", "12.2026", "завтра", ""])
def test_a_date_that_is_not_one_is_a_value_error(typed: str) -> None:
    with pytest.raises(ValueError):
        typed_time(typed)


@pytest.mark.parametrize(
    ("environ", "lang"),
    [
        ({}, "en"),
        ({"LANG": "ru_RU.UTF-8"}, "ru"),
        ({"LANG": "ru_RU.UTF-8", "LC_ALL": "C.UTF-8"}, "en"),
        ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "ru_RU.UTF-8"}, "ru"),
        ({"LC_ALL": "ru_RU.UTF-8"}, "ru"),
        ({"LANG": "ru_RU.UTF-8", "EXCHANGE_LANG": "en"}, "en"),
        ({"EXCHANGE_LANG": "ru"}, "ru"),
    ],
)
def test_the_cli_speaks_russian_under_a_russian_locale_or_exchange_lang(
    environ: dict[str, str], lang: str
) -> None:
    assert lang == lang_of_environment(environ)


@pytest.mark.parametrize(
    ("header", "lang"),
    [
        (None, "ru"),
        ("", "ru"),
        ("de-DE", "ru"),
        ("en-US,en;q=0.9", "en"),
        ("ru-RU,ru;q=0.9,en;q=0.8", "ru"),
        ("en;q=0.5, ru;q=0.8", "ru"),
        ("ru;q=0, en", "en"),
    ],
)
def test_a_request_gets_the_language_it_asks_for_russian_by_default(
    header: str | None, lang: str
) -> None:
    assert lang == lang_of_request(header)


def test_the_catalogs_live_inside_the_package() -> None:
    assert (i18n.CATALOGS / "ru/LC_MESSAGES/exchange.mo").is_file()
