"""The workbench's words: Russian first, English on request (``?lang=en``, kept in a cookie).

Every label a page shows comes from here; a key missing from one language is a test failure
(``tests/web/test_workbench.py``), never an English word on a Russian page.
"""

from __future__ import annotations

import re
from typing import Literal

from exchange.domain.plural import counted

Lang = Literal["ru", "en"]

WORDS: dict[str, dict[Lang, str]] = {
    "title": {"ru": "Обмен с сайтом", "en": "Site exchange"},
    "dashboard": {"ru": "Сводка", "en": "Dashboard"},
    "quarantine": {"ru": "Карантин", "en": "Quarantine"},
    "find": {"ru": "Поиск", "en": "Find"},
    "blocked": {"ru": "Заблокированные", "en": "Blocked"},
    "exchanges": {"ru": "Обмены 1С", "en": "1C exchanges"},
    "export": {"ru": "Выгрузка", "en": "Export"},
    "sign_in": {"ru": "Войти", "en": "Sign in"},
    "sign_out": {"ru": "Выйти", "en": "Sign out"},
    "name": {"ru": "Имя", "en": "Name"},
    "password": {"ru": "Пароль", "en": "Password"},
    "bad_login": {"ru": "Неверное имя или пароль", "en": "Wrong name or password"},
    "login_wait": {
        "ru": "Слишком много попыток входа: повторите через {seconds} с",
        "en": "Too many sign-in attempts: try again in {seconds} s",
    },
    "signed_in_as": {"ru": "Вы вошли как", "en": "Signed in as"},
    "role_viewer": {"ru": "наблюдатель", "en": "viewer"},
    "role_operator": {"ru": "оператор", "en": "operator"},
    "figures": {"ru": "Показатели", "en": "Figures"},
    "new_messages": {"ru": "Новые сообщения", "en": "New messages"},
    "held": {"ru": "Ждут за карантином", "en": "Held behind the quarantine"},
    "oldest": {"ru": "Старейшее недоставленное", "en": "Oldest undelivered"},
    "error_share": {"ru": "Доля ошибок (15 мин)", "en": "Error share (15 min)"},
    "rate": {"ru": "Доставка в минуту (15 мин)", "en": "Delivered per minute (15 min)"},
    "last_day": {
        "ru": "Последние 24 часа: доставлено (зелёный) и неудачные попытки (красный) по часам",
        "en": "The last 24 hours: delivered (green) and failed attempts (red) per hour",
    },
    "by_state": {"ru": "Сообщения по состояниям", "en": "Messages by state"},
    "state": {"ru": "Состояние", "en": "State"},
    "count": {"ru": "Количество", "en": "Count"},
    "workers": {"ru": "Обработчики", "en": "Workers"},
    "nothing_delivered": {
        "ru": "Ничего не доставляется: работа ждёт, а ни один обработчик не работает "
        "(запущен ли exchange run?)",
        "en": "Nothing is being delivered: work waits and no worker is live "
        "(is exchange run running?)",
    },
    "no_live_worker_idle": {
        "ru": "Ни один обработчик сейчас не работает; работы, ждущей доставки, нет.",
        "en": "No worker is live now; no work waits for delivery.",
    },
    "token_refused": {
        "ru": "Доставка остановлена: сайт не принял токен",
        "en": "Delivery paused: the site refused the token",
    },
    "needs_person": {"ru": "Требует внимания", "en": "Needs a person"},
    "nothing_needs": {"ru": "Ничего не требует внимания.", "en": "Nothing needs a person."},
    "untaken": {"ru": "Получено из 1С, ещё не взято", "en": "Received from 1C, not taken yet"},
    "untaken_oldest": {"ru": "старейшее ждёт {age}", "en": "the oldest has waited {age}"},
    "onec_failed_24h": {
        "ru": "Обменов 1С с ошибкой за 24 ч",
        "en": "1C exchanges failed in 24 h",
    },
    "onec_refused": {
        "ru": "отказано во входе с {since}: {count}",
        "en": "sign-ins refused since {since}: {count}",
    },
    "silent_since": {
        "ru": "молчит с {when}: не доставляет",
        "en": "silent since {when}: delivers nothing",
    },
    "paused_by_row": {
        "ru": "остановлена оператором {operator}",
        "en": "paused by operator {operator}",
    },
    "breaker_closed": {"ru": "замкнут (норма)", "en": "closed"},
    "breaker_open": {"ru": "разомкнут", "en": "open"},
    "breaker_half-open": {"ru": "пробный запрос", "en": "half-open"},
    "last_told": {"ru": "Последнее уведомление операторам", "en": "Operators last notified"},
    "no_workers": {
        "ru": "Ни один обработчик не отчитывался за час",
        "en": "No worker reported in the last hour",
    },
    "worker": {"ru": "Обработчик", "en": "Worker"},
    "last_seen": {"ru": "Последний отчёт", "en": "Last seen"},
    "breaker": {"ru": "Предохранитель", "en": "Breaker"},
    "delivery": {"ru": "Доставка", "en": "Delivery"},
    "running": {"ru": "идёт", "en": "running"},
    "site_pace": {
        "ru": "Темп сайта и предел запросов",
        "en": "Site's pace and limit",
    },
    "paused": {"ru": "остановлена", "en": "paused"},
    "paused_by": {"ru": "Доставка остановлена оператором", "en": "Delivery paused by operator"},
    "delivery_runs": {"ru": "Доставка идёт", "en": "Delivery runs"},
    "pause": {"ru": "Остановить доставку", "en": "Pause delivery"},
    "resume": {"ru": "Возобновить доставку", "en": "Resume delivery"},
    "pause_hint": {
        "ru": "Все обработчики прекратят отправку в течение одного цикла.",
        "en": "Every worker stops sending within one cycle.",
    },
    "reason": {"ru": "Причина", "en": "Reason"},
    "kind": {"ru": "Вид", "en": "Kind"},
    "since": {"ru": "С (дата)", "en": "Since (date)"},
    "until": {"ru": "По (дата)", "en": "Until (date)"},
    "search": {"ru": "Искать", "en": "Search"},
    "search_hint": {
        "ru": "Артикул, агрегат, документ 1С, товар или начало message_id",
        "en": "SKU, aggregate, 1C document, product or message_id prefix",
    },
    "filter": {"ru": "Отобрать", "en": "Filter"},
    "any": {"ru": "любая", "en": "any"},
    "any_kind": {"ru": "любой", "en": "any"},
    "message_id": {"ru": "message_id", "en": "message_id"},
    "aggregate": {"ru": "Агрегат", "en": "Aggregate"},
    "version": {"ru": "Версия", "en": "Version"},
    "attempts": {"ru": "Попыток", "en": "Attempts"},
    "last_error": {"ru": "Последняя ошибка", "en": "Last error"},
    "source_ref": {"ru": "Документ 1С", "en": "1C document"},
    "quarantined_at": {"ru": "В карантине с", "en": "Quarantined at"},
    "empty_quarantine": {"ru": "Карантин пуст", "en": "The quarantine is empty"},
    "nothing_found": {"ru": "Ничего не найдено", "en": "Nothing found"},
    "retry": {"ru": "Повторить", "en": "Retry"},
    "cancel": {"ru": "Снять с отправки навсегда", "en": "Stop sending for good"},
    "retry_all": {"ru": "Повторить все отобранные", "en": "Retry all filtered"},
    "cancel_all": {"ru": "Отменить все отобранные", "en": "Cancel all filtered"},
    "preview": {"ru": "Что произойдёт", "en": "What will happen"},
    "will_retry": {"ru": "Будут отправлены снова", "en": "Will be sent again"},
    "will_cancel": {
        "ru": "Будут сняты с отправки навсегда",
        "en": "Will never be sent",
    },
    "skipped": {"ru": "Не будут затронуты", "en": "Will not be touched"},
    "preview_changed": {
        "ru": "Ничего не сделано: с момента просмотра под фильтр попали другие сообщения. "
        "Проверьте список ещё раз и подтвердите снова.",
        "en": "Nothing was done: since the preview, the filter selects other messages. "
        "Check the list again and confirm again.",
    },
    "preview_added": {"ru": "Добавились после просмотра", "en": "Added since the preview"},
    "preview_gone": {"ru": "Больше не под фильтром", "en": "No longer selected"},
    "released": {
        "ru": "После снятия уйдут на сайт без снятых: более поздние версии",
        "en": "After the cancel these later versions go out without the cancelled ones",
    },
    "released_row": {
        "ru": "версий: {count}, начиная с {first}",
        "en": "{count} version(s) from {first}",
    },
    "superseded_note": {
        "ru": "уже доставлена версия не старее: закончится как устаревшее, не будет отправлено",
        "en": "a version at least as new was delivered: it ends stale, not sent",
    },
    "note": {"ru": "Примечание (обязательно)", "en": "Note (required)"},
    "note_required": {
        "ru": "Нужно примечание: зачем это делается",
        "en": "A note is required: say why",
    },
    "confirm": {"ru": "Подтвердить", "en": "Confirm"},
    "done": {"ru": "Готово", "en": "Done"},
    "touched": {"ru": "затронуто: {count}", "en": "touched: {count}"},
    "no_message": {"ru": "Нет сообщения с message_id", "en": "No message with message_id"},
    "biography": {"ru": "История сообщения", "en": "Message biography"},
    "at": {"ru": "Время", "en": "At"},
    "event": {"ru": "Событие", "en": "Event"},
    "from_to": {"ru": "Переход", "en": "Transition"},
    "detail": {"ru": "Подробности", "en": "Detail"},
    "operator": {"ru": "Оператор", "en": "Operator"},
    "attempt_lease": {"ru": "Попытка, аренда с", "en": "Attempt, leased at"},
    "next_step": {"ru": "Что сделать", "en": "What to do next"},
    "payload": {"ru": "Данные", "en": "Payload"},
    "cause": {"ru": "Причина блокировки", "en": "Cause"},
    "blocked_by_quarantine": {
        "ru": "следующая версия в карантине: повторите или отмените её",
        "en": "the next version is quarantined: retry or cancel it",
    },
    "blocked_by_gap": {
        "ru": "ждёт версию {version}: она пропущена и ещё может прийти",
        "en": "waits for version {version}: a gap",
    },
    "delivered_through": {"ru": "Доставлено по версию", "en": "Delivered through"},
    "none": {"ru": "нет", "en": "none"},
    "file": {"ru": "Файл", "en": "File"},
    "outcome": {"ru": "Итог", "en": "Outcome"},
    "intents": {"ru": "Цен", "en": "Prices"},
    "not_sent": {"ru": "Не отправлено", "en": "Not sent"},
    "started": {"ru": "Начат", "en": "Started"},
    "broker_refused": {
        "ru": "Неверные сообщения из брокеров",
        "en": "Bad messages from the brokers",
    },
    "broker_refused_about": {
        "ru": "Сообщения из RabbitMQ и Redis, которые не удалось принять как цены: они в "
        "карантине, брокеру подтверждены и сами больше не придут. Исправьте отправку в 1С.",
        "en": "Messages from RabbitMQ and Redis that could not be taken as prices: they are "
        "quarantined, acknowledged to the broker and will not come again. Fix what 1C sends.",
    },
    "prioritize": {"ru": "Отправить первым", "en": "Put first"},
    "prioritize_about": {
        "ru": "Сообщение уйдёт раньше всей очереди: меняется только его место в очереди, "
        "темп сайта, пауза, предохранитель и порядок проводок соблюдаются.",
        "en": "This message goes before the whole backlog: only its place in the queue "
        "changes; the site's pace, a pause, the breaker and the order of postings still hold.",
    },
    "received_at": {"ru": "Получено", "en": "Received"},
    "source": {"ru": "Источник", "en": "Source"},
    "message": {"ru": "Сообщение", "en": "Message"},
    "format": {"ru": "Формат", "en": "Format"},
    "download": {"ru": "Скачать", "en": "Download"},
    "forbidden": {"ru": "Недостаточно прав", "en": "Not allowed"},
    "viewer_note": {
        "ru": "Роль «наблюдатель»: действия недоступны.",
        "en": "Role viewer: actions are not available.",
    },
    "times_in": {"ru": "Время указано в поясе {zone}", "en": "Times are in {zone}"},
    "bad_filter": {"ru": "Неизвестное значение фильтра", "en": "Unknown filter value"},
    "bad_date": {
        "ru": "Дата не распознана (пример: 2026-11-30)",
        "en": "Not a date (e.g. 2026-11-30)",
    },
    # -- search, the quarantine's list, cancel (issue 24, items 5-7) ------------------------
    "price": {"ru": "Цена", "en": "Price"},
    "received": {"ru": "Получено", "en": "Received"},
    "product": {"ru": "Товар", "en": "Product"},
    "found_count": {"ru": "Найдено: {count}", "en": "Found: {count}"},
    "found_shown": {
        "ru": "показаны первые {shown}, самые новые; уточните запрос",
        "en": "the newest {shown} are shown; narrow the search",
    },
    "find_hint": {
        "ru": "Начало артикула, агрегата, message_id, любого слова документа 1С "
        "(например offers.xml) или названия товара",
        "en": "The beginning of a SKU, an aggregate, a message_id, or of any word of a 1C "
        "document (e.g. offers.xml) or a product name",
    },
    "prices_from_file": {
        "ru": "цены из этого файла: {count}",
        "en": "prices from this file: {count}",
    },
    "in_quarantine_since": {"ru": "В карантине с / ждёт", "en": "In quarantine since / waiting"},
    "select_page": {"ru": "вся страница", "en": "whole page"},
    "act_on": {"ru": "Действие над", "en": "Act on"},
    "act_on_checked": {
        "ru": "отмеченными строками (или всей страницей — флажок в заголовке таблицы)",
        "en": "the rows checked (or the whole page: the box in the table's header)",
    },
    "act_on_all": {
        "ru": "всеми подходящими под отбор: {count}",
        "en": "all {count} matching the filters",
    },
    "nothing_selected": {
        "ru": "Ничего не выбрано: отметьте сообщения в списке, всю страницу (флажок в заголовке) "
        "или «все подходящие под отбор», затем нажмите кнопку снова.",
        "en": "Nothing is selected: check messages in the list, the whole page (the box in the "
        "header) or all matching the filters, then press the button again.",
    },
    "per_page": {"ru": "На странице", "en": "Per page"},
    "page_of": {"ru": "Страница {page} из {pages}", "en": "Page {page} of {pages}"},
    "page_prev": {"ru": "Предыдущая", "en": "Previous"},
    "page_next": {"ru": "Следующая", "en": "Next"},
    "page_first": {"ru": "к первой странице", "en": "to the first page"},
    "back": {"ru": "Назад", "en": "Back"},
    "cancel_never_sent_one": {
        "ru": "Эта версия никогда не будет отправлена на сайт. Сообщение останется в истории.",
        "en": "This version will never be sent to the site. The message stays in the history.",
    },
    "cancel_never_sent_many": {
        "ru": "Эти версии никогда не будут отправлены на сайт. Сообщения останутся в истории.",
        "en": "These versions will never be sent to the site. The messages stay in the history.",
    },
    "cancel_behind": {
        "ru": "За ними в очереди: {count}. После снятия они уйдут на сайт без снятых.",
        "en": "Waiting behind them: {count}. After this they go to the site without "
        "the ones stopped.",
    },
    "cancel_nothing_behind": {
        "ru": "Более поздних версий, ждущих за ними, нет.",
        "en": "No later version waits behind them.",
    },
}


