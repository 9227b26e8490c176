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
        "ru": "Артикул, агрегат, документ 1С или начало message_id",
        "en": "SKU, aggregate, 1C document or message_id prefix",
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
    "cancel": {"ru": "Отменить", "en": "Cancel"},
    "retry_all": {"ru": "Повторить все отобранные", "en": "Retry all filtered"},
    "cancel_all": {"ru": "Отменить все отобранные", "en": "Cancel all filtered"},
    "preview": {"ru": "Что произойдёт", "en": "What will happen"},
    "will_retry": {"ru": "Будут отправлены снова", "en": "Will be sent again"},
    "will_cancel": {"ru": "Будут отменены", "en": "Will be cancelled"},
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
        "ru": "После отмены уйдут на сайт без отменённых: более поздние версии",
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
    """An error of the service in the page's language."""
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
    return text


def messages_counted(count: int, lang: Lang) -> str:
    """«2 сообщения», "2 messages"."""
    if lang == "ru":
        return counted(count, "сообщение", "сообщения", "сообщений")
    return f"{count} message" + ("" if count == 1 else "s")
