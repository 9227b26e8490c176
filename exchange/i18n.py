"""Words for people in their language: gettext catalogs a translator edits, and CLDR's plural
rules, number and date formats through Babel (contract 15, "Words").

The messages are English in the code and Russian in ``exchange/locale/ru/LC_MESSAGES/
exchange.po``; ``make catalogs`` extracts them (``exchange.pot``), merges them into each
language's ``.po`` and compiles the ``.mo`` files the wheel carries (docs/translations.md).
``tests/test_i18n.py`` fails on a message the code uses without a Russian translation, and on a
``.mo`` older than its ``.po``.

In the code a message is marked so that the extractor finds it:

- ``_("Quarantine", lang)``: the message in ``lang``;
- ``ngettext("{count} message", "{count} messages", count, lang)``: the form for ``count``
  by the language's plural rule (Russian has three: «1 сообщение», «2 сообщения»,
  «5 сообщений»);
- ``pgettext("quarantine list column", "since", lang)``: a short message whose Russian
  depends on where it is said;
- ``N_("Quarantine")``: marked only, translated later with ``_(text, lang)`` (a table of
  labels defined at import time); ``NP_("any_kind", "any")`` the same with a context, both
  translated with ``say(marked, lang)``.

What stays English whatever the language (contract 15): ``--json``, log lines, codes (a reason
such as ``http-422``, the JSON intake's ``status``/``reason``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Literal, get_args

from babel.dates import format_date, format_datetime
from babel.numbers import format_decimal, format_percent
from babel.support import NullTranslations, Translations

Lang = Literal["ru", "en"]
LANGS: tuple[Lang, ...] = get_args(Lang)
DOMAIN = "exchange"
CATALOGS = Path(__file__).parent / "locale"


@cache
def translations(lang: Lang) -> NullTranslations:
    """The compiled catalog of ``lang`` (``exchange/locale/<lang>/LC_MESSAGES/exchange.mo``);
    English without one falls back to the messages themselves."""
    return Translations.load(str(CATALOGS), [lang], DOMAIN)


def _(message: str, lang: Lang) -> str:
    """``message`` (English, as written in the code) in ``lang``."""
    return translations(lang).gettext(message)


def pgettext(context: str, message: str, lang: Lang) -> str:
    """``message`` in ``lang`` where the same English says different things in different
    places (a column «since» of one table): ``context`` tells the translator which."""
    return str(translations(lang).pgettext(context, message))


def N_(message: str) -> str:
    """Marks ``message`` for the extractor; translate it where it is shown, ``_(text, lang)``."""
    return message


def NP_(context: str, message: str) -> tuple[str, str]:
    """Marks ``message`` said in ``context`` (where the same English needs different Russian:
    «любой» and «любая» for "any"); translate it where it is shown, ``say(marked, lang)``."""
    return (context, message)


def say(marked: str | tuple[str, str], lang: Lang) -> str:
    """A message marked at import time, with ``N_`` or ``NP_``, in ``lang``."""
    if isinstance(marked, tuple):
        context, message = marked
        return str(translations(lang).pgettext(context, message))
    return translations(lang).gettext(marked)


def ngettext(singular: str, plural: str, count: int | float | Decimal, lang: Lang) -> str:
    """The form of a message for ``count``, by ``lang``'s plural rule. A count with a fraction
    takes the form of 2 («1,5 запроса/с», "1.5 requests/s"), as both languages write it (the
    gettext rule reads whole numbers only)."""
    try:
        whole = int(count)
    except (ValueError, OverflowError, ArithmeticError):  # NaN, infinity: not a count
        whole = 2
    if whole != count:
        whole = 2
    return translations(lang).ngettext(singular, plural, whole)


def matching(text: str, patterns: Iterable[tuple[re.Pattern[str], str]], lang: Lang) -> str:
    """An English sentence the service built with values in it (a status cause, a check's
    name), in ``lang``: the first pattern that matches all of ``text`` gives its message
    (marked with ``N_``, its ``{name}``s the pattern's groups); a text none matches, as it is."""
    if lang == "en":
        return text
    for pattern, message in patterns:
        found = pattern.fullmatch(text)
        if found:
            return _(message, lang).format(**found.groupdict())
    return text


# -- numbers and dates, as each language writes them (CLDR) -----------------------------------


def number(value: int | float | Decimal, lang: Lang, digits: int = 1) -> str:
    """``1 234,5`` in Russian, ``1,234.5`` in English: at most ``digits`` after the point;
    «—» for a value that is not a number (NaN, infinity)."""
    if not Decimal(str(value)).is_finite():
        return "—"
    rounded = round(Decimal(str(value)), digits)
    shown = rounded.to_integral() if rounded == rounded.to_integral() else rounded.normalize()
    return format_decimal(shown, locale=lang, decimal_quantization=False)


def percent(share: float | Decimal, lang: Lang, digits: int = 1) -> str:
    """A share (0.043) as a percentage: ``4,3 %`` in Russian, ``4.3%`` in English; «—» for
    one that is not a number."""
    if not Decimal(str(share)).is_finite():
        return "—"
    rounded = round(Decimal(str(share)) * 100, digits) / 100
    return format_percent(rounded, locale=lang, decimal_quantization=False)


def day(value: date, lang: Lang) -> str:
    """A date: ``05.12.2026`` in Russian (CLDR's short date), ``2026-12-05`` in English."""
    return format_date(value, "short" if lang == "ru" else "yyyy-MM-dd", locale=lang)


def moment(value: datetime, lang: Lang, zone: tzinfo = UTC) -> str:
    """A time in ``zone`` (the display zone), to the second: ``05.12.2026 14:30:00`` in
    Russian, ``2026-12-05 14:30:00`` in English."""
    local = value.astimezone(zone)
    pattern = "dd.MM.yyyy HH:mm:ss" if lang == "ru" else "yyyy-MM-dd HH:mm:ss"
    return format_datetime(local, pattern, tzinfo=zone, locale=lang)


# -- dates people type (contract 15: ДД.ММ.ГГГГ and ISO) ---------------------------------------

_RUSSIAN_DATE = re.compile(
    r"\s*(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})"
    r"(?:[ T]+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?)?\s*"
)


def typed_time(text: str) -> datetime:
    """A date or a time as a person types it: ``05.12.2026``, ``05.12.2026 08:00`` or ISO
    (``2026-12-05``, ``2026-12-05T08:00:00+03:00``). Naive unless ISO names a zone.
    ``ValueError`` for anything else."""
    found = _RUSSIAN_DATE.fullmatch(text)
    if found is None:
        return datetime.fromisoformat(text.strip())
    parts = {key: int(value) for key, value in found.groupdict().items() if value is not None}
    return datetime(
        parts["y"], parts["m"], parts["d"], parts.get("H", 0), parts.get("M", 0), parts.get("S", 0)
    )


# -- which language a person reads ------------------------------------------------------------


def lang_of_environment(environ: Mapping[str, str] | None = None) -> Lang:
    """The CLI's language: ``EXCHANGE_LANG`` (``ru`` or ``en``), else the locale as POSIX
    reads it (the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set): Russian for a
    ``ru_*`` locale, English otherwise."""
    env = os.environ if environ is None else environ
    chosen = env.get("EXCHANGE_LANG", "").strip().lower()
    if chosen:
        return "ru" if chosen.startswith("ru") else "en"
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        if value:
            return "ru" if value.lower().startswith("ru") else "en"
    return "en"


def lang_of_request(accept_language: str | None, default: Lang = "ru") -> Lang:
    """The language an HTTP request asks for (``Accept-Language``, by its weights); ``default``
    when it names neither Russian nor English."""
    best: tuple[float, int, Lang] | None = None
    for position, item in enumerate((accept_language or "").split(",")):
        tag, _sep, params = item.strip().partition(";")
        weight = 1.0
        for param in params.split(";"):
            key, _eq, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        lang = _KNOWN.get(tag.strip().lower().split("-")[0])
        if lang is not None and weight > 0:
            candidate = (weight, -position, lang)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
    return best[2] if best is not None else default


_KNOWN: dict[str, Lang] = {lang: lang for lang in LANGS}