def word(key: str, lang: Lang) -> str:
    return WORDS[key][lang]


# The codes the service stores, as a page names them: states and events in words; a reason
# keeps its code beside its Russian name (the code is what `--reason` and the filter take).
NAMES: dict[str, dict[str, dict[Lang, str]]] = {
    "state": {
        "new": {"ru": "новое", "en": "new"},
        "in_progress": {"ru": "отправляется", "en": "in progress"},
        "delivered": {"ru": "доставлено", "en": "delivered"},
        "delayed": {"ru": "отложено (повтор)", "en": "delayed"},
        "quarantined": {"ru": "в карантине", "en": "quarantined"},
        "cancelled": {"ru": "отменено", "en": "cancelled"},
    },
    "event": {
        "taken": {"ru": "принято из 1С", "en": "taken"},
        "duplicate": {"ru": "повтор из 1С (не отправляется)", "en": "duplicate"},
        "rejected": {"ru": "не принято: ошибка в данных", "en": "rejected"},
        "superseded": {"ru": "вытеснено более новой версией", "en": "superseded"},
        "stale": {"ru": "устарело", "en": "stale"},
        "sequence-gap": {"ru": "пропущена предыдущая версия", "en": "sequence gap"},
        "leased": {"ru": "взято в отправку", "en": "leased"},
        "taken-over": {"ru": "перехвачено другим обработчиком", "en": "taken over"},
        "delivered": {"ru": "доставлено", "en": "delivered"},
        "stale-at-site": {"ru": "на сайте уже новее", "en": "stale at the site"},
        "retry-scheduled": {"ru": "назначен повтор", "en": "retry scheduled"},
        "quarantined": {"ru": "в карантин", "en": "quarantined"},
        "released": {"ru": "возвращено без отправки", "en": "released"},
        "lease-expired": {"ru": "аренда истекла", "en": "lease expired"},
        "operator-retry": {"ru": "повтор по решению оператора", "en": "operator retry"},
        "operator-cancel": {"ru": "отмена по решению оператора", "en": "operator cancel"},
        "not-for-this-shop": {
            "ru": "не для этого магазина: не отправляется",
            "en": "not for this shop",
        },
        "operator-prioritize": {
            "ru": "поставлено первым по решению оператора",
            "en": "put first by an operator",
        },
    },
    "source": {
        "rabbitmq": {"ru": "RabbitMQ", "en": "RabbitMQ"},
        "redis": {"ru": "Redis Streams", "en": "Redis Streams"},
    },
    "outcome": {
        "staged": {"ru": "цены приняты", "en": "staged"},
        "nothing-new": {"ru": "нового нет", "en": "nothing new"},
        "catalogue": {"ru": "каталог (цен нет)", "en": "catalogue"},
        "failure": {"ru": "ошибка", "en": "failure"},
        "interrupted": {"ru": "прервано", "en": "interrupted"},
        "working": {"ru": "идёт", "en": "working"},
    },
    "held_by": {
        "quarantine": {"ru": "карантином", "en": "the quarantine"},
        "gap": {"ru": "пропуском версии", "en": "a gap"},
    },
    "reason": {
        "invalid-contract": {"ru": "ошибка в данных", "en": "invalid data"},
        "unsupported-schema": {"ru": "неизвестная версия схемы", "en": "unsupported schema"},
        "unknown-kind": {"ru": "неизвестный вид", "en": "unknown kind"},
        "version-conflict": {"ru": "разные данные одной версии", "en": "version conflict"},
        "sequence-gap": {"ru": "пропущена версия", "en": "sequence gap"},
        "retry-limit": {"ru": "исчерпаны попытки", "en": "retry limit"},
        "unknown-response": {"ru": "непонятный ответ сайта", "en": "unknown response"},
        "superseded": {"ru": "вытеснено новой версией", "en": "superseded"},
        "stale": {"ru": "устарело", "en": "stale"},
        "stale-at-site": {"ru": "на сайте уже новее", "en": "stale at the site"},
        "operator": {"ru": "решение оператора", "en": "operator"},
        "unknown-sku": {"ru": "нет такого товара в магазине", "en": "unknown SKU"},
        "unmapped-price-type": {"ru": "вид цены не сопоставлен", "en": "unmapped price type"},
        "shop-failure": {"ru": "магазин отказал", "en": "shop failure"},
        "not-for-this-shop": {"ru": "не для этого магазина", "en": "not for this shop"},
    },
}


