"""What needs a person (contract 6): the causes ``exchange status`` exits 1 for and the
workbench's dashboard shows, decided once for both and said in English or Russian.

Besides the figures of ``status`` (each worker marked live or not there) this reads what 1C
handed over that no worker has taken yet (the staging table, which may be in a database of
its own), whether the latest 1C exchange that signed in failed with no success since, and
the sign-ins refused lately (``ops/sign_ins.py``: 1C's and the intake's are a cause).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from sqlalchemy import Connection, func, not_, select

from exchange.db.channels import kept_nowhere
from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import channels, cml_exchanges, deliveries, messages, staging
from exchange.domain.clock import local_time
from exchange.domain.pause import READ_ONLY_NOTE, PauseCause
from exchange.domain.policy import KindPolicies
from exchange.domain.states import PENDING, State, values
from exchange.i18n import N_, Lang, _, ngettext
from exchange.ops import sign_ins
from exchange.ops.find import held_condition
from exchange.ops.status import (
    holding,
    last_deliveries,
    pause_of,
    site_failing,
    unreachable_since,
)
from exchange.ops.withheld_behind import not_to_confirm
from exchange.queue import control
from exchange.words import channel_named, inside_words
from exchange.words import name as code_name

# The outcomes of a 1C exchange (contract 9a) after which the exchange works again.
SUCCEEDED = ("staged", "nothing-new", "catalogue")


@dataclass(frozen=True)
class Cause:
    """One thing only a person moves: its short code (``needs_person_causes``) and the values
    its sentence names."""

    code: str
    key: str
    values: dict[str, Any] = field(default_factory=dict)

    def words(self, lang: str = "en", zone: tzinfo | str = "UTC") -> str:
        return say(self, lang, zone)


def intake(staging_connection: Connection, now: datetime) -> dict[str, Any]:
    """What 1C handed over that no worker has taken yet (``status --json``'s ``intake``)."""
    untaken, oldest = staging_connection.execute(
        select(func.count(), func.min(staging.c.created_at)).where(staging.c.taken_at.is_(None))
    ).one()
    return {
        "untaken": int(untaken),
        "oldest_untaken_age_s": round((now - oldest).total_seconds(), 3) if oldest else None,
    }


def onec_failing(connection: Connection) -> dict[str, Any] | None:
    """The latest 1C exchange that signed in and failed, unless a later one succeeded; None
    when the latest finished exchange worked (or none came)."""
    last_success = (
        select(func.coalesce(func.max(cml_exchanges.c.id), 0))
        .where(cml_exchanges.c.outcome.in_(SUCCEEDED))
        .scalar_subquery()
    )
    row = connection.execute(
        select(cml_exchanges.c.started_at, cml_exchanges.c.filename, cml_exchanges.c.detail)
        .where(cml_exchanges.c.outcome == "failure", cml_exchanges.c.id > last_success)
        .order_by(cml_exchanges.c.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    return {"at": row.started_at.isoformat(), "file": row.filename, "reason": row.detail}


def work_waits(
    connection: Connection,
    taken: dict[str, Any],
    now: datetime,
    kinds: KindPolicies,
    live_within: float,
    channel: Channel = None,
    taking: Collection[str] | None = None,
) -> bool:
    """Work a live worker would have moved by now (contract 6): an untaken staging row, or a
    ``new`` delivery (on ``channel``, every channel for None) that is not held behind the
    quarantine, of a message older than ``live_within`` (max(lease, 3 x poll)). Younger work
    is a worker's next poll away: the dashboard counts it («ещё не взято из 1С: N») without
    calling it a cause. ``taking``: the channels a worker started now would take (configured
    and not paused on their own; None: every one): work on another (a renamed channel's, a
    paused one's) waits for a person, not a worker (owner 31 item 3)."""
    age = taken["oldest_untaken_age_s"]
    if age is not None and age >= live_within:
        return True
    d = deliveries
    old_new = connection.execute(
        select(d.c.message_pk)
        .join(messages, messages.c.id == d.c.message_pk)
        .where(
            on(d.c.channel_id, channel_ids(connection, channel)),
            d.c.state == State.NEW.value,
            messages.c.created_at <= now - timedelta(seconds=live_within),
            not_(held_condition(kinds)),
            *(
                ()
                if taking is None
                else (
                    d.c.channel_id.in_(
                        select(channels.c.id).where(channels.c.name.in_(list(taking)))
                    ),
                )
            ),
        )
        .limit(1)
    ).first()
    return old_new is not None


def unserved(
    connection: Connection, configured: Collection[str], channel: Channel = None
) -> dict[str, dict[str, Any]]:
    """The channels registered and not dropped that no configured channel serves (a channel
    renamed in the settings leaves its old name so), with deliveries still on their way
    (``PENDING``) on them: ``{name: {"target", "count"}}``, oldest channel first. No worker
    takes them (a worker delivers to the channels configured), so only a person moves them:
    the channel configured again, or dropped (``exchange channels drop``). ``channel``: of
    that channel only (``status --channel``), every channel's for None."""
    d = deliveries
    rows = connection.execute(
        select(channels.c.name, channels.c.target, func.count())
        .select_from(d.join(channels, channels.c.id == d.c.channel_id))
        .where(
            on(d.c.channel_id, channel_ids(connection, channel)),
            channels.c.dropped_at.is_(None),
            channels.c.name.not_in(list(configured)),
            d.c.state.in_(values(PENDING)),
        )
        .group_by(channels.c.id, channels.c.name, channels.c.target)
        .order_by(channels.c.id)
    )
    return {row.name: {"target": row.target, "count": int(row[2])} for row in rows}


def unmanned(
    connection: Connection,
    by_channel: dict[str, dict[str, Any]],
    now: datetime,
    kinds: KindPolicies,
    live_within: float,
    taking: Collection[str] | None,
) -> dict[str, dict[str, Any]]:
    """The channels configured here that no live worker serves (``by_channel``'s
    ``live_workers``: its loops' rows, ``channel_status``) while work on them is due
    (``work_waits`` of the channel: a ``new`` delivery older than ``live_within``):
    ``{name: {"target", "count"}}`` (``count``: its backlog). Contract 6 counts "no live
    worker" as a cause; with channels, a worker may serve some of them (``exchange run
    --channel NAME``), and one that died leaves its channel's prices undelivered while
    another's worker is live. ``taking``: the channels a worker started now would take (not
    paused on their own; None: every one); a channel paused, renamed away or dropped waits
    for a person, said by its own cause."""
    found: dict[str, dict[str, Any]] = {}
    for name, channel in by_channel.items():
        if not channel["configured"] or channel["live_workers"]:
            continue
        if taking is not None and name not in taking:
            continue
        if work_waits(connection, {"oldest_untaken_age_s": None}, now, kinds, live_within, name):
            found[name] = {"target": channel["target"], "count": channel["backlog"]["messages"]}
    return found


def causes(
    figures: Any,
    *,
    onec_failed: dict[str, Any] | None,
    no_live_worker: bool,
    refused_sign_ins: dict[str, dict[str, Any]] | None = None,
    by_channel: dict[str, dict[str, Any]] | None = None,
    unserved_channels: dict[str, dict[str, Any]] | None = None,
    untaken: dict[str, dict[str, Any]] | None = None,
    unmanned_channels: dict[str, dict[str, Any]] | None = None,
    delivered: dict[str | None, datetime] | None = None,
) -> list[Cause]:
    """What ``exchange status`` exits 1 for, in the order contract 6 names the codes; a
    pause is said as ``figures.pause`` says it (contract 15: one pause, one truth).
    ``unserved_channels`` (``unserved``): each is a cause of its own, ``unserved:NAME``, its
    waiting deliveries counted and what to do said. ``untaken``
    (``db.channels.kept_nowhere``): each kind with messages kept with no delivery on any
    channel (no channel took the kind when they were accepted), ``no-channel:KIND``, the
    messages counted. ``unmanned_channels`` (``unmanned``): each channel with work due and
    no live worker serving it, ``no-live-worker:NAME``, where some worker is live elsewhere
    (none live at all: the bare ``no-live-worker`` says it for every channel).

    ``by_channel`` (``status --json``'s ``channels``, given when EXCHANGE_CHANNELS is set):
    a channel's causes name it after a colon (contract 13: ``quarantine:ozon``,
    ``paused:site``); intake's rejected records, 1C's failures and the process's own causes
    stay bare. Without it every code is bare, as monitoring has always read them.
    ``delivered`` (``status.last_deliveries``): the evidence that a breaker of a process's own
    row (no channel) is past; None: none (its open breaker counts)."""
    if by_channel is None:
        found = delivery_causes(figures, "")
    else:
        found = []
        records = figures.counts.get("quarantined", 0) - sum(
            channel["counts"].get("quarantined", 0) for channel in by_channel.values()
        )
        if records > 0:  # intake's own records: no channel's
            found.append(Cause("quarantine", "quarantine", {"count": records}))
        for name, channel in by_channel.items():
            found += delivery_causes(_one_channel(figures, name, channel), name)
        # What no channel's rows say but the figures do (a process's own row, of no channel,
        # whose breaker is open or that paused; an operator's pause of every channel): said
        # bare rather than not at all. Read on the rows of no channel alone, never on the
        # figures' breaker and pause, which are every channel's: ``status --channel site``
        # said the market's outage bare, in the site's words (review: «сайт раз за разом
        # отвечает ошибками»), and exited 1 for it.
        said = {cause.code.split(":")[0] for cause in found}
        found += [
            cause
            for cause in delivery_causes(_no_channels(figures, delivered or {}), "")
            if cause.code in ("breaker", "paused") and cause.code not in said
        ]
    for name, waiting in (unserved_channels or {}).items():
        found.append(
            Cause(
                f"unserved:{name}",
                "unserved",
                {"channel": name, "target": waiting["target"], "count": waiting["count"]},
            )
        )
    for kind, kept in (untaken or {}).items():
        found.append(
            Cause(
                f"no-channel:{kind}",
                "no_channel",
                {
                    "kind": kind,
                    "count": kept["count"],
                    "oldest": kept["oldest"],
                    "taken": kept.get("taken", False),
                },
            )
        )
    found.sort(key=lambda cause: _ORDER.index(cause.code.split(":")[0]))
    if onec_failed is not None:
        found.append(Cause("exchange-1c-failed", "onec", dict(onec_failed)))
    if no_live_worker:
        found.append(Cause("no-live-worker", "no_live_worker"))
    else:
        for name, waiting in (unmanned_channels or {}).items():
            found.append(
                Cause(
                    f"no-live-worker:{name}",
                    "no_live_worker_channel",
                    {"channel": name, "target": waiting["target"], "count": waiting["count"]},
                )
            )
    for worker in figures.workers:  # a broker source not consuming (contract 15)
        source = worker.get("source") or {}
        if worker.get("live") and source.get("consuming") is False:
            found.append(
                Cause(
                    "source",
                    "source",
                    {
                        "worker": worker["worker_id"],
                        "reason": source.get("cause") or "?",
                        "since": source.get("since"),
                    },
                )
            )
            break
    for door, refused in (refused_sign_ins or {}).items():
        if door in sign_ins.CAUSE_DOORS:
            found.append(Cause(f"sign-in-refused:{door}", f"sign_in_{door}", dict(refused)))
    return found


# The order contract 6 names the delivery's causes in (a code before its colon).
_ORDER = ("quarantine", "withheld", "breaker", "paused", "gap", "unserved", "no-channel")


@dataclass(frozen=True)
class _Channel:
    """One channel's figures as ``delivery_causes`` reads ``status``'s."""

    counts: dict[str, int]
    breaker_open: bool
    site_unreachable_since: str | None
    pause: dict[str, Any] | None
    blocked: list[dict[str, Any]]
    # What the channel is (its target: ``ozon``, ``api``): its words name it (contract 13).
    target: str | None = None
    # The withheld prices a newer one waits behind (``ops.withheld_behind``): not to confirm.
    withheld_behind: int = 0


def _one_channel(figures: Any, name: str, channel: dict[str, Any]) -> _Channel:
    """``figures`` narrowed to the channel ``name`` (its entry of ``channels``)."""
    rows = [w for w in figures.workers if w["live"] and w.get("channel") == name]
    unreachable = [w["unreachable_since"] for w in rows]
    return _Channel(
        counts=channel["counts"],
        breaker_open=channel["breaker"] in ("open", "half-open"),
        site_unreachable_since=(
            str(min(unreachable)) if unreachable and all(unreachable) else None
        ),
        pause=channel["paused"],
        blocked=[b for b in figures.blocked if b.get("channel") == name],
        target=channel.get("target"),
        withheld_behind=channel.get("withheld_behind", 0),
    )


def _no_channels(figures: Any, delivered: dict[str | None, datetime]) -> _Channel:
    """``figures`` narrowed to what is of no channel: the rows of no channel (a process's own)
    by the rules of ``status`` (``site_failing``, ``unreachable_since``, ``holding`` and
    ``pause_of``), and an operator's pause of every channel. No channel's rows (another
    channel's, left out by ``status --channel``) count: each is its channel's cause alone."""
    own = [w for w in figures.workers if w.get("channel") is None]
    pause = figures.pause
    return _Channel(
        counts={},
        breaker_open=site_failing(own, delivered),
        site_unreachable_since=unreachable_since(own),
        pause=(
            pause
            if pause is not None and pause["by"] == "operator"
            else pause_of(None, [w for w in holding(figures.workers) if w.get("channel") is None])
        ),
        blocked=[],
    )


def delivery_causes(figures: Any, channel: str) -> list[Cause]:
    """The causes of delivery (quarantine, withheld, breaker, paused, gap) in ``figures``;
    ``channel``: the channel they are of, named after a colon in the code and said in the
    sentence, or "" for bare codes."""
    found = []
    quarantined = figures.counts.get("quarantined", 0)
    if quarantined:
        found.append(Cause("quarantine", "quarantine", {"count": quarantined}))
    withheld = figures.counts.get("withheld", 0)
    if withheld:  # contract 13: the channel took them; only a person's confirmation shows them
        # Those a newer price waits behind must not be confirmed (Wildberries' quarantine):
        # the sentence says so rather than «confirm them» of every one.
        behind = getattr(figures, "withheld_behind", 0)
        found.append(Cause("withheld", "withheld", {"count": withheld, "behind": behind}))
    unreachable = getattr(figures, "site_unreachable_since", None)
    if figures.breaker_open and unreachable:  # no answer at all: not "answers with errors"
        found.append(Cause("breaker", "unreachable", {"since": unreachable}))
    elif figures.breaker_open:
        found.append(Cause("breaker", "breaker"))
    pause = figures.pause
    if pause is not None and pause["by"] == "operator":
        found.append(
            Cause(
                "paused",
                "operator",
                # the operator's note and when: what they said on pausing, said beside it
                {"operator": pause["operator"], "since": pause["since"], "note": pause["note"]},
            )
        )
    elif pause is not None:
        found.append(Cause("paused", f"pause_{pause['cause']}", {"answer": pause["note"]}))
    gaps = sum(1 for b in figures.blocked if b["held_by"] == "gap")
    if gaps:
        found.append(Cause("gap", "gap", {"count": gaps}))
    if not channel:
        return found
    target = getattr(figures, "target", None)
    return [
        Cause(
            f"{cause.code}:{channel}",
            cause.key,
            {**cause.values, "channel": channel, "target": target},
        )
        for cause in found
    ]


def say(cause: Cause, lang: str = "en", zone: tzinfo | str = "UTC") -> str:
    """A cause's sentence; its time (``since``) in ``zone`` (EXCHANGE_DISPLAY_TZ where the
    page or the notice says every other time in it; ``status`` prints UTC)."""
    v = cause.values
    if "since" in v:
        v = {**v, "since": _hm(v["since"], zone)}
    said_in: Lang = "ru" if lang == "ru" else "en"
    named = channel_named(v["channel"], v.get("target"), said_in) if "channel" in v else None
    if cause.key.startswith("pause_"):
        return pause_words(
            cause.key.removeprefix("pause_"), str(v.get("answer", "")), lang, channel=named
        )
    if named is not None and cause.key in CHANNEL_SENTENCES:
        # Contract 13: the channel is what fails, not "the site" (a marketplace, a second shop).
        return _(CHANNEL_SENTENCES[cause.key], said_in).format(**{**v, "channel": named})
    said = _RU[cause.key](v) if lang == "ru" else _EN[cause.key](v)
    if named is None:
        return said
    return _("{channel}: {said}", said_in).format(channel=named, said=said)


# A channel's own sentence where the one channel's says "the site" (contract 13: with
# EXCHANGE_CHANNELS every cause names its channel, by its name and what it is, «канал ozon
# (Ozon)»); the other causes put the channel before their sentence. ``{channel}``: the named
# channel (``words.channel_named``).
CHANNEL_SENTENCES: dict[str, str] = {
    "breaker": N_(
        "{channel} keeps failing: delivery to it waits and goes on by itself once it answers; "
        "if it lasts, tell those who run it"
    ),
    "unreachable": N_(
        "{channel} has not answered since {since}: delivery to it goes on by itself once it "
        "answers; if it lasts, check that it is up, or tell those who run it"
    ),
}
# The same for the refusals that paused a channel's delivery (``pause_words``), where the one
# channel's words say "the site".
CHANNEL_PAUSE_WORDS: dict[str, str] = {
    PauseCause.OTHER.value: N_(
        "Delivery to {channel} paused: it refused ({answer}). Mend what the answer names, or "
        "tell those who run it; delivery goes on by itself once it accepts"
    ),
    PauseCause.TLS.value: N_(
        "Delivery to {channel} paused: its certificate is not trusted ({answer}). If your "
        "company's certificate authority issued it, put that authority's file in the "
        "channel's site_ca_bundle; otherwise tell those who run it"
    ),
}


def pause_words(cause: str, answer: str, lang: str = "en", *, channel: str | None = None) -> str:
    """A site's refusal that paused delivery (``domain.pause.PauseCause``), with what to mend
    and whom to ask, in the target's own words: what ``status``, the page, the notice and
    ``run``'s last line say, and docs/runbook.ru.md quotes (a test compares them).
    ``channel``: the channel it paused, named (``words.channel_named``; with EXCHANGE_CHANNELS,
    contract 13): its own sentence where the one channel's says "the site", else the
    sentence behind its name; None: the one channel's words, as they always were."""
    said: Lang = "ru" if lang == "ru" else "en"
    ru, en = PAUSE_WORDS.get(cause, PAUSE_WORDS[PauseCause.OTHER.value])
    words = ru if said == "ru" else en
    if channel is not None:
        own_cause = cause if cause in PAUSE_WORDS else PauseCause.OTHER.value
        if own_cause in CHANNEL_PAUSE_WORDS:
            words = _(CHANNEL_PAUSE_WORDS[own_cause], said).replace("{channel}", channel)
    answer = _refusal_inside(answer)
    own = said_once(words, inside_words(answer, said) if answer else "")
    sentence = words.format(answer=own) if own else words.replace(" ({answer})", "")
    if channel is None or words.startswith(channel) or channel in words:
        return sentence
    return _("{channel}: {said}", said).format(channel=channel, said=sentence)


def _refusal_inside(answer: str) -> str:
    """The write's refusal inside the worker's note of a key that reads but may not write
    (``the key may read but not write (…)``): the cause's words say that themselves, in the
    reader's language (review 32: it was said twice, the second time in English)."""
    opening = f"{READ_ONLY_NOTE} ("
    if answer.startswith(opening) and answer.endswith(")"):
        return answer[len(opening) : -1]
    return answer


def said_once(words: str, answer: str) -> str:
    """The site's answer without what the cause's words already say (issue 34): a target
    records its refusal as ``HTTP 401: the site refused the token``, and «сайт не принял токен
    (HTTP 401: сайт не принял токен)» said it twice; each ``: ``-part of the answer that the
    sentence holds word for word is left out («сайт не принял токен (HTTP 401)»)."""
    sentence = words.replace("({answer})", "").casefold()
    kept = [
        part
        for part in answer.split(": ")
        if " " not in part.strip() or part.strip().casefold() not in sentence
    ]
    return ": ".join(kept).strip()


# Russian first, then English; ``{answer}``: the site's own answer.
PAUSE_WORDS: dict[str, tuple[str, str]] = {
    PauseCause.TOKEN.value: (
        "Доставка остановлена: сайт не принял токен ({answer}). Запишите верный токен в "
        "файл EXCHANGE_SITE_TOKEN_FILE (или в EXCHANGE_SITE_TOKEN): работающий сервис "
        "перечитает его сам. Токен выдают те, кто обслуживает сайт",
        "Delivery paused: the site refused the token ({answer}). Write the right token into "
        "the file of EXCHANGE_SITE_TOKEN_FILE (or EXCHANGE_SITE_TOKEN): a running service "
        "reads it again by itself. Those who run the site issue the token",
    ),
    PauseCause.WOO_KEY.value: (
        "Доставка остановлена: WooCommerce не принял ключ REST API ({answer}). Администратор "
        "магазина создаёт ключ с правами «Чтение/Запись» (WooCommerce → Настройки → "
        "Дополнительно → REST API); впишите его в EXCHANGE_WOO_KEY и EXCHANGE_WOO_SECRET",
        "Delivery paused: WooCommerce refused the REST API key ({answer}). The shop's "
        "administrator creates a Read/Write key (WooCommerce → Settings → Advanced → REST "
        "API); put it in EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET",
    ),
    PauseCause.READ_ONLY_KEY.value: (
        "Доставка остановлена: ключ позволяет читать, но не записывать ({answer}). "
        "Администратор магазина даёт ключу права «Чтение/Запись» (WooCommerce → Настройки → "
        "Дополнительно → REST API) или пользователю обмена право на импорт (Битрикс). Одна "
        "запись пробуется раз в EXCHANGE_RETRY_MAX_DELAY; после исправления можно выполнить "
        "exchange resume",
        "Delivery paused: the key may read but not write ({answer}). The shop's "
        "administrator gives the key Read/Write (WooCommerce → Settings → Advanced → REST "
        "API) or the exchange's user the right to import (Bitrix). One write is tried every "
        "EXCHANGE_RETRY_MAX_DELAY; once mended, exchange resume goes on at once",
    ),
    # Where Yandex Market sets an Api-Key's access (its guide "Создание и использование
    # API-Key-токена", research §3.2 YM-AUTH; the access names of "Доступы к методам по
    # Api-Key"): the cabinet's owner or manager edits the key, no new key needed.
    PauseCause.YM_READ_ONLY_KEY.value: (
        "Доставка остановлена: Яндекс Маркет принимает ключ Api-Key для чтения, но не для "
        "изменения цен ({answer}). Владелец или менеджер кабинета продавца даёт ключу доступ "
        "«Управление ценами» (pricing) или «Полное управление кабинетом» (all-methods): "
        "кабинет продавца на Маркете → значок аккаунта → Настройки → API и модули → Токены "
        "авторизации → ⋯ рядом с ключом → Редактировать (изменение действует в течение 10 "
        "минут); ключ в ym_api_key_file менять не нужно. Одна запись пробуется раз в "
        "EXCHANGE_RETRY_MAX_DELAY; после исправления можно выполнить exchange resume",
        "Delivery paused: Yandex Market accepts the Api-Key for reading but not for changing "
        "prices ({answer}). The owner or a manager of the seller's cabinet gives the key the "
        "«Manage prices» (pricing) or «Full account management» (all-methods) access: the "
        "seller's cabinet on the Market → the account icon → Settings → APIs and modules → "
        "Authorization tokens → ⋯ beside the key → Edit (a change takes effect within 10 "
        "minutes); the key in ym_api_key_file stays as it is. One write is tried every "
        "EXCHANGE_RETRY_MAX_DELAY; once mended, exchange resume goes on at once",
    ),
    # Where Ozon gives a key its role (research §1.2: "Key has an access level chosen at
    # creation"; the seller's account, Settings → Seller API, as the marketplace-key words say).
    PauseCause.OZON_READ_ONLY_KEY.value: (
        "Доставка остановлена: Ozon принимает ключ API для чтения, но не для изменения цен "
        "({answer}). Продавец создаёт в личном кабинете Ozon (Настройки → Seller API) ключ с "
        "ролью, которой разрешён метод цен /v1/product/import/prices (роль ключа выбирают при "
        "его создании), и записывает его в файл канала ozon_api_key_file; работающий сервис "
        "перечитает его сам. Одна запись пробуется раз в EXCHANGE_RETRY_MAX_DELAY; после "
        "исправления можно выполнить exchange resume",
        "Delivery paused: Ozon accepts the API key for reading but not for changing prices "
        "({answer}). The seller creates a key in the Ozon seller's account (Settings → Seller "
        "API) with a role allowed the prices method /v1/product/import/prices (a key's role is "
        "chosen when it is created) and writes it into the channel's ozon_api_key_file; a "
        "running service reads it again by itself. One write is tried every "
        "EXCHANGE_RETRY_MAX_DELAY; once mended, exchange resume goes on at once",
    ),
    # Where the seller reads the Client-Id (research §1.2: "Client-Id" beside the key, the
    # seller's account, Settings → Seller API); a setting, read when the service starts.
    PauseCause.OZON_CLIENT_ID.value: (
        "Доставка остановлена: Ozon не принял Client-Id ({answer}). Client-Id — номер "
        "продавца, который личный кабинет Ozon показывает рядом с ключом API (Настройки → "
        "Seller API); впишите его в ozon_client_id канала (или EXCHANGE_OZON_CLIENT_ID) и "
        "перезапустите exchange run: работающий сервис читает его только при запуске",
        "Delivery paused: Ozon refused the Client-Id ({answer}). The Client-Id is the "
        "seller's number the Ozon seller's account shows beside the API key (Settings → "
        "Seller API); put it in the channel's ozon_client_id (or EXCHANGE_OZON_CLIENT_ID) "
        "and restart exchange run: a running service reads it only when it starts",
    ),
    PauseCause.BITRIX_LOGIN.value: (
        "Доставка остановлена: сайт не принял пользователя или пароль обмена ({answer}). "
        "Проверьте EXCHANGE_BITRIX_USER и EXCHANGE_BITRIX_PASSWORD; право на обмен даёт "
        "администратор сайта",
        "Delivery paused: the site refused the exchange's user or password ({answer}). Check "
        "EXCHANGE_BITRIX_USER and EXCHANGE_BITRIX_PASSWORD; the site's administrator grants "
        "the right to exchange",
    ),
    PauseCause.TLS.value: (
        "Доставка остановлена: сертификат сайта не доверенный ({answer}). Если его выдал "
        "центр сертификации вашей компании, укажите файл этого центра в "
        "EXCHANGE_SITE_CA_BUNDLE; иначе сообщите тем, кто обслуживает сайт",
        "Delivery paused: the site's certificate is not trusted ({answer}). If your "
        "company's certificate authority issued it, put that authority's file in "
        "EXCHANGE_SITE_CA_BUNDLE; otherwise tell those who run the site",
    ),
    PauseCause.API_NOT_FOUND.value: (
        "Доставка остановлена: по адресу EXCHANGE_SITE_URL нет API магазина ({answer}). "
        "Проверьте адрес; верный адрес API сообщат те, кто обслуживает сайт",
        "Delivery paused: the shop's API is not at EXCHANGE_SITE_URL ({answer}). Check the "
        "address; those who run the site know the right one",
    ),
    PauseCause.WOO_NO_REST_API.value: (
        "Доставка остановлена: по адресу EXCHANGE_WOO_URL нет REST API WooCommerce ни по "
        "/wp-json/, ни по ?rest_route= ({answer}). Проверьте, что EXCHANGE_WOO_URL — домашний "
        "адрес магазина (WordPress → Настройки → Общие) и что плагин WooCommerce включён; "
        "это знает администратор сайта",
        "Delivery paused: WooCommerce's REST API is at neither /wp-json/ nor ?rest_route= of "
        "EXCHANGE_WOO_URL ({answer}). Check that EXCHANGE_WOO_URL is the shop's home address "
        "(WordPress → Settings → General) and that the WooCommerce plugin is active; the "
        "site's administrator knows",
    ),
    PauseCause.WOO_ADDRESS.value: (
        "Доставка остановлена: WooCommerce не принял подпись запроса, потому что "
        "EXCHANGE_WOO_URL — не домашний адрес магазина ({answer}). Запишите в "
        "EXCHANGE_WOO_URL домашний адрес магазина (WordPress → Настройки → Общие → Адрес "
        "сайта, его знает администратор сайта); ключ верный, менять его не нужно",
        "Delivery paused: WooCommerce refused the request's signature because "
        "EXCHANGE_WOO_URL is not the shop's home address ({answer}). Set EXCHANGE_WOO_URL to "
        "the shop's home address (WordPress → Settings → General → Site Address, the site's "
        "administrator knows it); the key is right, keep it",
    ),
    PauseCause.WOO_KEY_MISSING.value: (
        "Доставка остановлена: не задан ключ REST API WooCommerce ({answer}). Администратор "
        "магазина создаёт ключ с правами «Чтение/Запись» (WooCommerce → Настройки → "
        "Дополнительно → REST API); впишите его в EXCHANGE_WOO_KEY и EXCHANGE_WOO_SECRET и "
        "перезапустите exchange run",
        "Delivery paused: WooCommerce's REST API key is not set ({answer}). The shop's "
        "administrator creates a Read/Write key (WooCommerce → Settings → Advanced → REST "
        "API); put it in EXCHANGE_WOO_KEY and EXCHANGE_WOO_SECRET and restart exchange run",
    ),
    PauseCause.BITRIX_LOGIN_MISSING.value: (
        "Доставка остановлена: не заданы пользователь или пароль обмена с сайтом на Битриксе "
        "({answer}). Впишите их в EXCHANGE_BITRIX_USER и EXCHANGE_BITRIX_PASSWORD и "
        "перезапустите exchange run; пользователя с правом на обмен создаёт администратор "
        "сайта",
        "Delivery paused: the exchange's user or password for the Bitrix site is not set "
        "({answer}). Put them in EXCHANGE_BITRIX_USER and EXCHANGE_BITRIX_PASSWORD and restart "
        "exchange run; the site's administrator creates a user with the right to exchange",
    ),
    PauseCause.BROKER.value: (
        "Доставка остановлена: RabbitMQ отказал ({answer}). Проверьте EXCHANGE_RABBITMQ_URL "
        "и EXCHANGE_RABBITMQ_EXCHANGE; права выдаёт администратор RabbitMQ",
        "Delivery paused: RabbitMQ refused ({answer}). Check EXCHANGE_RABBITMQ_URL and "
        "EXCHANGE_RABBITMQ_EXCHANGE; the RabbitMQ administrator grants the rights",
    ),
    # The words the target records (targets/bitrix/target.py: "the latest known prices could not
    # be read: <error>") open the sentence, so that only the error is said beside them.
    PauseCause.KNOWN_PRICES.value: (
        "Доставка остановлена: последние известные цены не прочитаны из базы обмена "
        "({answer}). Пакет на сайт 1С-Битрикс не отправлен: без других видов цен товара "
        "Битрикс удалил бы их. Проверьте базу обмена (EXCHANGE_DATABASE_URL: отвечает ли она, "
        "есть ли место на диске) и журнал exchange run; это знает администратор сервера "
        "обмена. Один пакет пробуется раз в EXCHANGE_RETRY_MAX_DELAY; после исправления можно "
        "выполнить exchange resume",
        "Delivery paused: the latest known prices could not be read from the exchange's "
        "database ({answer}). The package to the 1C-Bitrix site is not sent: without the "
        "product's other price types Bitrix would delete them. Check the exchange's database "
        "(EXCHANGE_DATABASE_URL: does it answer, is there disk space) and the log of exchange "
        "run; the exchange server's administrator knows. One package is tried every "
        "EXCHANGE_RETRY_MAX_DELAY; once mended, exchange resume goes on at once",
    ),
    PauseCause.MARKETPLACE_KEY.value: (
        "Доставка остановлена: маркетплейс не принял ключ API или у ключа нет роли, которая "
        "меняет цены ({answer}). Продавец создаёт ключ в личном кабинете маркетплейса (для "
        "Ozon: Настройки → Seller API, роль с правом на цены; ключ действует полгода; для "
        "Яндекс Маркета: ключ Api-Key с доступом pricing или all-methods) и "
        "записывает его в файл ключа канала (ozon_api_key_file, ym_api_key_file); работающий "
        "сервис перечитает его сам",
        "Delivery paused: the marketplace refused the API key, or the key has no role that "
        "may change prices ({answer}). The seller creates a key in the marketplace's seller "
        "account (for Ozon: Settings → Seller API, a role allowed to set prices; a key lasts "
        "six months; for Yandex Market: an Api-Key with the pricing or all-methods "
        "access) and writes it into the channel's key file (ozon_api_key_file, "
        "ym_api_key_file); a running service reads it again by itself",
    ),
    # The one marketplace whose key was refused (``domain.pause.KEY_REFUSED_BY_TARGET``):
    # its own cabinet and its own key file, never the other's.
    PauseCause.OZON_KEY.value: (
        "Доставка остановлена: Ozon не принял ключ API или у ключа нет роли, которая меняет "
        "цены ({answer}). Продавец создаёт ключ в личном кабинете Ozon (Настройки → Seller "
        "API, роль с правом на цены; ключ действует полгода) и записывает его в файл ключа "
        "канала ozon_api_key_file; работающий сервис перечитает его сам",
        "Delivery paused: Ozon refused the API key, or the key has no role that may change "
        "prices ({answer}). The seller creates a key in the Ozon seller's account (Settings → "
        "Seller API, a role allowed to set prices; a key lasts six months) and writes it into "
        "the channel's key file ozon_api_key_file; a running service reads it again by itself",
    ),
    # Ozon's two refusals that no new key mends (research §1.2): its offer (оферта) not
    # accepted ("Offer not signed"), and a key bound to other IP addresses.
    PauseCause.OZON_OFFER.value: (
        "Доставка остановлена: Ozon отказывает, пока продавец не принял действующую оферту Ozon "
        "({answer}). Владелец кабинета принимает новую оферту в личном кабинете продавца Ozon; "
        "ключ API менять не нужно. Сервис спрашивает Ozon снова "
        "раз в EXCHANGE_RETRY_MAX_DELAY; после принятия оферты можно выполнить exchange resume",
        "Delivery paused: Ozon refuses requests until the seller accepts Ozon's current offer "
        "(оферта) ({answer}). The owner of the seller's account accepts the new offer in the "
        "Ozon seller's account; the API key stays as it is. Ozon is "
        "asked again once every EXCHANGE_RETRY_MAX_DELAY; once the offer is accepted, exchange "
        "resume goes on at once",
    ),
    PauseCause.OZON_KEY_IP.value: (
        "Доставка остановлена: ключ API Ozon разрешён только для других IP-адресов "
        "({answer}). Продавец добавляет внешний IP-адрес этого сервера в список разрешённых "
        "адресов ключа в личном кабинете Ozon (Настройки → Seller API) или снимает "
        "ограничение; ключ в ozon_api_key_file менять не нужно. Сервис спрашивает Ozon снова "
        "раз в EXCHANGE_RETRY_MAX_DELAY; после исправления можно выполнить exchange resume",
        "Delivery paused: the Ozon API key is allowed only from other IP addresses "
        "({answer}). The seller adds this server's public IP address to the key's allowed "
        "addresses in the Ozon seller's account (Settings → Seller API), or lifts the "
        "restriction; the key in ozon_api_key_file stays as it is. Ozon is asked again once every "
        "EXCHANGE_RETRY_MAX_DELAY; once mended, exchange resume goes on at once",
    ),
    PauseCause.YM_KEY.value: (
        "Доставка остановлена: Яндекс Маркет не принял ключ API или у ключа нет доступа к "
        "ценам ({answer}). Владелец или менеджер кабинета продавца на Маркете создаёт ключ "
        "Api-Key с доступом pricing или all-methods (значок аккаунта → Настройки → API и "
        "модули → Токены авторизации) и записывает его в файл ключа канала ym_api_key_file; "
        "работающий сервис перечитает его сам",
        "Delivery paused: Yandex Market refused the API key, or the key has no access to "
        "prices ({answer}). The owner or a manager of the seller's cabinet on the Market "
        "creates an Api-Key with the pricing or all-methods access (the account icon → "
        "Settings → APIs and modules → Authorization tokens) and writes it into the channel's "
        "key file ym_api_key_file; a running service reads it again by itself",
    ),
    # Wildberries' own (research §2.2, docs/marketplaces.md "The token and its rights"): the
    # owner of the seller's cabinet makes the token, with the Prices category and write access.
    PauseCause.WB_TOKEN.value: (
        "Доставка остановлена: Wildberries не принял токен ({answer}): токен просрочен, "
        "отозван или без категории «Цены и скидки». Владелец кабинета продавца Wildberries "
        "создаёт токен (Профиль → Настройки → Доступ к API) с категорией «Цены и скидки» и "
        "доступом на чтение и запись и записывает его в файл канала wb_token_file; работающий "
        "сервис перечитает его сам",
        "Delivery paused: Wildberries refused the token ({answer}): expired, withdrawn, or "
        "without the «Цены и скидки» (Prices and discounts) category. The owner of the "
        "Wildberries seller's cabinet creates a token (Profile → Settings → API access) with "
        "the Prices and discounts category and read and write access, and writes it into the "
        "channel's wb_token_file; a running service reads it again by itself",
    ),
    PauseCause.WB_READ_ONLY_TOKEN.value: (
        "Доставка остановлена: токен Wildberries только для чтения ({answer}). Владелец "
        "кабинета продавца Wildberries создаёт токен (Профиль → Настройки → Доступ к API) с "
        "категорией «Цены и скидки» и доступом на чтение и запись и записывает его в файл "
        "канала wb_token_file; новый токен в файле пробуется сразу (одна запись), тот же — "
        "одной записью раз в EXCHANGE_RETRY_MAX_DELAY; exchange resume продолжает доставку "
        "сразу",
        "Delivery paused: the Wildberries token is read-only ({answer}). The owner of the "
        "Wildberries seller's cabinet creates a token (Profile → Settings → API access) with "
        "the Prices and discounts category and read and write access, and writes it into the "
        "channel's wb_token_file; a new token in the file is tried at once (one write), the "
        "same one with one write every EXCHANGE_RETRY_MAX_DELAY; exchange resume goes on at "
        "once",
    ),
    PauseCause.OTHER.value: (
        "Доставка остановлена: сайт отказал ({answer}). Исправьте то, что называет ответ, "
        "или сообщите тем, кто обслуживает сайт; доставка продолжится сама, когда сайт "
        "примет запрос",
        "Delivery paused: the site refused ({answer}). Mend what the answer names, or tell "
        "those who run the site; delivery goes on by itself once the site accepts",
    ),
}


def _note(v: dict[str, Any], lang: Lang) -> str:
    """An operator's note on pausing, after the sentence: «: “переезд сервера”»; nothing
    without one."""
    note = str(v.get("note") or "").strip()
    return _(": “{note}”", lang).format(note=note) if note else ""


def unserved_words(v: dict[str, Any], lang: Lang) -> str:
    """A registered channel no configured channel serves (``unserved``), said after its name:
    how many wait, and what a person does."""
    return ngettext(
        "{count} delivery waits on it and no configured channel serves it: configure it again "
        "(a channel named {name} in the settings), or, renamed, drop it, which cancels what "
        "waits on it (exchange channels drop {name} --note TEXT), and give the new channel "
        "every current price: exchange channels seed NEW",
        "{count} deliveries wait on it and no configured channel serves it: configure it "
        "again (a channel named {name} in the settings), or, renamed, drop it, which cancels "
        "what waits on it (exchange channels drop {name} --note TEXT), and give the new "
        "channel every current price: exchange channels seed NEW",
        v["count"],
        lang,
    ).format(count=v["count"], name=v["channel"])


def unmanned_words(v: dict[str, Any], lang: Lang) -> str:
    """A channel with work due and no live worker serving it (``unmanned``), said after its
    name: how many wait, and what a person does: start a worker for it."""
    return ngettext(
        "{count} delivery waits on it and no worker delivering to it is live: nothing goes to "
        "it. Start one for it: exchange run --channel {name} (or exchange run, which delivers "
        "to every configured channel)",
        "{count} deliveries wait on it and no worker delivering to it is live: nothing goes to "
        "it. Start one for it: exchange run --channel {name} (or exchange run, which delivers "
        "to every configured channel)",
        v["count"],
        lang,
    ).format(count=v["count"], name=v["channel"])


def no_channel_words(v: dict[str, Any], lang: Lang) -> str:
    """Messages of a kind no channel takes (``db.channels.kept_nowhere``): how many, that
    nothing delivers them, and what a person does: a channel that takes the kind, then its
    seed from the oldest of them (``--from``: strictly ordered kinds are otherwise given only
    what was accepted after the channel's registration, contract 13). ``taken``: a channel
    takes the kind now, and only its seed is left to do."""
    kind = v["kind"]
    said = kind if lang == "en" else f"{code_name('kind', kind, lang)} ({kind})"
    if v.get("taken"):  # a channel takes the kind now: they still wait for its seed
        return ngettext(
            "{count} message of kind {kind} is kept and delivered nowhere: no channel took "
            "that kind when it was accepted (the oldest {oldest}), and the channel that takes "
            "it now was not given it. Give it to that channel: exchange channels seed NAME "
            "--from {oldest}",
            "{count} messages of kind {kind} are kept and delivered nowhere: no channel took "
            "that kind when they were accepted (the oldest {oldest}), and the channel that "
            "takes it now was not given them. Give them to that channel: exchange channels "
            "seed NAME --from {oldest}",
            v["count"],
            lang,
        ).format(count=v["count"], kind=said, oldest=v["oldest"])
    return ngettext(
        "{count} message of kind {kind} is kept and delivered nowhere: no channel takes "
        "that kind (the oldest {oldest}). Configure a channel whose takes include {code}, "
        "then give it them: exchange channels seed NAME --from {oldest}",
        "{count} messages of kind {kind} are kept and delivered nowhere: no channel takes "
        "that kind (the oldest {oldest}). Configure a channel whose takes include {code}, "
        "then give it them: exchange channels seed NAME --from {oldest}",
        v["count"],
        lang,
    ).format(count=v["count"], kind=said, code=kind, oldest=v["oldest"])


def _behind_words(v: dict[str, Any], lang: Lang) -> str:
    """The part of the ``withheld`` sentence about the held prices a newer price waits behind
    (``ops.withheld_behind``; Wildberries' price quarantine): not to be confirmed, as the
    newer price's history says; "" when there are none."""
    behind = int(v.get("behind") or 0)
    if not behind:
        return ""
    return "; " + _("but {what}", lang).format(what=not_to_confirm(behind, lang))


_EN: dict[str, Callable[[dict[str, Any]], str]] = {
    "quarantine": lambda v: f"{v['count']} message(s) in quarantine",
    "withheld": lambda v: (
        f"{v['count']} price(s) taken by the channel and withheld from buyers until a person "
        + (
            # research §2.4: WB's API releases nothing; its cabinet does
            "confirms them in the Wildberries seller's cabinet (Цены и скидки → Карантин цен): "
            "Wildberries has no release through its API"
            if v.get("target") == "wildberries"
            else "confirms them: exchange withheld release, or the channel's own cabinet"
        )
        + _behind_words(v, "en")
    ),
    "breaker": lambda v: (
        "the site keeps failing: delivery waits and goes on by itself once it answers; if it "
        "lasts, tell those who run the site"
    ),
    "operator": lambda v: (
        f"delivery paused by operator {v['operator']} since {v.get('since', '?')}" + _note(v, "en")
    ),
    "unreachable": lambda v: (
        f"the site has not answered since {v['since']}: delivery goes on by itself once "
        "it answers; if it lasts, check that the site is up, or tell those who run it"
    ),
    "gap": lambda v: f"{v['count']} aggregate(s) wait for a missing version (a gap)",
    # after the channel named (``say`` puts it before the sentence)
    "unserved": lambda v: unserved_words(v, "en"),
    "no_channel": lambda v: no_channel_words(v, "en"),
    "onec": lambda v: (
        f"the latest 1C exchange failed ({v['file'] or 'no file'}: {v['reason']}); "
        "none has succeeded since"
    ),
    "no_live_worker": lambda v: (
        "work waits and no worker is live: nothing is being delivered (is exchange run running?)"
    ),
    # after the channel named (``say`` puts it before the sentence)
    "no_live_worker_channel": lambda v: unmanned_words(v, "en"),
    "source": lambda v: (
        f"the broker source is not consuming (worker {v['worker']}, since {v['since']}): "
        f"{v['reason']}; it tries again by itself"
    ),
    "sign_in_1c": lambda v: (
        f"1C cannot sign in: {v['count']} wrong user or password since {v['since']}, "
        "none accepted since; the 1C administrator sets in 1C's exchange settings the user "
        "and password of EXCHANGE_1C_USER and EXCHANGE_1C_PASSWORD"
    ),
    "sign_in_intake": lambda v: (
        f"the JSON intake refused {v['count']} token(s) since {v['since']}, none "
        "accepted since; whoever runs the sending system sets the token of "
        "EXCHANGE_INTAKE_TOKEN there"
    ),
}
_RU: dict[str, Callable[[dict[str, Any]], str]] = {
    "quarantine": lambda v: (
        "в карантине "
        + ngettext("{count} message", "{count} messages", v["count"], "ru").format(**v)
    ),
    "withheld": lambda v: (
        "канал принял, но придержал от покупателей до подтверждения человеком: "
        + ngettext("{count} message", "{count} messages", v["count"], "ru").format(**v)
        + (
            " (в кабинете продавца Wildberries: Цены и скидки → Карантин цен; выпустить через "
            "API Wildberries нельзя)"
            if v.get("target") == "wildberries"
            else " (exchange withheld release или кабинет канала)"
        )
        + _behind_words(v, "ru")
    ),
    "breaker": lambda v: (
        "сайт раз за разом отвечает ошибками: доставка ждёт и продолжится сама, когда он "
        "ответит; если это длится долго, сообщите тем, кто обслуживает сайт"
    ),
    "operator": lambda v: (
        f"доставка остановлена оператором {v['operator']} с {v.get('since', '?')}" + _note(v, "ru")
    ),
    "unreachable": lambda v: (
        f"сайт не отвечает с {v['since']}: доставка продолжится сама, когда он ответит; "
        "если это длится долго, проверьте, работает ли сайт, или сообщите тем, кто его "
        "обслуживает"
    ),
    "gap": lambda v: ngettext(
        "{count} aggregate waits for a missing version",
        "{count} aggregates wait for a missing version",
        v["count"],
        "ru",
    ).format(**v),
    "unserved": lambda v: unserved_words(v, "ru"),
    "no_channel": lambda v: no_channel_words(v, "ru"),
    "onec": lambda v: (
        f"последний обмен с 1С завершился ошибкой ({v['file'] or 'без файла'}: "
        f"{inside_words(v['reason'] or '', 'ru')}), успешных с тех пор не было"
    ),
    "no_live_worker": lambda v: (
        "работа ждёт, а ни один обработчик не работает: ничего не "
        "доставляется (запущен ли exchange run?)"
    ),
    "no_live_worker_channel": lambda v: unmanned_words(v, "ru"),
    "source": lambda v: (
        f"сообщения из брокера не принимаются (обработчик {v['worker']}, с {v['since']}): "
        f"{v['reason']}; обработчик пробует снова сам"
    ),
    "sign_in_1c": lambda v: (
        "1С не может войти: "
        + ngettext("{count} wrong sign-in", "{count} wrong sign-ins", v["count"], "ru").format(**v)
        + f" с {v['since']}, успешных с тех пор не было. Администратор 1С указывает в "
        "настройках обмена 1С того же пользователя и тот же пароль, что в "
        "EXCHANGE_1C_USER и EXCHANGE_1C_PASSWORD"
    ),
    "sign_in_intake": lambda v: (
        "JSON-приём не принял токен: "
        + ngettext("{count} refusal", "{count} refusals", v["count"], "ru").format(**v)
        + f" с {v['since']}, успешных входов с тех пор не было. Тот, кто ведёт "
        "отправляющую систему, указывает в ней токен из EXCHANGE_INTAKE_TOKEN"
    ),
}


def _hm(iso: str | datetime | None, zone: tzinfo | str = "UTC") -> str:
    """A time of a cause's sentence, to the minute in ``zone``, the zone named:
    ``2026-12-05 07:50 MSK``; ``?`` unknown; text that is no time as it is."""
    return local_time(iso, zone, seconds=False) if iso else "?"


@dataclass
class Attention:
    """What ``status`` adds to the figures: the intake, the failing 1C exchange, the causes."""

    intake: dict[str, Any]
    onec_failed: dict[str, Any] | None
    causes: list[Cause]
    # Per way in, sign-ins refused in the last hour with no success since (contract 15).
    refused_sign_ins: dict[str, dict[str, Any]] = field(default_factory=dict)


def attention(
    connection: Connection,
    staging_connection: Connection | None,
    figures: Any,
    now: datetime,
    kinds: KindPolicies,
    live_within: float,
    unwritten: Iterable[sign_ins.Refused] = (),
    channel: Channel = None,
    by_channel: dict[str, dict[str, Any]] | None = None,
    configured: Collection[str] | None = None,
) -> Attention:
    """What needs a person, from ``status``'s figures (read with the same ``live_within`` and
    ``channel``): the one reading ``exchange status`` and the dashboard share. ``configured``:
    the channels this process has configured by name, given where they are named (with
    EXCHANGE_CHANNELS): a registered channel none of them serves, with work waiting on it, is
    a cause (``unserved``); None: the one channel of a one-target installation serves
    whatever is registered."""
    taken = intake(staging_connection or connection, now)
    failing = onec_failing(connection)
    taking = (
        None
        if configured is None
        else [name for name in configured if name not in control.paused_channels(connection)]
    )
    stopped = not any(w["live"] for w in figures.workers) and work_waits(
        connection, taken, now, kinds, live_within, channel, taking
    )
    refused = sign_ins.refused_lately(connection, now, unwritten)
    found = causes(
        figures,
        onec_failed=failing,
        no_live_worker=stopped,
        refused_sign_ins=refused,
        by_channel=by_channel,
        unserved_channels=(
            unserved(connection, configured, channel) if configured is not None else None
        ),
        untaken=kept_nowhere(
            connection, (kind for kind, _policy in kinds.policies), coalescing=kinds.latest_wins
        ),
        unmanned_channels=(
            unmanned(connection, by_channel, now, kinds, live_within, taking)
            if by_channel is not None and not stopped
            else None
        ),
        delivered=last_deliveries(connection) if by_channel is not None else None,
    )
    return Attention(intake=taken, onec_failed=failing, causes=found, refused_sign_ins=refused)
