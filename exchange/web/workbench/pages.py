"""The pages people read: dashboard, quarantine, search, a message, the blocked, the 1C
exchanges, export."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup
from sqlalchemy import select

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, cml_packages, messages
from exchange.domain.states import DUE, State, values
from exchange.errors import OperatorError
from exchange.intake.sources.common import refused_records
from exchange.ops import find as finder
from exchange.ops.attention import Cause, attention, pause_words
from exchange.ops.backlog import backlog
from exchange.ops.exchanges import onec_exchanges
from exchange.ops.notify import last_told
from exchange.ops.quarantine import (
    QUERY_FIELDS,
    SORTS,
    Filters,
    Page,
    filter_time,
    page_of,
    reasons_present,
)
from exchange.ops.status import biography, quarantine_by_reason, site_pace, status
from exchange.queue import control
from exchange.report import collect as report
from exchange.report.model import FORMATS, SUFFIXES
from exchange.web import chart
from exchange.web.workbench.core import (
    _CONTENT_TYPES,
    EXCHANGES_SHOWN,
    HTTP_REASON,
    Core,
    Who,
    _known_reasons,
    _masked,
    _secure,
)
from exchange.words import Lang, inside_words, page_steps, word

# The quarantine's pages: entries a page (a choice of these), the first by default.
PER_PAGES = (50, 100, 500)
PER_PAGE = 100


def _int(value: str | None, default: int, allowed: tuple[int, ...] | None = None) -> int:
    """A whole number from the address, else ``default`` (and ``default`` when not allowed)."""
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if allowed is None or number in allowed else default


def cause_words(cause: Cause, lang: Lang) -> str:
    """What needs a person, as the dashboard says it: a failed 1C exchange's outcome is
    recorded in English (the log and ``exchange status`` say it so), the page says it in its
    own language."""
    if cause.values.get("reason"):
        reason = inside_words(str(cause.values["reason"]), lang)
        cause = dataclasses.replace(cause, values={**cause.values, "reason": reason})
    return cause.words(lang)


# The dashboard redraws itself this often unless switched off (issue 24 item 10).
REFRESH_SECONDS = 30
REFRESH_COOKIE = "exchange_refresh"


def _refresh_wanted(request: web.Request) -> bool:
    """``?refresh=off`` stops the dashboard's own redraw and ``?refresh=on`` starts it again,
    both kept in a cookie; on by default."""
    asked = request.query.get("refresh") or request.cookies.get(REFRESH_COOKIE)
    return asked != "off"


def _export_link(query: dict[str, str]) -> str:
    """The export of what a quarantine list shows: its filters, no page or order."""
    wanted = {k: query[k] for k in QUERY_FIELDS if query.get(k)}
    return "/export" + (f"?{urlencode(wanted)}" if wanted else "")


class Pages(Core):
    # -- pages -----------------------------------------------------------------------------

    async def dashboard(self, request: web.Request, who: Who) -> web.StreamResponse:
        lang = self._lang(request)

        unwritten = self.sign_ins.unwritten()  # read on the event loop, which counts them

        def read() -> dict[str, Any]:
            with contextlib.ExitStack() as stack:
                connection = stack.enter_context(transaction(self.engine, read_only=True))
                staged = (
                    stack.enter_context(transaction(self.staging_engine, read_only=True))
                    if self.staging_engine is not None
                    else None
                )
                now = self.clock.now()
                figures = status(connection, now, self.kinds, live_within=self.config.live_within)
                pause = control.operator_pause(connection)
                found = attention(
                    connection,
                    staged,
                    figures,
                    now,
                    self.kinds,
                    self.config.live_within,
                    unwritten,
                )
                hours = chart.last_day(connection, now)
                onec = onec_exchanges(connection, now)
                waiting = backlog(
                    connection, now, self.kinds, timedelta(seconds=self.config.live_within)
                )
                return {
                    "chart": Markup(
                        chart.svg(hours, word("last_day", lang), self.zone, lang)
                        + chart.svg(hours, word("last_day", lang), self.zone, lang, chart.COMPACT)
                    ),
                    "backlog": waiting,
                    "site_pace": site_pace(figures.workers),
                    "drawn_at": now,
                    "figures": figures.as_json(),
                    "held": finder.held(connection, self.kinds),
                    "pause": pause,
                    "told": last_told(connection),
                    "intake": found.intake,
                    "needs": [cause_words(cause, lang) for cause in found.causes],
                    # The site's pause in the words of ``status`` and the notice (item 4).
                    "pause_said": (
                        pause_words(figures.pause["cause"], figures.pause["note"], lang)
                        if figures.pause is not None and figures.pause["by"] != "operator"
                        else ""
                    ),
                    "codes": [cause.code for cause in found.causes],
                    "live": any(w["live"] for w in figures.workers),
                    "live_within": self.config.live_within,
                    "onec_failed_24h": onec["by_outcome"].get("failure", 0),
                    # 1C's sign-ins refused lately, none accepted since (contract 15).
                    "refused": found.refused_sign_ins.get("1c"),
                }

        refresh = _refresh_wanted(request)
        response = self._render(
            request,
            "dashboard.html",
            who,
            refresh=refresh,
            refresh_s=REFRESH_SECONDS,
            **await asyncio.to_thread(read),
        )
        if refresh:
            # Redrawn by the browser itself (no script): the same page, fresh figures.
            response.headers["Refresh"] = f"{REFRESH_SECONDS}; url=/"
        if "refresh" in request.query:  # the switch: kept for this browser
            response.set_cookie(
                REFRESH_COOKIE,
                "on" if refresh else "off",
                max_age=365 * 86400,
                httponly=True,
                samesite="Strict",
                secure=self._secure_cookies(request),
            )
        return response

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
                    # a time without its zone is the display zone's: what the pages show
                    parsed = filter_time(value, self.zone)
                except ValueError:
                    errors.append(f"{word('bad_date', lang)}: {value}")
            dates.append(parsed)
        search = q.get("q", "").strip() or None
        return Filters(
            kind=kind,
            aggregate=q.get("aggregate", "").strip() or None,
            reason=reason,
            since=dates[0],
            until=dates[1],
            search=search,
            superseded_after_quarantine=q.get("superseded") == "1",
        ), errors

    async def quarantine(self, request: web.Request, who: Who) -> web.StreamResponse:
        filters, errors = self._filters(request)
        q = request.query
        sort = q.get("sort", "since")
        if sort not in SORTS:
            errors.append(f"{word('bad_sort', self._lang(request))}: {sort}")
            sort = "since"
        descending = q.get("dir") == "desc"
        per = _int(q.get("per"), PER_PAGE, PER_PAGES)
        number = max(_int(q.get("page"), 1), 1)

        def read() -> tuple[Page, list[tuple[str, int]]]:
            with transaction(self.engine, read_only=True) as connection:
                found = page_of(
                    connection,
                    filters,
                    sort=sort,
                    descending=descending,
                    offset=(number - 1) * per,
                    limit=per,
                )
                return found, reasons_present(connection, filters)

        found, reasons = await asyncio.to_thread(read)
        pages = max((found.total + per - 1) // per, 1)
        query = {k: v for k, v in q.items() if k != "hint"}

        def link(**changes: Any) -> str:
            """This list's address with ``changes`` (None drops a parameter)."""
            wanted = {**query, **{k: str(v) for k, v in changes.items() if v is not None}}
            for k, v in changes.items():
                if v is None:
                    wanted.pop(k, None)
            return "/quarantine" + (f"?{urlencode(wanted)}" if wanted else "")

        sorts = {
            key: {
                # the sorted column's link turns its order round; another starts ascending
                "href": link(
                    sort=key, dir="desc" if key == sort and not descending else "asc", page=None
                ),
                "arrow": (" ↓" if descending else " ↑") if key == sort else "",
            }
            for key in SORTS
        }
        return self._render(
            request,
            "quarantine.html",
            who,
            sorts=sorts,
            rows=found.entries,
            total=found.total,
            page=number,
            pages=pages,
            per=per,
            per_pages=PER_PAGES,
            sort=sort,
            descending=descending,
            link=link,
            here=link(),
            hint=q.get("hint") == "nothing-selected",
            errors=errors,
            query=query,
            reasons=reasons,
            kinds=sorted(self.config.kinds),
            bulk=filters.any() and not errors,
            filters=filters,
            filter_fields=QUERY_FIELDS,
            export_link=_export_link(query),
        )

    async def find(self, request: web.Request, who: Who) -> web.StreamResponse:
        term = request.query.get("q", "").strip()

        def read() -> tuple[list[dict[str, Any]], int]:
            with transaction(self.engine, read_only=True) as connection:
                rows = finder.find(connection, term)
                shown = len(rows)
                total = (
                    shown if shown < finder.FOUND_SHOWN else finder.count_found(connection, term)
                )
                return rows, total

        rows, total = await asyncio.to_thread(read) if term else ([], 0)
        return self._render(
            request, "find.html", who, rows=rows, term=term, total=total, shown=finder.FOUND_SHOWN
        )

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
            # Never sent: no attempt counted or recorded, none in flight (a retry sets the
            # count back to 0; the history keeps the attempts).
            attempted=bool(story["message"]["attempts"])
            or any(e["attempt"] for e in story["history"]),
            # What ``exchange prioritize`` accepts: a message waiting to be sent.
            waiting=story["message"]["state"] in values(DUE) and not story["message"]["rejected"],
        )

    async def blocked(self, request: web.Request, who: Who) -> web.StreamResponse:
        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                return status(connection, self.clock.now(), self.kinds).blocked

        return self._render(request, "blocked.html", who, rows=await asyncio.to_thread(read))

    async def exchanges(self, request: web.Request, who: Who) -> web.StreamResponse:
        """1C's exchanges (contract 9a), each staged file with the 1C document its prices carry,
        and the bad messages the brokers delivered (contract 12: what the sources recorded in
        the quarantine)."""

        def read() -> dict[str, list[dict[str, Any]]]:
            with transaction(self.engine, read_only=True) as connection:
                rows = [
                    dict(r)
                    for r in connection.execute(
                        select(cml_exchanges)
                        .order_by(cml_exchanges.c.id.desc())
                        .limit(EXCHANGES_SHOWN)
                    ).mappings()
                ]
                refused = refused_records(connection, EXCHANGES_SHOWN)
            # The 1C document its prices carry (``source_ref``): kept with the package, in the
            # staging database (EXCHANGE_STAGING_URL) where that is another one.
            versions = {r["version"] for r in rows if r["version"] is not None and r["intents"]}
            documents: dict[int, str] = {}
            if versions:
                with transaction(self.staging_engine or self.engine, read_only=True) as staged:
                    documents = {
                        int(version): str(ref)
                        for version, ref in staged.execute(
                            select(cml_packages.c.version, cml_packages.c.source_ref).where(
                                cml_packages.c.version.in_(sorted(versions))
                            )
                        )
                    }
            for r in rows:
                staged_here = r["outcome"] == "staged" and r["intents"]
                r["document"] = documents.get(r["version"]) if staged_here else None
            return {"rows": rows, "refused": refused}

        shown = await asyncio.to_thread(read)
        return self._render(
            request, "exchanges.html", who, rows=shown["rows"], refused=shown["refused"]
        )

    async def export(self, request: web.Request, who: Who) -> web.StreamResponse:
        """The quarantine's report with the quarantine list's filters (``QUERY_FIELDS``: the
        CLI's kind, aggregate, reason, since, until, superseded, and the list's search), in
        any format (issue 24 item 12); «Что сделать» names the pages' buttons."""
        fmt = request.query.get("format")
        lang = self._lang(request)
        filters, errors = self._filters(request)  # the quarantine list's, every one
        if fmt is not None and fmt not in FORMATS:
            errors.append(f"{word('bad_filter', lang)}: {fmt}")
        if fmt is None or errors:

            def present() -> dict[str, dict[str, Any]]:
                with transaction(self.engine, read_only=True) as connection:
                    return quarantine_by_reason(connection, self.clock.now())

            reasons = await asyncio.to_thread(present)
            return self._render(
                request,
                "export.html",
                who,
                status=400 if errors else 200,
                formats=FORMATS,
                errors=errors,
                query=dict(request.query),
                reasons=[(reason, e["count"]) for reason, e in reasons.items()],
                total=sum(e["count"] for e in reasons.values()),
                kinds=sorted(self.config.kinds),
            )
        chosen = FORMATS[FORMATS.index(fmt)]

        def build() -> bytes:
            with transaction(self.engine, read_only=True) as connection:
                data = report.collect(
                    connection,
                    filters,
                    self.clock.now(),
                    mask_fields=self.config.report_mask_fields,
                    secrets=self.config.report_secrets,
                    zone=self.config.display_tz,
                )
            # Made on the workbench: «Что сделать» names the pages' buttons, not commands.
            data = dataclasses.replace(data, steps=page_steps(lang))
            return report.render(data, chosen, lang)

        body = await asyncio.to_thread(build)
        stamp = self.clock.now().strftime("%Y%m%dT%H%M%SZ")
        suffix = SUFFIXES[chosen]
        response = web.Response(
            body=body,
            content_type=_CONTENT_TYPES[chosen],
            headers={"Content-Disposition": f'attachment; filename="quarantine-{stamp}{suffix}"'},
        )
        return _secure(response)

    async def css(self, request: web.Request) -> web.StreamResponse:
        text = resources.files("exchange.web").joinpath("static/workbench.css").read_text("utf-8")
        return _secure(
            web.Response(
                text=text, content_type="text/css", headers={"Cache-Control": "max-age=3600"}
            )
        )