def name(group: str, code: str | None, lang: Lang) -> str:
    """A stored code as a page shows it: ``state`` and ``event`` in words, a ``reason`` as its
    name with the code beside it («сайт отклонил (http-422)»); an unknown code as it is."""
    if not code:
        return ""
    if group == "reason":
        if code.startswith("http-"):
            said = {"ru": "сайт отклонил", "en": "rejected by the site"}[lang]
        else:
            said = NAMES["reason"].get(code, {}).get(lang, "")
        return f"{said} ({code})" if said else code
    return NAMES[group].get(code, {}).get(lang, code)


# The service's own error texts (exchange/ops: shared with the command line, which speaks
# English) as a Russian page says them; a text that matches none is shown as it is.
_ERRORS_RU: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"a bulk (\w+) needs at least one filter.*"),
        "Ничего не выбрано: отметьте сообщения в списке или задайте отбор.",
    ),
    (
        re.compile(r"give message ids or filters to (\w+), not both"),
        "Укажите либо отмеченные сообщения, либо отбор, но не то и другое сразу.",
    ),
    (
        re.compile(
            r"a bulk (\w+) would touch (?P<count>\d+) messages, more than the limit of "
            r"(?P<limit>\d+).*"
        ),
        "Действие затронуло бы {count} — больше предела {limit} (EXCHANGE_BULK_LIMIT): "
        "сузьте отбор.",
    ),
    (re.compile(r"no such message: (?P<ids>.*)"), "Нет такого сообщения: {ids}"),
    (
        re.compile(r"only quarantined messages can be changed: (?P<ids>.*)"),
        "Изменять можно только сообщения в карантине: {ids}",
    ),
    (
        re.compile(r"(?P<id>\S+): a rejected staging row cannot be replayed.*"),
        "{id}: строку, не принятую из 1С, повторить нельзя: 1С должна записать исправленную "
        "строку (эту запись можно отменить).",
    ),
    (
        re.compile(r"a rejected staging row cannot be replayed.*"),
        "Строку, не принятую из 1С, повторить нельзя: 1С должна записать исправленную строку "
        "(эту запись можно отменить).",
    ),
    (  # exchange/ops/prioritize.py
        re.compile(
            r"(?P<id>\S+) is (?P<state>\S+): only a message waiting to be sent \(new or "
            r"delayed\) can be put first"
        ),
        "{id}: первым можно поставить только сообщение, которое ждёт отправки (новое или "
        "отложенное), а это — «{state}».",
    ),
)


