"""The operators' workbench (contract 11): server-rendered pages at ``/`` of ``exchange serve``.

Jinja2 renders every page with autoescaping on for all templates, so a SKU, a payload or a
site's answer with markup, a formula or a script is shown as text; the pages carry no script
at all and a Content-Security-Policy of ``script-src 'none'`` says so to the browser, which
makes an injected script inert even if escaping were ever missed. Interaction is plain HTML
forms (a preview page before every action), so nothing is built or fetched at install.

Sessions are the signed cookies of ``keys.Signer`` (signed for the workbench only: they open
nothing else), each a row of ``operator_sessions`` read on every request with the operator's
role, so that signing out, a password set again or an operator removed ends it in every serve
process. Every POST carries a CSRF token, an HMAC of the session for that purpose; a viewer's
POST is refused 403. Sign-ins go through ``throttle``: judged before the password is verified,
which happens on threads of its own, never on those that reach the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import secrets
import zoneinfo
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, tzinfo
from importlib import resources
from typing import Any, TypeVar

import jinja2
from aiohttp import web
from markupsafe import Markup
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, messages
from exchange.domain.policy import KindPolicies
from exchange.domain.states import State
from exchange.errors import OperatorError
from exchange.ops import find as finder
from exchange.ops import operators
from exchange.ops.attention import attention
from exchange.ops.exchanges import onec_exchanges
from exchange.ops.notify import last_told
from exchange.ops.quarantine import Filters, PreviewChanged, cancel, list_quarantined, retry
from exchange.ops.status import biography, human_age, pace_words, status
from exchange.queue import control
from exchange.report import collect as report
from exchange.report.mask import Redactor
from exchange.report.model import FORMATS, SUFFIXES
from exchange.report.words import next_check
from exchange.web import chart
from exchange.web.config import WebConfig
from exchange.web.door import client_address
from exchange.web.keys import COOKIE_MAX_AGE_S, Signer
from exchange.web.onec import Refusals
from exchange.web.throttle import Limits, Throttle, Verdict
from exchange.web.words import WORDS, Lang, error_words, messages_counted, word
from exchange.web.words import name as code_name

SESSION_COOKIE = "exchange_wb"
LANG_COOKIE = "exchange_lang"
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


class Who:
    def __init__(self, name: str, role: str, session: str) -> None:
        self.name, self.role, self.session = name, role, session

    @property
    def can_act(self) -> bool:
        return self.role == "operator"


def _known_reasons() -> list[str]:
    return finder.known_reasons()


class Workbench:
    def __init__(
        self,
        config: WebConfig,
        engine: Engine,
        key: str,
        *,
        staging_engine: Engine | None = None,
        onec_refused: Refusals | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        self.staging_engine = staging_engine
        self.onec_refused = onec_refused
        self.kinds = KindPolicies.of(config.kinds)
        self.signer = Signer(key, "workbench-session")
        self._csrf = Signer(key, "workbench-csrf")
        self._previews = Signer(key, "workbench-preview")
        self.throttle = Throttle(Limits(delay=config.login_delay, delay_max=config.login_delay_max))
        self._argon2 = ThreadPoolExecutor(ARGON2_THREADS, thread_name_prefix="exchange-argon2")
        operators.prepare()  # an unknown name's first sign-in costs what a wrong password does
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("exchange.web", "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["age"] = jinja2.pass_context(
            lambda context, seconds: human_age(seconds, context["lang"])
        )
        self.env.filters["ago"] = jinja2.pass_context(_ago)
        zone = self.zone = zoneinfo.ZoneInfo(config.display_tz)
        self.env.filters["when"] = lambda value: _when(value, zone)
        self.env.globals["zone"] = config.display_tz
        self.env.globals["words"] = WORDS

    # -- routes --------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._page(self.dashboard)),
            web.get("/login", self.login_form),
            web.post("/login", self.login),
            web.post("/logout", self._action(self.logout, operator_only=False)),
            web.get("/quarantine", self._page(self.quarantine)),
            web.get("/find", self._page(self.find)),
            web.get("/message/{message_id}", self._page(self.message)),
            web.get("/blocked", self._page(self.blocked)),
            web.get("/exchanges", self._page(self.exchanges)),
            web.get("/export", self._page(self.export)),
            web.post(ACTION_PATHS[0], self._action(self.preview)),
            web.post(ACTION_PATHS[1], self._action(self.confirm)),
            web.post("/delivery/pause", self._action(self.pause)),
            web.post("/delivery/resume", self._action(self.resume)),
            web.get("/static/workbench.css", self.css),
        ]

    # -- sessions, CSRF, language --------------------------------------------------------

    def close(self) -> None:
        self._argon2.shutdown(wait=False, cancel_futures=True)

    def csrf(self, session: str) -> str:
        return self._csrf.tag(f"csrf|{session}")

    def _who(self, request: web.Request) -> Who | None:
        value = request.cookies.get(SESSION_COOKIE)
        token = self.signer.verify(value) if value else None
        if token is None:
            return None
        with transaction(self.engine, read_only=True) as connection:
            found = operators.session_of(connection, token, datetime.now(UTC))
        return Who(found[0], found[1], token) if found else None

    def _secure_cookies(self, request: web.Request) -> bool:
        # Behind the proxy the browser speaks TLS to the proxy (contract 9), not to us.
        return request.secure or self.config.behind_proxy

    def _lang(self, request: web.Request) -> Lang:
        asked = request.query.get("lang") or request.cookies.get(LANG_COOKIE)
        return "en" if asked == "en" else "ru"

    def _render(
        self, request: web.Request, template: str, who: Who | None, status: int = 200, **data: Any
    ) -> web.Response:
        lang = self._lang(request)

        def t(key: str, **values: Any) -> str:
            text = word(key, lang)
            return text.format(**values) if values else text

        body = self.env.get_template(template).render(
            t=t,
            pace=lambda figures: pace_words(figures, lang),
            n=lambda group, code: code_name(group, code, lang),
            said=lambda text: error_words(text, lang),
            messages_n=lambda count: messages_counted(count, lang),
            # What to do next, per reason: the report's words (one text for both).
            next_step=lambda reason, superseded=False: next_check(
                reason, lang, superseded=superseded
            ),
            lang=lang,
            who=who,
            csrf=self.csrf(who.session) if who else "",
            path=request.path,
            **data,
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
                raise web.HTTPForbidden(text="sign in first\n")
            form = await request.post()
            token = str(form.get("csrf", ""))
            if not hmac.compare_digest(token.encode(), self.csrf(who.session).encode()):
                raise web.HTTPForbidden(text="CSRF token missing or wrong\n")
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

    # -- sign-in ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self._render(request, "login.html", None, failed=False, wait=None)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name = str(form.get("name", "")).strip()[:100]
        password = str(form.get("password", ""))[:1000]
        address = client_address(request, self.config.behind_proxy)
        verdict = self.throttle.admit(name, address)
        if not verdict.allowed:
            return self._too_many(request, verdict)
        token = secrets.token_urlsafe(32)
        failed: bool | None = None  # None: not judged (the database failed), nothing counted
        try:
            found = await asyncio.to_thread(self._credentials, name)
            right = await asyncio.get_running_loop().run_in_executor(
                self._argon2, operators.verify, found, password
            )
            opened = False
            if right and found is not None:
                opened = await asyncio.to_thread(self._open, name, found, token)
            failed = not opened
        finally:
            wait = self.throttle.done(name, address, failed=failed)
        if failed:
            await asyncio.sleep(wait)
            return self._render(request, "login.html", None, status=401, failed=True, wait=None)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            SESSION_COOKIE,
            self.signer.sign(token),
            httponly=True,
            samesite="Strict",
            secure=self._secure_cookies(request),
            path="/",
        )
        raise response

    def _credentials(self, name: str) -> operators.Credentials | None:
        with transaction(self.engine, read_only=True) as connection:
            return operators.credentials(connection, name)

    def _open(self, name: str, found: operators.Credentials, token: str) -> bool:
        with transaction(self.engine) as connection:
            return operators.open_session(
                connection,
                name,
                found,
                token,
                datetime.now(UTC),
                timedelta(seconds=COOKIE_MAX_AGE_S),
            )

    def _too_many(self, request: web.Request, verdict: Verdict) -> web.Response:
        response = self._render(
            request,
            "login.html",
            None,
            status=429,
            failed=False,
            wait=verdict.retry_after_header,
        )
        response.headers["Retry-After"] = verdict.retry_after_header
        return response

    async def logout(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        def end() -> None:
            with transaction(self.engine) as connection:
                operators.end_session(connection, who.session)

        await asyncio.to_thread(end)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        raise response

    # -- pages -----------------------------------------------------------------------------

    async def dashboard(self, request: web.Request, who: Who) -> web.StreamResponse:
        lang = self._lang(request)

        def read() -> dict[str, Any]:
            with contextlib.ExitStack() as stack:
                connection = stack.enter_context(transaction(self.engine, read_only=True))
                staged = (
                    stack.enter_context(transaction(self.staging_engine, read_only=True))
                    if self.staging_engine is not None
                    else None
                )
                now = datetime.now(UTC)
                figures = status(connection, now, self.kinds)
                pause = control.operator_pause(connection)
                found = attention(
                    connection, staged, figures, pause, now, self.kinds, self.config.live_within
                )
                hours = chart.last_day(connection, now)
                onec = onec_exchanges(connection, now)
                return {
                    "chart": Markup(chart.svg(hours, word("last_day", lang), self.zone)),
                    "figures": figures.as_json(),
                    "held": finder.held(connection, self.kinds),
                    "pause": pause,
                    "told": last_told(connection),
                    "intake": found.intake,
                    "needs": [cause.words(lang) for cause in found.causes],
                    "codes": [cause.code for cause in found.causes],
                    "live": any(w["live"] for w in figures.workers),
                    "onec_failed_24h": onec["by_outcome"].get("failure", 0),
                    "refused": self.onec_refused,
                }

        return self._render(request, "dashboard.html", who, **await asyncio.to_thread(read))

    def _filters(self, request: web.Request) -> tuple[Filters, list[str]]:
        q = request.query
        errors: list[str] = []
        lang = self._lang(request)
        reason = q.get("reason") or None
        kind = q.get("kind") or None
        if (
            reason is not None
            and reason not in _known_reasons()
            and not HTTP_REASON.fullmatch(reason)
        ):
            errors.append(f"{word('bad_filter', lang)}: {reason}")
            reason = None
        if kind is not None and kind not in self.config.kinds:
            errors.append(f"{word('bad_filter', lang)}: {kind}")
            kind = None
        dates: list[datetime | None] = []
        for name in ("since", "until"):
            value = q.get(name) or None
            parsed = None
            if value is not None:
                try:
                    parsed = datetime.fromisoformat(value)
                    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
                except ValueError:
                    errors.append(f"{word('bad_date', lang)}: {value}")
            dates.append(parsed)
        return Filters(kind=kind, reason=reason, since=dates[0], until=dates[1]), errors

    async def quarantine(self, request: web.Request, who: Who) -> web.StreamResponse:
        filters, errors = self._filters(request)
        term = request.query.get("q", "").strip()

        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                rows = list_quarantined(connection, filters)
            if term:
                rows = [
                    r
                    for r in rows
                    if term in r["aggregate"]
                    or r["message_id"].startswith(term)
                    or term == (r["source_ref"] or "")
                ]
            return rows

        rows = await asyncio.to_thread(read)
        return self._render(
            request,
            "quarantine.html",
            who,
            rows=rows,
            errors=errors,
            query=dict(request.query),
            reasons=_known_reasons(),
            kinds=sorted(self.config.kinds),
            bulk=filters.any() and not errors,
            filters=filters,
        )

    async def find(self, request: web.Request, who: Who) -> web.StreamResponse:
        term = request.query.get("q", "").strip()

        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                return finder.find(connection, term)

        rows = await asyncio.to_thread(read) if term else []
        return self._render(request, "find.html", who, rows=rows, term=term)

    async def message(self, request: web.Request, who: Who) -> web.StreamResponse:
        message_id = request.match_info["message_id"]

        def read() -> dict[str, Any] | None:
            with transaction(self.engine, read_only=True) as connection:
                try:
                    story = biography(connection, message_id)
                except OperatorError:
                    return None
                story["payload"] = _masked(
                    connection.execute(
                        select(messages.c.payload).where(messages.c.message_id == message_id)
                    ).scalar(),
                    self.config,
                )
                return story

        story = await asyncio.to_thread(read)
        if story is None:
            return self._render(
                request,
                "error.html",
                who,
                status=404,
                message=word("no_message", self._lang(request)),
                subject=message_id,
            )
        return self._render(
            request,
            "message.html",
            who,
            m=story["message"],
            history=story["history"],
            payload=story["payload"],
            quarantined=story["message"]["state"] == State.QUARANTINED.value,
        )

    async def blocked(self, request: web.Request, who: Who) -> web.StreamResponse:
        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                return status(connection, datetime.now(UTC), self.kinds).blocked

        return self._render(request, "blocked.html", who, rows=await asyncio.to_thread(read))

    async def exchanges(self, request: web.Request, who: Who) -> web.StreamResponse:
        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                return [
                    dict(r)
                    for r in connection.execute(
                        select(cml_exchanges)
                        .order_by(cml_exchanges.c.id.desc())
                        .limit(EXCHANGES_SHOWN)
                    ).mappings()
                ]

        return self._render(request, "exchanges.html", who, rows=await asyncio.to_thread(read))

    async def export(self, request: web.Request, who: Who) -> web.StreamResponse:
        fmt = request.query.get("format")
        if fmt is None:
            return self._render(request, "export.html", who, formats=FORMATS)
        if fmt not in FORMATS:
            raise web.HTTPBadRequest(text=f"unknown format {fmt!r}: {', '.join(FORMATS)}\n")
        lang = self._lang(request)
        filters, errors = self._filters(request)
        if errors:
            raise web.HTTPBadRequest(text="; ".join(errors) + "\n")

        def build() -> bytes:
            with transaction(self.engine, read_only=True) as connection:
                data = report.collect(
                    connection,
                    filters,
                    datetime.now(UTC),
                    mask_fields=self.config.report_mask_fields,
                    secrets=self.config.report_secrets,
                )
            return report.render(data, fmt, lang)

        body = await asyncio.to_thread(build)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        suffix = SUFFIXES[fmt]
        response = web.Response(
            body=body,
            content_type=_CONTENT_TYPES[fmt],
            headers={"Content-Disposition": f'attachment; filename="quarantine-{stamp}{suffix}"'},
        )
        return _secure(response)

    # -- actions ---------------------------------------------------------------------------

    def _action_target(self, form: Any) -> tuple[list[str], Filters]:
        ids = [str(i) for i in form.getall("message_id", []) if str(i).strip()]
        since = str(form.get("since", "")) or None
        until = str(form.get("until", "")) or None
        filters = Filters(
            kind=str(form.get("kind", "")) or None,
            reason=str(form.get("reason", "")) or None,
            since=datetime.fromisoformat(since) if since else None,
            until=datetime.fromisoformat(until) if until else None,
        )
        return ids, filters

    def _preview_mac(self, who: Who, action: str, filters: Filters, shown: list[str]) -> str:
        """Binds a bulk preview's ids to the session, the action and the filters, so that its
        confirmation cannot be widened (or moved to another session) by editing the form."""
        fields = [
            "preview",
            who.session,
            action,
            filters.kind or "",
            filters.reason or "",
            filters.since.isoformat() if filters.since else "",
            filters.until.isoformat() if filters.until else "",
            *sorted(shown),
        ]
        return self._previews.tag("\n".join(fields))

    def _plan(self, who: Who, action: str, ids: list[str], filters: Filters) -> dict[str, Any]:
        """What the action would do now (a dry run), as the preview page shows it."""
        with transaction(self.engine) as connection:
            if action == "retry":
                result = retry(
                    connection,
                    ids,
                    filters,
                    operator=who.name,
                    note=None,
                    now=datetime.now(UTC),
                    dry_run=True,
                    limit=self.config.bulk_limit,
                )
            else:
                result = cancel(
                    connection,
                    ids,
                    filters,
                    operator=who.name,
                    note="preview",
                    now=datetime.now(UTC),
                    dry_run=True,
                    kinds=self.kinds,
                    limit=self.config.bulk_limit,
                )
            superseded = {
                r["message_id"]
                for r in list_quarantined(connection, Filters(superseded_after_quarantine=True))
            }
            released = (
                finder.released_by_cancel(connection, result.touched, self.kinds)
                if action == "cancel"
                else []
            )
            return {
                "touched": result.touched,
                "skipped": result.skipped,
                "superseded": superseded if action == "retry" else set(),
                "released": released,
            }

    async def _show_preview(
        self,
        request: web.Request,
        who: Who,
        action: str,
        ids: list[str],
        filters: Filters,
        changed: PreviewChanged | None = None,
    ) -> web.StreamResponse:
        try:
            plan = await asyncio.to_thread(self._plan, who, action, ids, filters)
        except OperatorError as exc:
            return self._render(request, "error.html", who, status=400, message=str(exc))
        return self._render(
            request,
            "preview.html",
            who,
            status=409 if changed is not None else 200,
            action=action,
            ids=ids,
            filters=filters,
            note_missing=False,
            changed=changed,
            mac="" if ids else self._preview_mac(who, action, filters, plan["touched"]),
            **plan,
        )

    async def preview(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        action = str(form.get("action", ""))
        if action not in ("retry", "cancel"):
            raise web.HTTPBadRequest(text="action must be retry or cancel\n")
        try:
            ids, filters = self._action_target(form)
        except ValueError:
            raise web.HTTPBadRequest(text="a date is not ISO (e.g. 2026-11-30)\n") from None
        return await self._show_preview(request, who, action, ids, filters)

    async def confirm(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        """Acts on exactly what the preview showed: ids are named in the form; a bulk action
        by filters carries the ids its preview showed (``previewed``, signed by
        ``_preview_mac``) and, when the filters select others now, shows the preview again
        with the difference instead of acting."""
        action = str(form.get("action", ""))
        note = str(form.get("note", "")).strip()
        if action not in ("retry", "cancel"):
            raise web.HTTPBadRequest(text="action must be retry or cancel\n")
        try:
            ids, filters = self._action_target(form)
        except ValueError:
            raise web.HTTPBadRequest(text="a date is not ISO (e.g. 2026-11-30)\n") from None
        expected: list[str] | None = None
        if not ids:
            expected = [str(i) for i in form.getall("previewed", [])]
            mac = str(form.get("preview_mac", ""))
            if not hmac.compare_digest(
                mac.encode(), self._preview_mac(who, action, filters, expected).encode()
            ):
                raise web.HTTPBadRequest(
                    text="this confirmation does not match a preview of this session: "
                    "preview the action again\n"
                )
        if not note:
            return self._render(
                request,
                "error.html",
                who,
                status=400,
                message=word("note_required", self._lang(request)),
            )

        def act() -> list[str]:
            with transaction(self.engine) as connection:
                if action == "retry":
                    result = retry(
                        connection,
                        ids,
                        filters,
                        operator=who.name,
                        note=note,
                        now=datetime.now(UTC),
                        dry_run=False,
                        limit=self.config.bulk_limit,
                        expected=expected,
                    )
                else:
                    result = cancel(
                        connection,
                        ids,
                        filters,
                        operator=who.name,
                        note=note,
                        now=datetime.now(UTC),
                        dry_run=False,
                        kinds=self.kinds,
                        limit=self.config.bulk_limit,
                        expected=expected,
                    )
                return result.touched

        try:
            touched = await asyncio.to_thread(act)
        except PreviewChanged as changed:
            return await self._show_preview(request, who, action, ids, filters, changed)
        except OperatorError as exc:
            return self._render(request, "error.html", who, status=400, message=str(exc))
        return self._render(request, "done.html", who, action=action, touched=touched)

    async def pause(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        note = str(form.get("note", "")).strip()
        if not note:
            return self._render(
                request,
                "error.html",
                who,
                status=400,
                message=word("note_required", self._lang(request)),
            )

        def act() -> None:
            with transaction(self.engine) as connection:
                control.pause(connection, operator=who.name, note=note, now=datetime.now(UTC))

        await asyncio.to_thread(act)
        raise web.HTTPSeeOther("/")

    async def resume(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        def act() -> None:
            with transaction(self.engine) as connection:
                control.resume(connection, operator=who.name)

        await asyncio.to_thread(act)
        raise web.HTTPSeeOther("/")

    async def css(self, request: web.Request) -> web.StreamResponse:
        text = resources.files("exchange.web").joinpath("static/workbench.css").read_text("utf-8")
        return _secure(
            web.Response(
                text=text, content_type="text/css", headers={"Cache-Control": "max-age=3600"}
            )
        )


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


def _when(value: str | None, zone: tzinfo = UTC) -> str:
    """An ISO time as ``2026-11-30 08:00:00 UTC``: every page in one zone (EXCHANGE_DISPLAY_TZ)."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    if isinstance(parsed, datetime):
        local = parsed.astimezone(zone)
        return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or str(zone))
    return str(value)


def _ago(context: Any, value: str | None) -> str:
    """How long ago an ISO time was, in the page's language («5 мин назад»)."""
    if not value:
        return ""
    then = datetime.fromisoformat(value)
    age = human_age((datetime.now(UTC) - then).total_seconds(), context["lang"])
    return f"{age} назад" if context["lang"] == "ru" else f"{age} ago"


def _secure(response: R) -> R:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


__all__ = ["WORDS", "Workbench"]
