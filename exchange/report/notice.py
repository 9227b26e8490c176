"""The operators' notification (issue 16 item 6): its words, and the step that decides, takes the
right to send and sends.

It lives with the report because it is a very short report, in the report's language
(``EXCHANGE_REPORT_LANG``, Russian by default), with the report's advice per reason
(``words.next_check``) and ages (``words.human_age``); the pace in the pace's own words
(``ops.status.pace_words``).

``Notifier.step`` is blocking (database and SMTP or HTTP): the worker loop and ``exchange serve``
run it in a thread, as a job of its own, so that it never delays a cycle or a batch. A failing
way costs one log line per period and never an exception to the caller.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.domain.clock import Clock
from exchange.domain.notify import (
    SIGN_IN_STOPS,
    Decision,
    Stop,
    decide,
    no_channel_kind,
    paused_channel,
    unserved_channel,
)
from exchange.domain.pause import PauseCause
from exchange.domain.policy import KindPolicies
from exchange.errors import ExchangeError
from exchange.ops import notify as store
from exchange.ops.attention import Cause, pause_words, say
from exchange.ops.notify import Snapshot
from exchange.ops.notify_by import Messenger, messengers
from exchange.ops.status import pace_words
from exchange.ops.withheld_behind import not_to_confirm
from exchange.report.model import Lang
from exchange.report.words import advice_by_kind, human_age
from exchange.secrets import mask_secrets, safe_url, secret_forms
from exchange.settings import Settings
from exchange.words import channel_named, channels_named

log = logging.getLogger(__name__)

_WORDS: dict[str, tuple[str, str]] = {
    "subject": ("Обмен с 1С: нужен человек", "Exchange with 1C: a person is needed"),
    "subject_resumed": ("Обмен с 1С", "Exchange with 1C"),
    "resumed": ("доставка возобновилась", "delivery resumed"),
    "resumed_head": (
        "Доставка снова идёт, ничего делать не нужно:",
        "Delivery runs again, nothing needs doing:",
    ),
    "resumed_breaker": (
        "- сайт снова отвечает",
        "- the site answers again",
    ),
    "resumed_token": ("- сайт снова принимает токен", "- the site accepts the token again"),
    # The same with EXCHANGE_CHANNELS (contract 13): a stop ends once no channel holds it.
    "resumed_breaker_channels": (
        "- каждый канал снова отвечает",
        "- every channel answers again",
    ),
    "resumed_token_channels": (
        "- каждый канал снова принимает свой ключ или токен",
        "- every channel accepts its key or token again",
    ),
    "resumed_operator": ("- оператор возобновил доставку", "- an operator resumed delivery"),
    # An operator's pause of one channel (contract 13), where the words name the channels.
    "resumed_unserved": (
        "- на канале {channel} больше ничего не ждёт",
        "- nothing waits on channel {channel} any more",
    ),
    # Messages kept with no delivery (no channel took their kind when they were accepted):
    # none is left, each given to a channel by its seed (or, a price, replaced by a newer
    # version delivered). A channel taking the kind is not enough: they stay the cause until
    # ``channels seed NAME --from`` (review 32k).
    "resumed_no_channel": (
        "- сохранённых сообщений вида {kind}, которые никуда не доставляются, больше нет: "
        "они переданы каналу (exchange channels seed)",
        "- no message of kind {kind} is kept nowhere any more: they were given to a channel "
        "(exchange channels seed)",
    ),
    "resumed_operator_channel": (
        "- оператор возобновил доставку в {channel}",
        "- an operator resumed delivery to {channel}",
    ),
    "resumed_no_worker": (
        "- обработчик снова отчитывается и берёт работу",
        "- a worker reports again and takes the work",
    ),
    "gained": ("в карантине новые записи", "new quarantine entries"),
    "withheld_gained": (
        "канал придержал цены до подтверждения",
        "a channel withholds prices until confirmed",
    ),
    "withheld": (
        "Придержаны каналом (канал принял цену, но не показывает её покупателям, пока человек "
        "не подтвердит): {count}.",
        "Withheld by a channel (the channel took the price but does not show it to buyers "
        "until a person confirms it): {count}.",
    ),
    "withheld_line": (
        "- канал {channel}: {count}; самая старая {message_id}, ждёт {age}",
        "- channel {channel}: {count}; oldest {message_id}, waiting {age}",
    ),
    "withheld_said": ("  Канал пишет: {said}", "  The channel says: {said}"),
    "withheld_do": (
        "  Что сделать: проверьте цену; если она верна — exchange withheld release "
        'MESSAGE_ID… --channel {channel} --note "…" (где у канала нет такого способа, '
        "подтвердите цену в его личном кабинете); если нет — исправьте цену в 1С, новая "
        "версия заменит придержанную",
        "  What to do: check the price; if it is right, exchange withheld release "
        'MESSAGE_ID… --channel {channel} --note "…" (where the channel has no way for it, '
        "confirm the price in its own cabinet); if not, correct the price in 1C: the new "
        "version replaces the withheld one",
    ),
    "withheld_open": ("  Открыть: {url}", "  Open: {url}"),
    "withheld_cmd": (
        '  exchange withheld release {message_id} --channel {channel} --note "…"',
        '  exchange withheld release {message_id} --channel {channel} --note "…"',
    ),
    "stopped": ("доставка остановлена", "delivery stopped"),
    "database": ("База обмена", "Exchange database"),
    "quarantine": (
        "Карантин: записей {count}. По причинам (самая старая запись и сколько ждёт):",
        "Quarantine: {count} entries. By reason (the oldest entry and how long it has waited):",
    ),
    "channel_line": (
        "- канал {channel}: {count}",
        "- channel {channel}: {count}",
    ),
    "records_line": (
        "- отклонённые при приёме строки (ничьи): {count}",
        "- rows refused at intake (no channel's): {count}",
    ),
    "by_channel": ("По каналам:", "By channel:"),
    "reason_line": (
        "- {reason}: {count}; самая старая {message_id}, ждёт {age}",
        "- {reason}: {count}; oldest {message_id}, waiting {age}",
    ),
    "what_to_do": ("  Что сделать: {advice}", "  What to do: {advice}"),
    "open": ("  Открыть: {url}", "  Open: {url}"),
    "stops": ("Доставка остановлена:", "Delivery has stopped:"),
    "breaker": (
        "- сайт раз за разом отвечает ошибкой или недоступен: доставка ждёт и продолжится "
        "сама (обработчик {worker}{until}); сейчас: {pace}",
        "- the circuit breaker is open: the site keeps failing or cannot be reached "
        "(worker {worker}{until}); now: {pace}",
    ),
    "breaker_channel": (
        "- {channel} раз за разом отвечает ошибкой или недоступен: доставка в него ждёт и "
        "продолжится сама (обработчик {worker}{until}); сейчас: {pace}",
        "- {channel} keeps failing or cannot be reached: delivery to it waits and goes on by "
        "itself (worker {worker}{until}); now: {pace}",
    ),
    "until": (", до {at}", ", until {at}"),
    # The pause in the words of ``status`` and the page (ops/attention.py, ``pause_words``).
    "token": ("- {said} (обработчик {worker})", "- {said} (worker {worker})"),
    "operator": (
        "- доставку остановил оператор {operator} ({at}): «{note}»; возобновить: кнопка "
        "«Возобновить доставку» на рабочем месте",
        "- operator {operator} paused delivery ({at}): “{note}”; resume: the button “Resume "
        "delivery” in the workbench",
    ),
    "operator_channels": (
        "- доставку во все каналы остановил оператор {operator} ({at}): «{note}»; возобновить: "
        "кнопка «Возобновить все каналы» на рабочем месте",
        "- operator {operator} paused delivery to every channel ({at}): “{note}”; resume: the "
        "button “Resume every channel” in the workbench",
    ),
    "operator_channel": (
        "- доставку в {channel} остановил оператор {operator} ({at}): «{note}»; возобновить: "
        "кнопка «Возобновить канал {name}» на рабочем месте",
        "- operator {operator} paused delivery to {channel} ({at}): “{note}”; resume: the "
        "button “Resume channel {name}” in the workbench",
    ),
    "no_worker": (
        "- ни один обработчик не отчитывался {silent}, а работа ждёт: строк 1С {rows}, "
        "сообщений {messages}, самая старая ждёт {age}; проверьте, запущена ли служба "
        "(exchange run) или задание планировщика",
        "- no worker has reported for {silent} while work waits: {rows} 1C rows, {messages} "
        "messages, the oldest waiting {age}; check that the service (exchange run) or the "
        "scheduled task runs",
    ),
    "never": ("ни разу", "ever"),
    "sign_ins": ("Отказано во входе:", "Sign-ins refused:"),
    "signing_in": ("отказано во входе", "sign-ins refused"),
    "resumed_sign_in": ("- вход снова принят", "- sign-ins are accepted again"),
    "workbench": ("Рабочее место: {url}", "Workbench: {url}"),
    "commands": ("Команды:", "Commands:"),
    "status_cmd": (
        "  exchange status                       — что ждёт и почему",
        "  exchange status                       — what waits, and why",
    ),
    "list_cmd": (
        "  exchange quarantine list --reason {reason}",
        "  exchange quarantine list --reason {reason}",
    ),
    "retry_cmd": (
        "  exchange quarantine retry --reason {reason} --dry-run   — затем без --dry-run, "
        'с --yes --note "…"',
        "  exchange quarantine retry --reason {reason} --dry-run   — then without --dry-run, "
        'with --yes --note "…"',
    ),
    "check_cmd": (
        "  exchange check                        — доступен ли сайт и принят ли токен",
        "  exchange check                        — is the site reachable, the token accepted",
    ),
    "check_channels_cmd": (
        "  exchange check                        — доступен ли каждый канал и принят ли его ключ",
        "  exchange check                        — is each channel reachable, its key accepted",
    ),
    "footer": (
        "Следующее уведомление — не раньше чем через {every}, и только если появится новое.",
        "The next notification comes no sooner than in {every}, and only if something is new.",
    ),
}

_RESUMED = {
    Stop.BREAKER: "resumed_breaker",
    Stop.TOKEN: "resumed_token",
    Stop.OPERATOR: "resumed_operator",
    Stop.NO_WORKER: "resumed_no_worker",
    Stop.SIGN_IN_1C: "resumed_sign_in",
    Stop.SIGN_IN_INTAKE: "resumed_sign_in",
}

# Reasons a retry may cure (the site or the service failed); the others need a fix in 1C or in
# the configuration first, so the message offers only their list.
_RETRYABLE = ("retry-limit", "unknown-response", "sequence-gap", "unroutable")


def _w(key: str, lang: Lang) -> str:
    ru, en = _WORDS[key]
    return ru if lang == "ru" else en


def _at(value: str | datetime | None, zone: str) -> str:
    """A time in EXCHANGE_DISPLAY_TZ (UTC by default), its zone named."""
    if value is None:
        return "?"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    local = moment.astimezone(ZoneInfo(zone))
    return local.strftime("%Y-%m-%d %H:%M ") + (local.tzname() or zone)


def compose(
    found: Snapshot,
    decision: Decision,
    *,
    lang: Lang,
    database: str,
    workbench_url: str | None,
    every: float,
    zone: str = "UTC",
    channels: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The subject and the text of one notification. ``channels`` (EXCHANGE_CHANNELS set:
    each channel's target by its name): the lines about a channel name it, by its name and
    what it is, never "the site" (contract 13); None: the one channel's words, as always."""
    situation = found.situation
    news = []
    if decision.gained:
        news.append(_w("gained", lang))
    if decision.withheld_gained:
        news.append(_w("withheld_gained", lang))
    if situation.stops - SIGN_IN_STOPS:
        news.append(_w("stopped", lang))
    if situation.stops & SIGN_IN_STOPS:
        news.append(_w("signing_in", lang))
    bad_news = bool(news)
    if decision.resumed:
        news.append(_w("resumed", lang))
    head = _w("subject" if bad_news else "subject_resumed", lang)
    subject = head + (": " + ", ".join(news) if news else "")
    lines = [f"{_w('database', lang)}: {database}", ""]
    if decision.resumed:
        lines.append(_w("resumed_head", lang))
        lines += [
            _w(_resumed_key(stop, channels), lang) for stop in Stop if stop in decision.resumed
        ]
        lines += [
            _channel_stop_line("resumed_operator_channel", stop, channels, lang)
            for stop in sorted(decision.resumed)
            if paused_channel(stop) is not None
        ]
        lines += [
            _w("resumed_unserved", lang).format(channel=unserved_channel(stop))
            for stop in sorted(decision.resumed)
            if unserved_channel(stop) is not None
        ]
        lines += [
            _w("resumed_no_channel", lang).format(kind=no_channel_kind(stop))
            for stop in sorted(decision.resumed)
            if no_channel_kind(stop) is not None
        ]
        lines.append("")
    by_reason = found.quarantine_by_reason
    if situation.quarantined:
        lines.append(_w("quarantine", lang).format(count=situation.quarantined))
        for reason, entry in by_reason.items():
            lines.append(
                _w("reason_line", lang).format(
                    reason=reason,
                    count=entry["count"],
                    message_id=entry["oldest_message_id"],
                    age=human_age(entry["oldest_age_s"], lang),
                )
            )
            # a marketplace's: its cabinet; channels of different advice: each kind's
            advice = advice_by_kind(reason, found.reason_targets.get(reason, {None}), lang)
            advice = advice.replace("\n", "\n    ")  # each kind's advice under the line
            lines.append(_w("what_to_do", lang).format(advice=advice))
            if workbench_url:
                link = f"{workbench_url}/quarantine?{urlencode({'reason': reason})}"
                lines.append(_w("open", lang).format(url=link))
        if found.quarantine_by_channel:  # contract 13: which shop each waits for
            lines.append(_w("by_channel", lang))
            for channel, count in found.quarantine_by_channel.items():
                if channel is None:
                    lines.append(_w("records_line", lang).format(count=count))
                else:
                    lines.append(_w("channel_line", lang).format(channel=channel, count=count))
        lines.append("")
    if situation.withheld:
        lines += _withheld_lines(found, lang, workbench_url)
    if situation.stops - SIGN_IN_STOPS:
        lines.append(_w("stops", lang))
        lines += _stop_lines(found, lang, zone, channels)
        lines.append("")
    if situation.stops & SIGN_IN_STOPS:
        # The words of ``exchange status`` and the dashboard (ops/attention.py): one source.
        lines.append(_w("sign_ins", lang))
        for door, refused in found.refused_sign_ins.items():
            if Stop(f"sign-in-refused:{door}") in situation.stops:
                lines.append("- " + say(Cause("", f"sign_in_{door}", refused), lang, zone))
        lines.append("")
    if workbench_url:
        lines += [_w("workbench", lang).format(url=workbench_url + "/"), ""]
    lines.append(_w("commands", lang))
    lines.append(_w("status_cmd", lang))
    for reason in by_reason:
        key = "retry_cmd" if reason in _RETRYABLE else "list_cmd"
        lines.append(_w(key, lang).format(reason=reason))
    if situation.stops & {Stop.BREAKER, Stop.TOKEN}:
        lines.append(_w("check_channels_cmd" if channels is not None else "check_cmd", lang))
    for channel, entry in found.withheld_by_channel.items():
        if entry["oldest_message_id"]:
            lines.append(
                _w("withheld_cmd", lang).format(
                    message_id=entry["oldest_message_id"], channel=channel
                )
            )
    if bad_news:  # good news alone does not start a new period
        lines += ["", _w("footer", lang).format(every=human_age(every, lang))]
    return subject, "\n".join(lines) + "\n"