def error_words(text: str, lang: Lang) -> str:
    """An error of the service, a detail of a message's history or the outcome of a 1C
    exchange, in the page's language."""
    if lang == "en":
        return text
    for pattern, russian in _ERRORS_RU:
        found = pattern.fullmatch(text)
        if found:
            values = found.groupdict()
            if "count" in values:
                values["count"] = messages_counted(int(values["count"]), lang)
            if "state" in values:
                values["state"] = name("state", values["state"], lang)
            return russian.format(**values)
    said = detail_words(text)
    return said if said != text else onec_words(text)  # a 1C exchange's outcome (its page)


# The details a message's history records (English, as `exchange history` prints them), as
# the message page says them in Russian. What a shop or a site answered (after "HTTP 422: "),
# ids, names, settings and times are kept as they are; a text that matches nothing is shown as
# it is. A detail that wraps another (``… (attempt 2 of 5)``) says the inner one in Russian too.
_DETAILS: tuple[tuple[str, str], ...] = (
    (r"from staging row #(?P<n>\d+)", "из строки staging_intents № {n}"),
    (
        r"staging row #(?P<n>\d+) carried this message again: recorded, not sent again",
        "строка staging_intents № {n} принесла это сообщение ещё раз: записано, повторно не "
        "отправляется",
    ),
    (r"superseded by (?P<id>\S+)", "вытеснено более новой версией {id}"),
    (
        r"version (?P<v>\d+) is at or below version (?P<d>\d+), already delivered: never sent",
        "версия {v} не новее уже доставленной версии {d}: не отправляется",
    ),
    (r"version (?P<v>\d+) never arrived within (?P<t>\S+) s", "версия {v} не пришла за {t} с"),
    (
        r"versions (?P<r>\S+) never arrived within (?P<t>\S+) s",
        "версии {r} не пришли за {t} с",
    ),
    (r"(?P<d>.+) \(attempt (?P<a>\d+) of (?P<m>\d+)\)", "{d*} (попытка {a} из {m})"),
    (r"result-unknown: (?P<d>.+)", "результат неизвестен: {d*}"),
    (r"site busy, not charged: (?P<d>.+)", "сайт перегружен, попытка не засчитана: {d*}"),
    (r"probe failed, not charged: (?P<d>.+)", "пробная отправка не удалась, не засчитана: {d*}"),
    (
        r"not sent: delivery paused \((?P<why>.+)\)",
        "не отправлено: доставка приостановлена ({why})",
    ),
    (r"confirmed by RabbitMQ", "RabbitMQ подтвердил приём"),
    (r"import: success(?P<t>.*)", "сайт принял пакет (success):{t}"),
    (
        r"read back after (?P<e>\w+): (?P<f>\w+)=(?P<v>\S+)",
        "ответ потерян ({e}), цена прочитана с сайта: {f}={v}",
    ),
    (
        r"(?P<d>.+); read back: the shop does not hold it, sent again",
        "{d}; прочитано с сайта: цены там нет, отправлено снова",
    ),
    (
        r"price type (?P<t>'[^']*') is mapped to null by (?P<s>\w+): left out of this shop on "
        r"purpose",
        "вид цены {t} сопоставлен с null в {s}: в этот магазин намеренно не отправляется",
    ),
    (r"price type (?P<t>'[^']*') is not mapped by (?P<s>\w+)", "вид цены {t} не сопоставлен в {s}"),
    (
        r"the shop has no product or variation with SKU (?P<s>.+)",
        "в магазине нет товара или вариации с артикулом {s}",
    ),
    (
        r"RabbitMQ returned the message as unroutable \((?P<c>[^)]*)\): no queue is bound to the "
        r"exchange (?P<x>\S+) for the routing key (?P<k>.+)",
        "RabbitMQ вернул сообщение как недоставляемое ({c}): к обменнику {x} не привязана "
        "очередь для ключа маршрутизации {k}",
    ),
    (r"retried by (?P<o>.+) \(was (?P<r>[^)]*)\)", "повтор: оператор {o} (причина была {r})"),
    (r"cancelled by (?P<o>.+) \(was (?P<r>[^)]*)\)", "отмена: оператор {o} (причина была {r})"),
    (r"put before the backlog by (?P<o>.+)", "отправить вне очереди: оператор {o}"),
    (
        r"the lease of (?P<w>\S+) had expired: result unknown; taken over by (?P<n>\S+) for "
        r"attempt (?P<a>\d+)",
        "аренда обработчика {w} истекла, результат неизвестен; перехвачено обработчиком {n}, "
        "попытка {a}",
    ),
    (
        r"the lease of (?P<w>\S+) expired during attempt (?P<a>\d+) of (?P<m>\d+); the result of "
        r"that attempt is unknown",
        "аренда обработчика {w} истекла во время попытки {a} из {m}; результат этой попытки "
        "неизвестен",
    ),
    (r"no outcome yet; leased until (?P<t>.+)", "итога ещё нет; взято в отправку до {t}"),
    (
        r"(?P<r>invalid-contract|unknown-kind|unsupported-schema|version-conflict): (?P<d>.+)",
        "не принято ({r}): {d}",
    ),
)
_DETAILS_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _DETAILS)


