"""The pages people read: dashboard, quarantine, search, a message, the blocked, the 1C
exchanges, export."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from aiohttp import web
from markupsafe import Markup
from sqlalchemy import select

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, messages
from exchange.domain.states import DUE, State, values
from exchange.errors import OperatorError
from exchange.intake.sources.common import refused_records
from exchange.ops import find as finder
from exchange.ops.attention import attention
from exchange.ops.exchanges import onec_exchanges
from exchange.ops.notify import last_told
from exchange.ops.quarantine import Filters, list_quarantined
from exchange.ops.status import biography, status
from exchange.queue import control
from exchange.report import collect as report
from exchange.report.model import FORMATS, SUFFIXES
from exchange.web import chart
from exchange.web.words import word
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


class Pages(Core):
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
            # What ``exchange prioritize`` accepts: a message waiting to be sent.
            waiting=story["message"]["state"] in values(DUE) and not story["message"]["rejected"],
        )

    async def blocked(self, request: web.Request, who: Who) -> web.StreamResponse:
        def read() -> list[dict[str, Any]]:
            with transaction(self.engine, read_only=True) as connection:
                return status(connection, datetime.now(UTC), self.kinds).blocked

        return self._render(request, "blocked.html", who, rows=await asyncio.to_thread(read))

    async def exchanges(self, request: web.Request, who: Who) -> web.StreamResponse:
        """1C's exchanges (contract 9a), and the bad messages the brokers delivered (contract
        12: what the sources recorded in the quarantine)."""

        def read() -> dict[str, list[dict[str, Any]]]:
            with transaction(self.engine, read_only=True) as connection:
                return {
                    "rows": [
                        dict(r)
                        for r in connection.execute(
                            select(cml_exchanges)
                            .order_by(cml_exchanges.c.id.desc())
                            .limit(EXCHANGES_SHOWN)
                        ).mappings()
                    ],
                    "refused": refused_records(connection, EXCHANGES_SHOWN),
                }

        shown = await asyncio.to_thread(read)
        return self._render(
            request, "exchanges.html", who, rows=shown["rows"], refused=shown["refused"]
        )

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

    async def css(self, request: web.Request) -> web.StreamResponse:
        text = resources.files("exchange.web").joinpath("static/workbench.css").read_text("utf-8")
        return _secure(
            web.Response(
                text=text, content_type="text/css", headers={"Cache-Control": "max-age=3600"}
            )
        )