def _withheld_lines(found: Snapshot, lang: Lang, workbench_url: str | None) -> list[str]:
    """Contract 13: the prices each channel withholds, in its own words, and what releases
    them (``exchange withheld release``, or the channel's cabinet)."""
    lines = [_w("withheld", lang).format(count=found.situation.withheld)]
    for channel, entry in found.withheld_by_channel.items():
        lines.append(
            _w("withheld_line", lang).format(
                channel=channel,
                count=entry["count"],
                message_id=entry["oldest_message_id"] or "?",
                age=human_age(entry["oldest_age_s"], lang),
            )
        )
        if entry["said"]:
            lines.append(_w("withheld_said", lang).format(said=entry["said"]))
        lines.append(_w("withheld_do", lang).format(channel=channel))
        if entry.get("behind"):  # a newer price waits behind them: never confirm those
            said = not_to_confirm(int(entry["behind"]), lang)
            lines.append(f"  {said[:1].upper()}{said[1:]}")
        if workbench_url:
            link = f"{workbench_url}/messages/withheld?{urlencode({'channel': channel})}"
            lines.append(_w("withheld_open", lang).format(url=link))
    lines.append("")
    return lines


def _resumed_key(stop: Stop, channels: dict[str, str] | None) -> str:
    """The line of a stop that ended: with channels, what every channel does again."""
    key = _RESUMED[stop]
    if channels is not None and f"{key}_channels" in _WORDS:
        return f"{key}_channels"
    return key