def detail_words(text: str) -> str:
    """A history detail in Russian (a ``{name*}`` in the Russian text is itself a detail, said
    in Russian in turn); one that matches nothing as it is."""
    for pattern, russian in _DETAILS_RE:
        found = pattern.fullmatch(text)
        if found:
            values = dict(found.groupdict())
            for key in list(values):
                if "{" + key + "*}" in russian:
                    russian = russian.replace("{" + key + "*}", "{" + key + "}")
                    values[key] = detail_words(values[key])
            return russian.format(**values)
    return text


def messages_counted(count: int, lang: Lang) -> str:
    """«2 сообщения», "2 messages"."""
    if lang == "ru":
        return counted(count, "сообщение", "сообщения", "сообщений")
    return f"{count} message" + ("" if count == 1 else "s")


def versions_counted(count: int, lang: Lang) -> str:
    """Later versions waiting: «1 более поздняя версия», «3 более поздние версии», «5 более
    поздних версий»; "3 later versions"."""
    if lang == "ru":
        return counted(
            count, "более поздняя версия", "более поздние версии", "более поздних версий"
        )
    return f"{count} later version" + ("" if count == 1 else "s")


# -- what 1C shows its administrator (contract 9a) ---------------------------------------------
# The service's texts stay English where they are made and recorded (cml_exchanges, the log,
# `exchange status`); the answer to 1C says them in Russian, as 1C-Bitrix's own component does
# (catalog.import.1c: its lang/ru messages, e.g. «Ошибка авторизации. Неверное имя
# пользователя или пароль.»), in windows-1251 (exchange/web/onec.py). A whole text is tried
# first; else each part of a summary ("; " between parts). A name, a number, an element or a
# setting inside a text is kept as it is.
_F = r"(?P<f>.+?)"
_N = r"(?P<n>\d+)"
_ONEC_WHOLE: tuple[tuple[str, str], ...] = (
    (
        r"the 1C exchange is closed: EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD are not set on "
        r"the service",
        "Обмен с 1С закрыт: на сервисе не заданы EXCHANGE_1C_USER и EXCHANGE_1C_PASSWORD.",
    ),
    (r"unknown exchange type (?P<t>.*)", "Неизвестный тип обмена {t}."),
    (
        r"not authorized: wrong user or password, or no session \(checkauth\)",
        "Ошибка авторизации. Неверное имя пользователя или пароль, или сеанс не начат (checkauth).",
    ),
    (
        r"wrong user or password \(HTTP Basic\)",
        "Ошибка авторизации. Неверное имя пользователя или пароль.",
    ),
    (
        r"too many wrong passwords from this address: try again in (?P<s>\d+) s",
        "Слишком много неверных паролей с этого адреса: повторите через {s} с.",
    ),
    (r"unknown mode (?P<m>.*)", "Неизвестная команда {m}."),
    (r"nothing to deactivate: prices only", "Деактивировать нечего: сервис принимает только цены."),
    (_N + r" bytes of " + _F + r" received", "Файл {f}: принято байт: {n}."),
    (r"upload of " + _F + r" failed", "Загрузка файла {f} не удалась: пришлите его снова."),
    (
        r"upload of " + _F + r" was cut short: (?P<got>\d+) of (?P<want>\d+) bytes",
        "Загрузка файла {f} прервана: получено {got} байт из {want}.",
    ),
    (
        _F + r" is being imported: send it later",
        "Файл {f} ещё загружается в базу: пришлите его позже.",
    ),
    (
        r"a part of " + _F + r" is larger than file_limit=(?P<n>\d+) bytes \(init announced it\)",
        "Часть файла {f} больше file_limit={n} байт, объявленного при init.",
    ),
    (r"file " + _F + r" is larger than (?P<n>\d+) bytes", "Файл {f} больше {n} байт."),
    (
        r"reading " + _F + r": " + _N + r" offers so far",
        "Идёт чтение {f}: прочитано предложений: {n}.",
    ),
    (
        r"the service's database is unavailable: (?P<e>.*)",
        "База данных сервиса недоступна, повторите обмен позже ({e}).",
    ),
    (r"internal error: (?P<e>.*)", "Внутренняя ошибка сервиса ({e}): сообщите администратору."),
    (r"archive unpacked", "Архив распакован."),
    (r"not an XML file: accepted and dropped", "Не файл XML: принят и пропущен."),
    (
        r"file " + _F + r" was not uploaded in this exchange",
        "Файл {f} не загружался в этом обмене.",
    ),
    (r"exchange complete", "Обмен завершён."),
    (r"orders are not imported by this service", "Заказы этот сервис не принимает."),
    (r"no orders here", "Заказов нет."),
    (
        r"this file was staged before \(package version (?P<v>\d+)\): nothing new",
        "Этот файл уже был принят (пакет № {v}): нового нет.",
    ),
    (
        r"not a CommerceML offers or catalogue file: nothing to read",
        "Это не файл предложений или каталога CommerceML: читать нечего.",
    ),
    (
        r"catalogue read: (?P<t>\d+) price types, (?P<a>\d+) articles kept",
        "Каталог прочитан: видов цен: {t}, артикулов запомнено: {a}.",
    ),
    (
        r"no price of a mapped type: the file has (?P<found>.*); map them in "
        r"EXCHANGE_1C_PRICE_TYPES",
        "В файле нет цен сопоставленных видов. Виды цен в файле: {found}; укажите нужные в "
        "EXCHANGE_1C_PRICE_TYPES.",
    ),
    (
        r"not well-formed XML at line (?P<l>\d+), column (?P<c>\d+): (?P<e>.*)",
        "Файл не является правильным XML: строка {l}, позиция {c} ({e}).",
    ),
    (
        r"not a CommerceML file: the root element is <(?P<r>[^>]*)>, not <(?P<root>[^>]*)>",
        "Это не файл CommerceML: корневой элемент <{r}>, а не <{root}>.",
    ),
    (r"the file is empty", "Файл пуст."),
    (r"the file has no root element", "В файле нет корневого элемента."),
    (
        r"no root element in the first " + _N + r" bytes of the file",
        "В первых {n} байтах файла нет корневого элемента.",
    ),
    (
        r"a document type declaration \(DTD\) is not allowed in a CommerceML file",
        "Объявление типа документа (DTD) в файле CommerceML не допускается.",
    ),
    (
        r"entity declarations are not allowed in a CommerceML file",
        "Объявления сущностей в файле CommerceML не допускаются.",
    ),
    (
        r"external entities are not allowed in a CommerceML file",
        "Внешние сущности в файле CommerceML не допускаются.",
    ),
    (r"elements nested deeper than " + _N, "Элементы вложены глубже {n} уровней."),
    (r"the file is nested too deeply", "Элементы файла вложены слишком глубоко."),
    (r"file name " + _F + r" is not allowed", "Имя файла {f} не допускается."),
    (
        r"file name " + _F + r" holds a control character: not allowed",
        "Имя файла {f} содержит управляющий символ: не допускается.",
    ),
    (
        r"file name " + _F + r" is an absolute path: not allowed",
        "Имя файла {f} — абсолютный путь: не допускается.",
    ),
    (r"file name " + _F + r" names no file", "Имя файла {f} не называет файл."),
    (
        r"file name " + _F + r" leaves the exchange's folder: not allowed",
        "Имя файла {f} ведёт за пределы папки обмена: не допускается.",
    ),
    (
        r"file name "
        + _F
        + r" is too long: a folder or file name may hold at most "
        + _N
        + r" bytes",
        "Имя файла {f} слишком длинное: имя папки или файла — не больше {n} байт.",
    ),
    (r"file name " + _F + r" is reserved", "Имя файла {f} занято сервисом."),
    (r"file name " + _F + r" is not allowed: (?P<e>.*)", "Имя файла {f} не допускается ({e})."),
    (
        r"archive member " + _F + r" is a link: not allowed",
        "Файл архива {f} — ссылка: не допускается.",
    ),
    (
        _F + r" holds more than " + _N + r" XML files: not unpacked",
        "В архиве {f} больше {n} файлов XML: не распакован.",
    ),
    (
        r"archive member " + _F + r" expands more than (?P<r>\S+) times",
        "Файл архива {f} распаковывается больше чем в {r} раз.",
    ),
    (
        r"the archive unpacks to more than " + _N + r" bytes",
        "Архив распаковывается больше чем в {n} байт.",
    ),
    (_F + r" is not a zip archive: (?P<e>.*)", "{f} — не архив zip ({e})."),
    (
        _F + r" holds more than " + _N + r" files: not unpacked",
        "В архиве {f} больше {n} файлов: не распакован.",
    ),
    (
        _F + r"'s list of files is larger than " + _N + r" bytes: not unpacked",
        "Оглавление архива {f} больше {n} байт: не распакован.",
    ),
)
_ONEC_PARTS: tuple[tuple[str, str], ...] = (
    (
        _N + r" prices staged from (?P<m>\d+) offers",
        "Принято цен: {n} (предложений: {m})",
    ),
    (
        _N + r" of unmapped price types not sent \((?P<names>.*)\)",
        "не отправлено цен несопоставленных видов: {n} ({names})",
    ),
    (
        _N + r" not sent: not of the base unit \((?P<why>.*)\)",
        "не отправлено цен не за базовую единицу: {n} ({why})",
    ),
    (
        _N + r" offers without an article \(quarantined\)",
        "предложений без артикула: {n} (в карантине)",
    ),
    (
        _N + r" offers with more than (?P<m>\d+) prices not sent \(invalid-contract\)",
        "не отправлено предложений, у которых больше {m} цен: {n} (invalid-contract)",
    ),
)
_ONEC_WHOLE_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _ONEC_WHOLE)
_ONEC_PARTS_RE = tuple((re.compile(p, re.DOTALL), ru) for p, ru in _ONEC_PARTS)


