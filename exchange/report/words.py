"""The words of the report in Russian and English, and the rows that CSV and XLSX share.

Operators next to 1C read Russian; English is there for the site team and for the logs of
whoever reads a report far from 1C. Reason codes (``http-422``) stay as they are in both
languages: they are what ``exchange quarantine list --reason`` takes.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from exchange.report.model import Entry, Lang, Report
from exchange.words import error_words

# (key, Russian, English). The order of COLUMNS is the order of the detail table.
_LABELS: dict[str, tuple[str, str]] = {
    "title": ("Карантин обмена: отчёт для операторов", "Exchange quarantine: operators' report"),
    "generated_at": ("Сформирован (UTC)", "Generated (UTC)"),
    "filters": ("Отбор", "Filters"),
    "no_filters": ("все записи карантина", "the whole quarantine"),
    # the filters, as the summary's «Отбор» names them (``describe_filters``)
    "filter_aggregate": ("Объект или артикул начинается с", "Aggregate or SKU begins with"),
    "filter_search": ("Поиск", "Search"),
    "filter_since": ("В карантине с (UTC)", "Quarantined from (UTC)"),
    "filter_until": ("В карантине до (UTC)", "Quarantined before (UTC)"),
    "filter_superseded": (
        "только устаревшие после карантина",
        "only those superseded after quarantine",
    ),
    "total": ("Записей в карантине", "Entries in quarantine"),
    "oldest_age": ("Самая старая запись ждёт", "The oldest entry has waited"),
    "oldest_at": (
        "Самая старая запись в карантине с (UTC)",
        "The oldest entry quarantined at (UTC)",
    ),
    "superseded_total": (
        "Устарели (доставлена более новая версия)",
        "Superseded after quarantine (a newer version was delivered)",
    ),
    "by_reason": ("Записи по причинам", "Entries by reason"),
    "count": ("Количество", "Count"),
    "activity": (
        "Доставки и сбои по дням (UTC, все виды)",
        "Deliveries and failures per day (UTC, all kinds)",
    ),
    "day": ("День (UTC)", "Day (UTC)"),
    "delivered": ("Доставлено", "Delivered"),
    "failed": ("Сбои", "Failures"),
    "entries": ("Записи карантина", "Quarantined messages"),
    "empty": ("Карантин пуст.", "The quarantine is empty."),
    "history": ("История", "History"),
    "payload_and_history": ("Данные и история", "Payload and history"),
    "summary_sheet": ("Сводка", "Summary"),
    "detail_sheet": ("Карантин", "Quarantine"),
    "history_sheet": ("История", "History"),
    "yes": ("да", "yes"),
    "no": ("нет", "no"),
    "truncated": ("обрезано, всего символов", "truncated, characters in all"),
    "superseded_badge": ("устарело", "superseded"),
    "numbers": ("Числа", "Numbers"),
    # detail columns
    "message_id": ("ID сообщения", "Message ID"),
    "kind": ("Вид", "Kind"),
    "aggregate": ("Объект", "Aggregate"),
    "version": ("Версия", "Version"),
    "reason": ("Причина", "Reason"),
    "superseded_after_quarantine": (
        "Устарело после карантина",
        "Superseded after quarantine",
    ),
    "attempts": ("Попыток", "Attempts"),
    "first_seen": ("Получено (UTC)", "First seen (UTC)"),
    "last_attempt": ("Последняя попытка (UTC)", "Last attempt (UTC)"),
    "quarantined_at": ("В карантине с (UTC)", "Quarantined at (UTC)"),
    "last_result": ("Последний HTTP-статус или ошибка", "Last HTTP status or error"),
    "next_check": ("Что сделать", "Next check"),
    "source_ref": ("Документ 1С", "1C document"),
    "payload": ("Данные (payload)", "Payload"),
    # history columns
    "at": ("Когда (UTC)", "When (UTC)"),
    "event": ("Событие", "Event"),
    "from": ("Из", "From"),
    "to": ("В", "To"),
    "worker": ("Обработчик", "Worker"),
    "attempt": ("Попытка", "Attempt"),
    "leased_at": ("Аренда с", "Leased at"),
    "lease_until": ("Аренда истекла", "Lease ran out"),
    "http_or_error": ("HTTP / ошибка", "HTTP / error"),
    "detail": ("Подробности", "Detail"),
    "operator": ("Оператор", "Operator"),
    "note": ("Примечание", "Note"),
}

COLUMNS: tuple[str, ...] = (
    "message_id",
    "kind",
    "aggregate",
    "version",
    "reason",
    "superseded_after_quarantine",
    "attempts",
    "first_seen",
    "last_attempt",
    "quarantined_at",
    "last_result",
    "next_check",
    "source_ref",
    "payload",
)
HISTORY_COLUMNS: tuple[str, ...] = (
    "message_id",
    "at",
    "event",
    "from",
    "to",
    "worker",
    "attempt",
    "leased_at",
    "lease_until",
    "http_or_error",
    "detail",
    "operator",
    "note",
)


# The labels that name the zone of their times: the report's zone (EXCHANGE_DISPLAY_TZ).
ZONED = frozenset(
    {
        "generated_at",
        "oldest_at",
        "first_seen",
        "last_attempt",
        "quarantined_at",
        "at",
        "filter_since",
        "filter_until",
    }
)


def label(key: str, lang: Lang, zone: str = "UTC") -> str:
    ru, en = _LABELS[key]
    text = ru if lang == "ru" else en
    return text.replace("(UTC)", f"({zone})") if key in ZONED else text


# -- the next check, in plain words ----------------------------------------------------------

# The steps a next check names, as a report says them (its reader has the command line: each
# entry carries its command, ``command``). A page says them with its own buttons instead
# (``next_check``'s ``steps``: the workbench's words), never a command.
STEP_NAMES = ("retry", "cancel", "restart", "history")
_REPORT_STEPS: dict[Lang, dict[str, str]] = {
    "ru": {
        "retry": "повторите отправку (retry)",
        "cancel": "отмените эту запись",
        "restart": "перезапустите run",
        "history": "историю сообщения (exchange history)",
    },
    "en": {
        "retry": "retry",
        "cancel": "cancel this record",
        "restart": "restart run",
        "history": "the message's history (exchange history)",
    },
}

_NEXT_CHECK: dict[str, tuple[str, str]] = {
    "unmapped-price-type": (
        "Магазин не знает этот вид цены: добавьте его в настройку магазина "
        "EXCHANGE_WOO_PRICE_FIELDS (WooCommerce) или EXCHANGE_BITRIX_PRICE_TYPES (1С-Битрикс), "
        "{restart} и {retry}. Чтобы не отправлять этот вид цены в этот магазин, сопоставьте его "
        "с null и {cancel}.",
        "The shop does not know this price type: add it to the shop's setting "
        "EXCHANGE_WOO_PRICE_FIELDS (WooCommerce) or EXCHANGE_BITRIX_PRICE_TYPES (1C-Bitrix), "
        "{restart} and {retry}. To leave this price type out of this shop, map it to null and "
        "{cancel}.",
    ),
    "invalid-contract": (
        "Исправьте документ в 1С и выгрузите его снова с новой версией; затем {cancel}.",
        "Fix the document in 1C and post it again with a new version; then {cancel}.",
    ),
    "unsupported-schema": (
        "Обновите сервис обмена (или настройки обмена в 1С), чтобы обе стороны использовали "
        "одну версию схемы данных; затем {cancel} и выгрузите документ заново.",
        "Update the service (or the 1C exchange settings) so that both use the same payload "
        "schema; then {cancel} and post the document again.",
    ),
    "unknown-kind": (
        "Добавьте этот вид в EXCHANGE_KINDS или запретите 1С его выгружать; затем {cancel}.",
        "Configure the kind in EXCHANGE_KINDS or stop 1C from writing it; then {cancel}.",
    ),
    "version-conflict": (
        "Под одной версией пришли разные данные: проверьте в 1С, какие верны, и выгрузите их "
        "с новой версией; затем {cancel}.",
        "Two different payloads carry one version: check in 1C which one is right and post it "
        "with a new version; then {cancel}.",
    ),
    "sequence-gap": (
        "Предыдущая версия так и не пришла: найдите её в журнале обмена 1С. Когда она будет "
        "записана, {retry}; чтобы пропустить её, {cancel}.",
        "A previous version never arrived: look for it in the 1C exchange log. When it has "
        "been written, {retry}; to skip it, {cancel}.",
    ),
    "retry-limit": (
        "Сайт раз за разом не принимал сообщение: разберите последнюю ошибку с командой сайта, "
        "затем {retry}.",
        "The site kept failing for this message: check the last error with the site team, then "
        "{retry}.",
    ),
    "unroutable": (
        "RabbitMQ вернул сообщение: к обменнику EXCHANGE_RABBITMQ_EXCHANGE не привязана очередь "
        "для этого вида (ключ маршрутизации = вид). Привяжите очередь магазина, затем {retry}.",
        "RabbitMQ returned the message: no queue is bound to EXCHANGE_RABBITMQ_EXCHANGE for "
        "this kind (the routing key is the kind). Bind the shop's queue, then {retry}.",
    ),
    "not-for-this-shop": (
        "Не отправлено намеренно: в настройке магазина (EXCHANGE_WOO_PRICE_FIELDS или "
        "EXCHANGE_BITRIX_PRICE_TYPES) этот вид цены сопоставлен с null. Делать ничего не нужно; "
        "чтобы отправлять его, сопоставьте вид цены с полем или видом цены магазина.",
        "Left out on purpose: the shop's mapping (EXCHANGE_WOO_PRICE_FIELDS or "
        "EXCHANGE_BITRIX_PRICE_TYPES) maps this price type to null. Nothing to do; to send it, "
        "map the price type to a field or price type of the shop.",
    ),
    "unknown-response": (
        "Сайт ответил непонятно: выясните у команды сайта, что произошло, затем {retry} или "
        "{cancel}.",
        "The site answered something the service does not understand: ask the site team what "
        "it did, then {retry} or {cancel}.",
    ),
    "unknown-sku": (
        "В магазине нет товара или вариации с этим артикулом: создайте товар в магазине или "
        "исправьте артикул в 1С и выгрузите цену снова. Когда товар появится, {retry}; если "
        "цена больше не нужна, {cancel}.",
        "The shop has no product or variation with this SKU: create it in the shop, or correct "
        "the SKU in 1C and post the price again. Once the product exists, {retry}; if the price "
        "is no longer needed, {cancel}.",
    ),
    "shop-failure": (
        "Магазин окончательно отказал в обмене: разберите последнюю ошибку с командой сайта, "
        "затем {retry} или {cancel}.",
        "The shop's exchange answered failure for good: check the last error with the site "
        "team, then {retry} or {cancel}.",
    ),
}
_REJECTED_BY_SITE = (
    "Сайт отклонил сообщение ({reason}): проверьте данные вместе с командой сайта, исправьте "
    "их в 1С, затем {cancel} или {retry}.",
    "The site rejected the message ({reason}): check the payload with the site team, correct "
    "it in 1C, then {cancel} or {retry}.",
)
_SUPERSEDED = (
    "После попадания в карантин на сайт уже доставлена более новая версия этого объекта: "
    "исправлять нечего, {cancel}.",
    "A newer version of this aggregate was delivered after this one was quarantined: nothing "
    "is left to fix, {cancel}.",
)
_UNKNOWN_REASON = (
    "Посмотрите {history} и примите решение.",
    "Look at {history} and decide.",
)


def next_check(
    reason: str | None,
    lang: Lang = "en",
    *,
    superseded: bool = False,
    steps: dict[str, str] | None = None,
) -> str:
    """What the operator has to check or do next, in plain words. ``steps`` says each of
    ``STEP_NAMES`` as a page does (its buttons); a report's own words by default."""
    if superseded:
        words = _SUPERSEDED
    elif reason and reason.startswith("http-"):
        words = _REJECTED_BY_SITE
    else:
        words = _NEXT_CHECK.get(reason or "", _UNKNOWN_REASON)
    said = steps if steps is not None else _REPORT_STEPS[lang]
    return (words[0] if lang == "ru" else words[1]).format(reason=reason, **said)