def _channel_stop_line(
    key: str, stop: str, channels: dict[str, str] | None, lang: Lang, **values: Any
) -> str:
    """The line of an operator's pause of one channel (``key``'s words, naming it), or where the
    words do not name the channels (``channels`` None: the one channel of EXCHANGE_TARGET) the
    one channel's pause words, as they always were."""
    name = paused_channel(stop) or ""
    if channels is None:
        plain = "resumed_operator" if key.startswith("resumed") else "operator"
        return _w(plain, lang).format(**values)
    named = channel_named(name, channels.get(name), lang)
    return _w(key, lang).format(channel=named, name=name, **values)


def _named(worker: dict[str, Any], channels: dict[str, str] | None, lang: Lang) -> str | None:
    """The channel of a worker's row, named (``words.channel_named``), where EXCHANGE_CHANNELS
    names the channels and the row is a channel's loop; else None."""
    channel = worker.get("channel")
    if channels is None or channel is None:
        return None
    return channel_named(channel, channels.get(channel), lang)


def _stop_lines(
    found: Snapshot, lang: Lang, zone: str, channels: dict[str, str] | None = None
) -> list[str]:
    stops, lines = found.situation.stops, []
    if Stop.BREAKER in stops:
        for w in (w for w in found.workers if w["breaker"] != "closed"):
            until = (
                _w("until", lang).format(at=_at(w["breaker_until"], zone))
                if w["breaker_until"] and w["breaker"] == "open"  # never a past half-open time
                else ""
            )
            named = _named(w, channels, lang)
            lines.append(
                _w("breaker" if named is None else "breaker_channel", lang).format(
                    worker=w["worker_id"],
                    until=until,
                    pace=pace_words(w["pace"], lang, named),
                    channel=named,
                )
            )
    if Stop.TOKEN in stops:
        for w in (w for w in found.workers if w["paused"]):
            said = pause_words(
                w["pause_cause"] or PauseCause.OTHER.value,
                w["paused"],
                lang,
                channel=_named(w, channels, lang),
            )
            lines.append(_w("token", lang).format(said=said, worker=w["worker_id"]))
    pause = found.operator_pause
    if Stop.OPERATOR in stops and pause is not None:
        lines.append(
            # the workbench's banner names every channel where the words name the channels
            _w("operator_channels" if channels is not None else "operator", lang).format(
                operator=pause["operator"], at=_at(pause["paused_at"], zone), note=pause["note"]
            )
        )
    for stop in sorted(stops):
        name = paused_channel(stop)
        held = found.channel_pauses.get(name) if name is not None else None
        if held is not None:
            lines.append(
                _channel_stop_line(
                    "operator_channel",
                    stop,
                    channels,
                    lang,
                    operator=held["operator"],
                    at=_at(held["paused_at"], zone),
                    note=held["note"],
                )
            )
    for stop in sorted(stops):
        name = unserved_channel(stop)
        waiting = found.unserved.get(name) if name is not None else None
        if name is not None and waiting is not None:
            # ``status``'s own sentence of its ``unserved:NAME`` cause (ops/attention.py)
            cause = Cause(stop, "unserved", {"channel": name, **waiting})
            lines.append("- " + say(cause, lang, zone))
    for stop in sorted(stops):
        kind = no_channel_kind(stop)
        kept = found.no_channel.get(kind) if kind is not None else None
        if kind is not None and kept is not None:
            # ``status``'s own sentence of its ``no-channel:KIND`` cause (ops/attention.py)
            cause = Cause(stop, "no_channel", {"kind": kind, **kept})
            lines.append("- " + say(cause, lang, zone))
    if Stop.NO_WORKER in stops:
        silent = (
            human_age(found.last_heartbeat_age_s, lang)
            if found.last_heartbeat_age_s is not None
            else _w("never", lang)
        )
        lines.append(
            _w("no_worker", lang).format(
                silent=silent,
                rows=found.waiting_rows,
                messages=found.waiting_messages,
                age=human_age(found.waiting_age_s, lang),
            )
        )
    return lines