def onec_words(text: str) -> str:
    """A text of the service as 1C's administrator reads it, in Russian (contract 9a); a text
    no pattern knows is kept as it is (a failure is still told, never hidden)."""
    for pattern, russian in _ONEC_WHOLE_RE:
        found = pattern.fullmatch(text)
        if found:
            return russian.format(**found.groupdict())
    parts = text.split("; ")
    said = []
    for part in parts:
        for pattern, russian in _ONEC_PARTS_RE:
            found = pattern.fullmatch(part)
            if found:
                said.append(russian.format(**found.groupdict()))
                break
        else:
            said.append(part)
    return "; ".join(said) + ("." if said != parts else "")


# The dashboard's freshness, backlog, pace card and chart, and the export page (issue 24
# items 8–12, issue 23 item 5).
WORDS.update(
    {
        "chart_delivered": {"ru": "доставлено", "en": "delivered"},
        "chart_failed": {"ru": "неудачные попытки", "en": "failed attempts"},
        "drawn_at": {"ru": "Сводка на {when}", "en": "As of {when}"},
        "refresh_every": {
            "ru": "обновляется сама каждые {seconds} с",
            "en": "redraws itself every {seconds} s",
        },
        "refresh_stop": {"ru": "Не обновлять", "en": "Stop redrawing"},
        "refresh_off": {"ru": "сама не обновляется", "en": "does not redraw itself"},
        "refresh_start": {
            "ru": "Обновлять каждые {seconds} с",
            "en": "Redraw every {seconds} s",
        },
        "backlog": {"ru": "Осталось доставить", "en": "Still to deliver"},
        "backlog_eta": {
            "ru": "около {eta} при нынешнем темпе",
            "en": "about {eta} at the current pace",
        },
        "backlog_none": {"ru": "очереди нет", "en": "nothing waits"},
        "backlog_no_pace": {
            "ru": "за последнюю минуту ничего не доставлено: срок не оценить",
            "en": "nothing delivered in the last minute: no estimate",
        },
        "pace_card": {"ru": "Темп сайта", "en": "Site's pace"},
        "pace_rate": {"ru": "{rate} запросов/с", "en": "{rate} requests/s"},
        "pace_limit": {
            "ru": "предел: {limit} из {max_limit} одновременных запросов, в работе {in_flight}",
            "en": "limit: {limit} of {max_limit} concurrent requests, {in_flight} in flight",
        },
        "pace_paced": {"ru": "снижен до {rate} запросов/с", "en": "paced at {rate} requests/s"},
        "pace_refused": {
            "ru": "отказов сайта за минуту: {refused}",
            "en": "refused by the site in the last minute: {refused}",
        },
        "pace_none": {
            "ru": "ни один работающий обработчик не сообщал",
            "en": "no live worker has reported it",
        },
        "export_title": {"ru": "Выгрузка карантина", "en": "Export the quarantine"},
        "export_says": {
            "ru": "Выгружаются сообщения в карантине — отчёт для операторов: каждая запись с "
            "причиной, попытками, последней ошибкой и тем, что сделать. Без отбора — весь "
            "карантин.",
            "en": "Exports the quarantined messages: the operators' report, each entry with its "
            "reason, attempts, last error and what to do next. Without a filter: the whole "
            "quarantine.",
        },
        "export_count": {
            "ru": "Сейчас в карантине: {count}",
            "en": "In quarantine now: {count}",
        },
        "superseded_only": {
            "ru": "только устаревшие (уже доставлена более новая версия)",
            "en": "only superseded (a newer version was delivered)",
        },
        "date_hint": {
            "ru": "дата или дата и время, например 2026-11-30 или 2026-11-30 08:00",
            "en": "a date or a date and time, e.g. 2026-11-30 or 2026-11-30 08:00",
        },
    }
)


# A POST the workbench cannot take (the fresh review: a stale tab answered in bare English).
WORDS.update(
    {
        "session_ended": {
            "ru": "Сессия закончилась (вы вышли или она истекла): войдите снова и повторите.",
            "en": "The session has ended (signed out or expired): sign in again and repeat.",
        },
        "form_stale": {
            "ru": "Эта форма устарела (вы вышли или вошли заново в другой вкладке): откройте "
            "страницу заново и повторите.",
            "en": "This form is stale (signed out or in again in another tab): open the page "
            "again and repeat.",
        },
    }
)