def cause(entry: Entry, lang: Lang) -> str | None:
    """The concrete cause of this entry in the report's language, or None."""
    text = entry.last_result
    if not text:
        return None
    if lang == "en":
        return text
    shown = error_words(text, "ru")  # the same Russian as the workbench's pages
    return shown if shown != text else f"(как записано) {text}"


def command(entry: Entry) -> str:
    """A ready-to-run command for this entry: retry what may go again, cancel the rest."""
    cancel = entry.rejected_row or entry.superseded_after_quarantine
    if cancel:
        return f'exchange quarantine cancel {entry.message_id} --note "…"'
    return f'exchange quarantine retry {entry.message_id} --note "…"'


def entry_next_check(entry: Entry, lang: Lang, steps: dict[str, str] | None = None) -> str:
    """What to do, the concrete cause in the report's language, and the command to run; with
    a page's ``steps`` (``Report.steps``: an export of the workbench) its buttons instead, and
    no command."""
    advice = next_check(
        entry.reason, lang, superseded=entry.superseded_after_quarantine, steps=steps
    )
    found = cause(entry, lang)
    parts = [advice]
    if found:
        parts.append(("Причина: " if lang == "ru" else "Cause: ") + found)
    if steps is None:
        parts.append(("Команда: " if lang == "ru" else "Command: ") + command(entry))
    return " ".join(parts)