@dataclass
class Outcome:
    """What one step did: ``sent`` by every way, ``failed`` with the reasons, or neither
    (nothing new, not yet due, or another process took the right to send)."""

    decision: Decision
    # When the next message may go at the soonest (the period since the last one), or None.
    next_at: datetime | None = None
    sent: bool = False
    failed: list[str] | None = None
    subject: str = ""
    text: str = ""


class Notifier:
    """One step: what needs a person -> decide -> take the right to send -> send."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        clock: Clock,
        messengers_: list[Messenger],
        *,
        staging_engine: Engine | None = None,
        sender: str | None = None,
    ) -> None:
        self.engine = engine
        self.staging_engine = staging_engine
        self.clock = clock
        self.messengers = messengers_
        self.kinds: KindPolicies = settings.policies
        self.every = settings.notify_every
        self.stalled_after = settings.notify_stalled_after
        self.lang: Lang = settings.report_lang
        self.database = safe_url(settings.database_url)
        self.workbench_url = settings.public_url
        self.zone = settings.display_tz
        self.sender = sender or settings.worker_id
        # contract 13: EXCHANGE_CHANNELS's channels, each's target by its name; the lines
        # name each channel where the words do (``channels_of``)
        self.channels: dict[str, str] | None = (
            {channel.name: channel.target for channel in settings.channels_in_force()}
            if settings.channels is not None
            else None
        )
        # Data may quote a secret (an operator's note, a site's error): masked like the report.
        self._secret_forms = sorted(
            {form for secret in settings.secrets() for form in secret_forms(secret)},
            key=lambda form: (-len(form), form),
        )

    def step(self) -> Outcome:
        """Blocking; never raises for a way that fails (logged in one line)."""
        now = self.clock.now()
        with transaction(self.engine, read_only=True) as connection:
            told = store.told(connection)
            soonest = (
                told.attempted_at + timedelta(seconds=self.every)
                if told.attempted_at is not None
                else None
            )
            next_at = soonest if soonest is not None and now < soonest else None
            if next_at is not None and not told.stops:
                # Within the period and no stop to forget: nothing can happen; one read.
                return Outcome(Decision(), next_at)
            # the channels configured by name: work on a registered one none serves is a
            # stop of its own (``unserved:NAME``), computed as ``status`` computes its cause
            configured = list(self.channels) if self.channels is not None else None
            if self.staging_engine is None:
                found = store.snapshot(
                    connection,
                    now,
                    self.kinds,
                    stalled_after=self.stalled_after,
                    configured=configured,
                )
            else:
                with transaction(self.staging_engine, read_only=True) as staging:
                    found = store.snapshot(
                        connection,
                        now,
                        self.kinds,
                        stalled_after=self.stalled_after,
                        staging_connection=staging,
                        configured=configured,
                    )
        decision = decide(found.situation, told, now, timedelta(seconds=self.every))
        if decision.remember is None:
            return Outcome(decision, next_at)
        new = decision.remember
        with transaction(self.engine) as connection:
            won = store.remember(
                connection,
                told,
                new,
                sent_by=self.sender,
                outcome="sending" if decision.send else None,
            )
        if not won or not decision.send:
            return Outcome(decision, next_at)
        try:
            with transaction(self.engine, read_only=True) as connection:
                store.add_details(found, connection, now)
            subject, text = compose(
                found,
                decision,
                lang=self.lang,
                database=self.database,
                workbench_url=self.workbench_url,
                every=self.every,
                zone=self.zone,
                channels=self.channels_of(found),
            )
            text = mask_secrets(text, self._secret_forms)
        except Exception as exc:
            # Nothing went out: what was to be told stays news for the next period (unless the
            # database is down as well: then the claim stands, as if it had been told).
            with contextlib.suppress(Exception), transaction(self.engine) as connection:
                store.give_back(connection, new, told, f"not composed: {type(exc).__name__}")
            raise
        failed = self._send(subject, text)
        only_good_news = not (decision.gained or decision.withheld_gained or decision.new_stops)
        with transaction(self.engine) as connection:
            if failed and len(failed) == len(self.messengers):
                if only_good_news:  # "delivery runs again" is told once or not at all
                    store.outcome(connection, new.version, "not sent: " + "; ".join(failed))
                else:  # the bad news stays news for the next period
                    store.give_back(connection, new, told, "; ".join(failed))
            else:
                store.outcome(connection, new.version, "; ".join(["sent", *failed]))
        return Outcome(
            decision,
            sent=len(failed) < len(self.messengers),
            failed=failed or None,
            subject=subject,
            text=text,
        )

    def channels_of(self, found: Snapshot) -> dict[str, str] | None:
        """Each channel's target by its name where the words name the channels (the one rule,
        ``words.channels_named``: EXCHANGE_CHANNELS, or more than one registered), else None:
        the one channel's words."""
        if not channels_named(self.channels is not None, len(found.channels)):
            return None
        return {**found.channels, **(self.channels or {})}

    def _send(self, subject: str, text: str) -> list[str]:
        failed = []
        for messenger in self.messengers:
            try:
                messenger.send(subject, text)
            except ExchangeError as exc:
                failed.append(f"{messenger.name}: {exc}")
                # One line, no traceback: the reason says what to fix.
                log.error("notification not sent by %s: %s", messenger.name, exc)
            else:
                log.info("notification sent by %s: %s", messenger.name, subject)
        return failed


def notifier(
    settings: Settings,
    engine: Engine,
    clock: Clock,
    *,
    staging_engine: Engine | None = None,
) -> Notifier | None:
    """The notifier of these settings, or None when neither e-mail nor Telegram is set (off)."""
    found = messengers(settings)
    if not found:
        return None
    return Notifier(settings, engine, clock, found, staging_engine=staging_engine)
