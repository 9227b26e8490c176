"""The workbench's core: its configuration, sessions, CSRF, language and rendering; the
pages, sign-in and actions (``pages``, ``signin``, ``actions``) build on it."""

from __future__ import annotations

import asyncio
import hmac
import re
import zoneinfo
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar

import jinja2
from aiohttp import web
from markupsafe import Markup, escape
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.domain.clock import ensure_utc, local_time
from exchange.domain.policy import KindPolicies
from exchange.domain.states import State
from exchange.i18n import number, percent
from exchange.ops import find as finder
from exchange.ops import operators
from exchange.ops.backlog import estimate_kind
from exchange.ops.status import human_age, pace_words, requests_per_second
from exchange.report.mask import Redactor
from exchange.report.words import (
    NEWER_GOES,
    NEWER_HELD,
    NEWER_WITHHELD,
    SUPERSEDED,
    advice_words,
    advised,
    next_check,
    own_advice,
)
from exchange.web.config import WebConfig
from exchange.web.keys import DEVICE_MAX_AGE_S, Signer
from exchange.web.sign_ins import SignIns
from exchange.web.throttle import Limits, Throttle
from exchange.words import (
    WORDS,
    Lang,
    event_said,
    messages_counted,
    money,
    on_marketplace,
    page_steps,
    page_words,
    source_words,
    state_said,
    unset_fact,
    versions_counted,
    word,
)
from exchange.words import name as code_name

SESSION_COOKIE = "exchange_wb"
DEVICE_COOKIE = "exchange_wb_device"  # a browser that signed in before (``signin``)
LOGIN_COOKIE = "exchange_wb_login"  # what the sign-in form's CSRF token is bound to (``signin``)
LANG_COOKIE = "exchange_lang"


def page_lang(request: web.Request) -> Lang:
    """The language of a page a person reads: ``?lang=``, else the workbench's cookie, else
    Russian (the workbench's default, whatever the browser's ``Accept-Language``)."""
    asked = request.query.get("lang") or request.cookies.get(LANG_COOKIE)
    return "en" if asked == "en" else "ru"


CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; script-src 'none'"
)
EXCHANGES_SHOWN = 200
# The bulk actions' forms: they carry the ids they act on (a larger body limit than a form's).
ACTION_PATHS = ("/action/preview", "/action/confirm")
HTTP_REASON = re.compile(r"http-[45][0-9][0-9]")
# Threads that verify passwords (argon2 is slow on purpose): sign-ins never take the threads
# that reach the database, and at most this many hashes are worked at once.
ARGON2_THREADS = 2
R = TypeVar("R", bound=web.StreamResponse)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Text no database can hold: PostgreSQL refuses a NUL in text, and a lone surrogate (from a
# form sent in another encoding) has no UTF-8 at all. A request that carries either in any of
# its fields is refused before a handler reads it (issue 33 item 9: they answered 500).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(value: object) -> bool:
    """Whether a request's field is not text a database can hold (a NUL, a lone surrogate),
    or not text at all (a file or bytes in a multipart form: no workbench form has one)."""
    return not isinstance(value, str) or _UNSTORABLE.search(value) is not None


def reasons_on(
    rows: list[dict[str, Any]], targets: dict[str, str]
) -> list[tuple[str, str | None, str | None]]:
    """The reasons of a page's rows, each once, with its marketplace's target where its channel
    is a marketplace's (``words.on_marketplace``: its advice is the marketplace's), by reason.
    A reason whose advice is one text on several channels (``report.words.advice_words``: three
    marketplaces' unmapped price type) is said once, never once per channel. The third: the
    advice of its own of the rows that take one (``report.words.own_advice``): those of which
    1C has sent a newer version since, where that changes it (``NEWER_GOES``, ``NEWER_HELD``,
    ``NEWER_WITHHELD``: a price invalid for its channel is cancelled then), and those
    superseded after quarantine (``SUPERSEDED``, as their message page says it: review
    rev36b item 2); None for the others. Said beside the reason's own (seller review 35: the
    list advised retry)."""
    found = set()
    for row in rows:
        target = targets.get(row.get("channel") or "")
        target = target if on_marketplace(target) else None
        found.add((row["reason"], target, row_newer(row, target)))
    said: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
    for reason, target, newer in sorted(
        found, key=lambda three: (three[0] or "", three[2] or "", three[1] or "")
    ):
        advice = advice_words(reason, target, **advised(newer))
        said.setdefault((reason, advice), (reason, target, newer))
    return list(said.values())


def row_newer(row: dict[str, Any], target: str | None) -> str | None:
    """``report.words.own_advice`` of a row of the quarantine's list (``ops.quarantine.
    entry``): the one decision its row's words and the page's advice share. A quarantined
    row's only (a list by state reads ``superseded_after_quarantine`` of every row: a
    delivered one is at its cursor)."""
    if row.get("state", State.QUARANTINED.value) != State.QUARANTINED.value:
        return None
    return own_advice(
        row.get("reason"),
        target,
        bool(row.get("newer_version_sent")),
        superseded=bool(row.get("superseded_after_quarantine")),
        held=bool(row.get("newer_version_held")),
        withheld=bool(row.get("newer_version_withheld")),
    )


# What a row of the quarantine's list says under its reason, and «Что делать дальше» beside
# it, of a row's advice of its own (``row_newer``): the words' key, and the mark's class.
OWN_NOTES: dict[str, tuple[str, str]] = {
    NEWER_GOES: ("newer_sent", "newer"),
    NEWER_HELD: ("newer_held", "newer"),
    NEWER_WITHHELD: ("newer_withheld", "newer"),
    SUPERSEDED: ("superseded_row", "superseded"),
}


class Who:
    def __init__(self, name: str, role: str, session: str) -> None:
        self.name, self.role, self.session = name, role, session

    @property
    def can_act(self) -> bool:
        return self.role == "operator"


def _known_reasons() -> list[str]:
    return finder.known_reasons()


class Core:
    def __init__(
        self,
        config: WebConfig,
        engine: Engine,
        key: str,
        *,
        staging_engine: Engine | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.staging_engine = staging_engine
        self.kinds = KindPolicies.of(config.kinds)
        # Every decision of the workbench reads its time here (``WebConfig.clock``).
        clock = self.clock = config.clock
        self.signer = Signer(key, "workbench-session", clock)
        self._csrf = Signer(key, "workbench-csrf", clock)
        self._previews = Signer(key, "workbench-preview", clock)
        self._devices = Signer(key, "workbench-device", clock, max_age=DEVICE_MAX_AGE_S)
        self.throttle = Throttle(
            Limits(delay=config.login_delay, delay_max=config.login_delay_max), config.monotonic
        )
        # Refused sign-ins as a summary a minute (contract 15; ``server.build_app`` shares one).
        self.sign_ins = SignIns(engine, clock, config.monotonic)
        self._argon2 = ThreadPoolExecutor(ARGON2_THREADS, thread_name_prefix="exchange-argon2")
        # The known devices' lane has a thread of its own: strangers' guesses keeping the two
        # above busy never queue an operator's sign-in behind them.
        self._argon2_devices = ThreadPoolExecutor(1, thread_name_prefix="exchange-argon2-device")
        operators.prepare()  # an unknown name's first sign-in costs what a wrong password does
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("exchange.web", "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        # An empty value is «—» on every page (the fresh review: «Старейшее недоставленное -»).
        self.env.filters["age"] = jinja2.pass_context(
            lambda context, seconds: (
                EMPTY if seconds is None else human_age(seconds, context["lang"])
            )
        )
        self.env.filters["ago"] = jinja2.pass_context(
            lambda context, value: _ago(context, value, clock.now())
        )
        zone = self.zone = zoneinfo.ZoneInfo(config.display_tz)
        self.env.filters["when"] = lambda value: _when(value, zone)
        # A list's time: the absolute time with how long ago beside it (issue 24 item 8).
        self.env.filters["when_ago"] = jinja2.pass_context(
            lambda context, value: _when_ago(context, value, clock.now(), zone)
        )
        # A price as a price: «1 234,50 ₽» (issue 34 item 9).
        self.env.filters["money"] = jinja2.pass_context(
            lambda context, price, currency=None: money(price, currency, context["lang"])
        )
        # When a delayed message goes again: «через 40 с», or that it is due (item 6).
        self.env.filters["due"] = jinja2.pass_context(
            lambda context, value: _due(context, value, clock.now())
        )
        # A 1C package's source_ref in the page's language (issue 34 item 7).
        self.env.filters["source"] = jinja2.pass_context(
            lambda context, ref: source_words(ref, context["lang"])
        )
        self.env.filters["wbr"] = wbr
        self.env.filters["grouped"] = grouped
        self.env.globals["zone"] = config.display_tz
        self.env.globals["words"] = WORDS
        self.env.globals["reasons_on"] = reasons_on
        self.env.globals["row_newer"] = row_newer
        self.env.globals["own_notes"] = OWN_NOTES

    # -- sessions, CSRF, language --------------------------------------------------------

    def close(self) -> None:
        self._argon2.shutdown(wait=False, cancel_futures=True)
        self._argon2_devices.shutdown(wait=False, cancel_futures=True)

    def csrf(self, session: str) -> str:
        return self._csrf.tag(f"csrf|{session}")

    def _who(self, request: web.Request) -> Who | None:
        value = request.cookies.get(SESSION_COOKIE)
        token = self.signer.verify(value) if value else None
        if token is None:
            return None
        with transaction(self.engine, read_only=True) as connection:
            found = operators.session_of(connection, token, self.clock.now())
        return Who(found[0], found[1], token) if found else None

    def _secure_cookies(self, request: web.Request) -> bool:
        # Behind the proxy the browser speaks TLS to the proxy (contract 9), not to us.
        return request.secure or self.config.behind_proxy

    def _lang(self, request: web.Request) -> Lang:
        return page_lang(request)

    def _render(
        self, request: web.Request, template: str, who: Who | None, status: int = 200, **data: Any
    ) -> web.Response:
        lang = self._lang(request)

        def t(key: str, **values: Any) -> str:
            text = word(key, lang)
            return text.format(**values) if values else text

        body = self.env.get_template(template).render(
            t=t,
            pace=lambda figures, channel=None: pace_words(figures, lang, channel),
            # a reason of a marketplace's channel (its ``target``) in the marketplace's words
            n=lambda group, code, target=None: code_name(group, code, lang, target),
            # a delivery's state; a delayed one waiting for its channel as a wait
            # (``words.state_said``, ``exchange.ops.waits``), never as a retry
            # a released attempt sent with its answer unknown said as sent (words.event_said)
            event_n=lambda event, detail=None: event_said(event, detail, lang),
            state_n=lambda state, waits=False, on_1c=False, on_person=False: state_said(
                state, lang, awaiting=bool(waits), on_1c=bool(on_1c), on_person=bool(on_person)
            ),
            # a detail as a page says it: a button where the command line names a command
            said=lambda text: page_words(text, lang),
            # what the estimate is: a hold's bound, the last delayed delivery's due time, the
            # pace (``ops.backlog.estimate_kind``, the rule ``status`` shares)
            estimate_kind=estimate_kind,
            unset=lambda fact, attempted: unset_fact(fact, attempted, lang),
            messages_n=lambda count: messages_counted(count, lang),
            # numbers as the page's language writes them (CLDR): «4,3 %», «1 запрос/с»
            pct=lambda share: percent(share, lang),
            num=lambda value: number(value, lang),
            rps=lambda rate: requests_per_second(rate, lang),
            versions_n=lambda count: versions_counted(count, lang),
            # What to do next, per reason: the report's words (one text for both).
            # ``newer``: ``report.words.own_advice``'s (``NEWER_GOES``, ``NEWER_HELD``,
            # ``NEWER_WITHHELD``, ``SUPERSEDED``)
            next_step=lambda reason, superseded=False, target=None, newer=None: next_check(
                reason,
                lang,
                steps=page_steps(lang),
                target=target,
                **{**advised(newer), "superseded": superseded or newer == SUPERSEDED},
            ),
            lang=lang,
            who=who,
            csrf=self.csrf(who.session) if who else "",
            path=request.path,
            # each channel's target by its name, where a page read them (``channel_targets``):
            # a marketplace's reasons and advice in its own words (``words.on_marketplace``)
            **{"targets": {}, **data},
        )
        response = web.Response(text=body, content_type="text/html", status=status)
        if "lang" in request.query:
            response.set_cookie(
                LANG_COOKIE,
                lang,
                max_age=365 * 86400,
                httponly=True,
                samesite="Strict",
                secure=self._secure_cookies(request),
            )
        return _secure(response)

    def _guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the one check every workbench route shares: the address's query
        and path parts and a POST's form fields are text a database can hold, and the form
        can be read at all (bytes that are not its charset, a charset Python does not know);
        otherwise a clear 400 in the page's language, never a 500."""

        async def wrapped(request: web.Request) -> web.StreamResponse:
            fields: list[object] = [*request.query.values(), *request.match_info.values()]
            if request.method == "POST":
                try:
                    fields += (await request.post()).values()
                except (ValueError, LookupError):  # UnicodeDecodeError is a ValueError
                    fields.append(None)
            if any(unstorable(field) for field in fields):
                return self._render(
                    request,
                    "error.html",
                    None,
                    status=400,
                    message=word("bad_text", self._lang(request)),
                )
            return await handler(request)

        return wrapped

    async def message_page(
        self,
        request: web.Request,
        who: Who,
        message_id: str,
        *,
        status: int = 200,
        error: str | None = None,
        note: str = "",
        done: str | None = None,
    ) -> web.StreamResponse:
        """A message's page, which an action on it shows again (``pages.Pages`` draws it)."""
        raise NotImplementedError

    def _page(
        self, handler: Callable[[web.Request, Who], Awaitable[web.StreamResponse]]
    ) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            who = await asyncio.to_thread(self._who, request)
            if who is None:
                raise web.HTTPSeeOther("/login")
            return await handler(request, who)

        return wrapped

    def _action(
        self,
        handler: Callable[[web.Request, Who, Any], Awaitable[web.StreamResponse]],
        *,
        operator_only: bool = True,
    ) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            who = await asyncio.to_thread(self._who, request)
            if who is None:
                return self._render(
                    request,
                    "error.html",
                    None,
                    status=403,
                    message=word("session_ended", self._lang(request)),
                )
            form = await request.post()
            token = str(form.get("csrf", ""))
            if not hmac.compare_digest(token.encode(), self.csrf(who.session).encode()):
                return self._render(
                    request,
                    "error.html",
                    who,
                    status=403,
                    message=word("form_stale", self._lang(request)),
                )
            if operator_only and not who.can_act:
                return self._render(
                    request,
                    "error.html",
                    who,
                    status=403,
                    message=word("forbidden", self._lang(request)),
                )
            return await handler(request, who, form)

        return wrapped


_CONTENT_TYPES = {
    "csv": "text/csv",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
    "json": "application/json",
}


def _masked(payload: str | None, config: WebConfig) -> str:
    """The payload as the report shows it (contract 8): the configured sensitive fields and
    every secret masked by the report's one rule (``report.mask.Redactor``)."""
    if payload is None:
        return ""
    shown, _ = Redactor(config.report_mask_fields, config.report_secrets).payload(payload)
    return shown


# What a page shows for a value that is not there.
EMPTY = "—"


def _when(value: str | datetime | None, zone: tzinfo = UTC) -> str:
    """An ISO time as ``2026-11-30 08:00:00 UTC``: every page in one zone (EXCHANGE_DISPLAY_TZ),
    to the second (never microseconds)."""
    return local_time(value, zone)


def _when_ago(context: Any, value: str | datetime | None, now: datetime, zone: tzinfo = UTC) -> str:
    """«2026-11-30 08:00:00 MSK (5 мин назад)»: the absolute time, and its age at ``now``."""
    if not value:
        return EMPTY
    moment = value.isoformat() if isinstance(value, datetime) else value
    return f"{_when(value, zone)} ({_ago(context, moment, now)})"


# Where an id, a SKU, an aggregate or a file name may break (issue 24 item 9): after these
# characters and at spaces, never inside a word («SKU-0001/retail» breaks as «SKU-0001/»
# «retail»; 1C's «guid#guid» after its dashes and its «#»).
_BREAKS = r"/.\-_:#"  # a regular expression's character class: ``-`` escaped
_BREAK_AFTER = re.compile(rf"(?<=[{_BREAKS}])(?=.)")
# A run longer than this with none of those places (a 96-letter Cyrillic SKU) is marked to
# wrap anywhere, only when nothing else fits (``.run`` in workbench.css); a shorter word (a
# message_id's 24-digit hash, a guid's 12 digits) always stays whole and keeps its column at
# least its width.
LONG_RUN = 24
_LONG = re.compile(rf"[^\s{_BREAKS}]{{{LONG_RUN + 1},}}")


def wbr(value: object) -> Markup:
    """The text escaped, with ``<wbr>`` after each ``/ . - _ : #`` and each run longer than
    ``LONG_RUN`` in a ``<span class="run">``: empty or plain elements, so the text a person
    copies is the id itself (never a zero-width space). The places are found in the text
    before escaping: the ``#`` of an entity such as ``&#34;`` is never split."""
    text = "" if value is None else str(value)
    return Markup("<wbr>").join(_runs(part) for part in _BREAK_AFTER.split(text))


def _runs(text: str) -> Markup:
    out, done = [], 0
    for run in _LONG.finditer(text):
        out += [escape(text[done : run.start()]), Markup('<span class="run">%s</span>') % run[0]]
        done = run.end()
    return Markup("").join([*out, escape(text[done:])])


def grouped(count: int) -> str:
    """«54 210»: thousands apart, the gap never broken."""
    return f"{count:,}".replace(",", "\u00a0")


def _ago(context: Any, value: str | None, now: datetime) -> str:
    """How long before ``now`` an ISO time was, in the page's language («5 мин назад»)."""
    if not value:
        return ""
    then = ensure_utc(datetime.fromisoformat(value))
    age = human_age((now - then).total_seconds(), context["lang"])
    return f"{age} назад" if context["lang"] == "ru" else f"{age} ago"


def _due(context: Any, value: str | None, now: datetime) -> str:
    """How long until an ISO time, in the page's language («через 40 с»); «уже пора» once it
    has come (the message waits for a worker to take it)."""
    if not value:
        return EMPTY
    seconds = (ensure_utc(datetime.fromisoformat(value)) - now).total_seconds()
    lang = context["lang"]
    if seconds <= 0:
        return word("due_now", lang)
    return word("due_in", lang).format(age=human_age(seconds, lang))


def _secure(response: R) -> R:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
    return response