def result_words(entry: Entry, lang: Lang) -> str | None:
    """The column «Последний HTTP-статус или ошибка» in the report's language: the HTTP status
    (and a code) as they are, the service's English cause as the workbench's pages say it
    (``error_words``); English (and JSON) keep the stored text."""
    text = entry.last_result
    if lang == "en" or not text or not entry.last_error:
        return text
    return text.replace(entry.last_error, error_words(entry.last_error, "ru"), 1)


# -- values as people read them --------------------------------------------------------------


def human_age(seconds: float | None, lang: Lang) -> str:
    """``3 d 4 h``, ``5 min``: the two largest units are enough to decide what comes first."""
    if seconds is None:
        return "—"
    units = (
        (86400, "дн", "d"),
        (3600, "ч", "h"),
        (60, "мин", "min"),
        (1, "с", "s"),
    )
    left, parts = int(max(seconds, 0)), list[str]()
    for size, ru, en in units:
        if left >= size or (size == 1 and not parts):
            parts.append(f"{left // size} {ru if lang == 'ru' else en}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def clock_time(value: datetime | None, zone: str = "UTC") -> str:
    """In ``zone`` (the report's, EXCHANGE_DISPLAY_TZ), to the second, without a zone suffix
    (the column label names the zone)."""
    return value.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S") if value else ""


def yes_no(value: bool, lang: Lang) -> str:
    return label("yes" if value else "no", lang)


def describe_filters(report: Report, lang: Lang) -> str:
    """The filters the report was made with, in the report's language and its time format
    (``clock_time`` in the report's zone, which the label names): «Вид: price; Объект или
    артикул начинается с: ART-0; В карантине с (Europe/Moscow): 2026-11-30 11:00:00»."""
    f = report.filters
    parts = [
        f"{label(key, lang, report.zone)}: {value}"
        for key, value in (
            ("kind", f.kind),
            ("filter_aggregate", f.aggregate),
            ("filter_search", f.search),
            ("reason", f.reason),
            ("filter_since", clock_time(f.since, report.zone) if f.since else None),
            ("filter_until", clock_time(f.until, report.zone) if f.until else None),
        )
        if value is not None
    ]
    if f.superseded_after_quarantine:
        parts.append(label("filter_superseded", lang))
    return "; ".join(parts) if parts else label("no_filters", lang)


# -- rows shared by the spreadsheet formats --------------------------------------------------

Cell = str | int | float | datetime | None


def detail_row(entry: Entry, lang: Lang, steps: dict[str, str] | None = None) -> list[Cell]:
    """One entry in ``COLUMNS`` order; times stay datetimes (XLSX writes real dates)."""
    values: dict[str, Cell] = {
        "message_id": entry.message_id,
        "kind": entry.kind,
        "aggregate": entry.aggregate,
        "version": entry.version,
        "reason": entry.reason,
        "superseded_after_quarantine": yes_no(entry.superseded_after_quarantine, lang),
        "attempts": entry.attempts,
        "first_seen": entry.first_seen,
        "last_attempt": entry.last_attempt,
        "quarantined_at": entry.quarantined_at,
        "last_result": result_words(entry, lang),
        "next_check": entry_next_check(entry, lang, steps),
        "source_ref": entry.source_ref,
        "payload": entry.payload,
    }
    return [values[column] for column in COLUMNS]


def history_rows(entry: Entry) -> list[list[Cell]]:
    return [
        [
            entry.message_id,
            e.at,
            e.event,
            e.from_state,
            e.to_state,
            e.worker,
            e.attempt,
            e.leased_at,
            e.lease_until,
            str(e.http_status) if e.http_status is not None else e.error_class,
            e.detail,
            e.operator,
            e.note,
        ]
        for e in entry.history
    ]


def summary_rows(report: Report, lang: Lang) -> list[tuple[str, Cell]]:
    """The summary as (label, value) pairs, in the order every format shows them."""
    s = report.summary
    return [
        (label("generated_at", lang, report.zone), report.generated_at),
        (label("filters", lang), describe_filters(report, lang)),
        (label("total", lang), s.total),
        (label("oldest_age", lang), human_age(s.oldest_age_s, lang)),
        (label("oldest_at", lang, report.zone), s.oldest_quarantined_at),
        (label("superseded_total", lang), s.superseded_after_quarantine),
    ]


# -- neutralising cells for spreadsheets ------------------------------------------------------

# A spreadsheet runs a cell that starts with one of these as a formula (or, for tab/CR/LF,
# strips the whitespace and then does). The full-width forms are there because some
# spreadsheets fold them to ASCII before they look.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "＝", "＋", "－", "＠")
SPREADSHEET_CELL_MAX = 32_767  # Excel's limit; a longer value would spill or be cut silently
_NUL = re.compile("\x00")


def looks_like_formula(text: str) -> bool:
    return text.startswith(FORMULA_START)


def fit_cell(text: str, lang: Lang, limit: int = SPREADSHEET_CELL_MAX) -> str:
    """Cut a value that a spreadsheet cell cannot hold, and say so in the cell."""
    if len(text) <= limit:
        return text
    suffix = f" … [{label('truncated', lang)}: {len(text)}]"
    return text[: limit - len(suffix)] + suffix


def without_nul(text: str) -> str:
    return _NUL.sub("", text)


# Where a cell may start in a CSV file: at the start of the text, or after any character a
# spreadsheet may split at. Excel splits a file it opens on the list separator of the Windows
# locale, whichever the file used (``,`` in English, ``;`` in Russian); a quoted cell holding
# a separator is quoted for one of them only, and once split at the other its line breaks end
# the row. Spaces and double quotes before the formula are skipped the way a reader may.
_CELL_START = re.compile(
    r"(?:^|(?<=[,;\t\r\n]))(?=[ \"]*[" + re.escape("".join(FORMULA_START)) + "])"
)


def neutralise(text: str) -> str:
    """A CSV text cell that no spreadsheet runs, however it splits the line: an apostrophe
    before formula-like text (OWASP's CSV injection advice) wherever a cell may start
    (``x,=2+3`` is ``x,'=2+3``; the rest of the text is left as it was)."""
    return _CELL_START.sub("'", without_nul(text))
