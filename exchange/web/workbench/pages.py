"""The pages people read: dashboard, quarantine, search, a message, the blocked, the 1C
exchanges, export."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import defaultdict
from datetime import datetime, timedelta, tzinfo
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup
from sqlalchemy import Connection, select

from exchange.db.engine import transaction
from exchange.db.on_channels import (
    channel_ids,
    channel_names,
    channel_targets,
    listed,
    targets_by_id,
)
from exchange.db.schema import aggregates, channels, cml_packages, messages
from exchange.domain.states import DUE, State, values
from exchange.errors import OperatorError
from exchange.i18n import ngettext
from exchange.intake.sources.common import refused_records
from exchange.ops import find as finder
from exchange.ops.attention import Cause, attention, pause_words
from exchange.ops.backlog import backlog, untaken_channels
from exchange.ops.channel_status import channel_figures, dropped_channels
from exchange.ops.exchanges import (
    exchanges_page,
    onec_exchanges,
    refused_by_document,
    untaken_by_document,
)
from exchange.ops.notify import last_told
from exchange.ops.quarantine import (
    QUERY_FIELDS,
    Filters,
    Page,
    filter_time,
    newer_version_sent,
    page_of,
    reasons_present,
    sorts_of,
)
from exchange.ops.status import (
    biography,
    quarantine_by_reason,
    quarantine_reason_targets,
    shown_workers,
    site_pace,
    status,
)
from exchange.ops.waits import awaiting_in_biography
from exchange.ops.withheld_behind import advice, behind_named
from exchange.queue import control
from exchange.report import collect as report
from exchange.report.model import FORMATS, SUFFIXES
from exchange.report.words import content_disposition, download_name, newer_advised
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
from exchange.words import (
    Lang,
    channel_named,
    channel_subject,
    channels_named,
    file_steps,
    inside_words,
    reason_target,
    word,
)

# The quarantine's pages: entries a page (a choice of these), the first by default.
PER_PAGES = (50, 100, 500)
PER_PAGE = 100

# What a message's page says was done (``?done=``), after an action that came back to it.
DONE = ("prioritize", "release")

# The lists by state (``/messages/<state>``); the quarantine's is ``/quarantine``.
BROWSED = {
    s.value: s
    for s in (
        State.NEW,
        State.DELAYED,
        State.IN_PROGRESS,
        State.DELIVERED,
        State.CANCELLED,
        State.WITHHELD,
    )
}
# Lists shown the latest first by default (the others: what has waited longest, or the
# delayed what goes again soonest, first).
LATEST_FIRST = frozenset({State.DELIVERED, State.CANCELLED})
# The lists whose reason filter says how many have each reason: the others may hold millions.
REASONS_COUNTED = frozenset({State.QUARANTINED, State.DELAYED})
# A list by state counts no further than this (the delivered may be millions); the filters
# narrow what is past it.
COUNTED_AT_MOST = 10_000


def _int(value: str | None, default: int, allowed: tuple[int, ...] | None = None) -> int:
    """A whole number from the address, else ``default`` (and ``default`` when not allowed)."""
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if allowed is None or number in allowed else default


def cause_words(cause: Cause, lang: Lang, zone: tzinfo | str = "UTC") -> str:
    """What needs a person, as the dashboard says it: a failed 1C exchange's outcome is
    recorded in English (the log and ``exchange status`` say it so), the page says it in its
    own language, its time in the page's zone (EXCHANGE_DISPLAY_TZ)."""
    # A site's answer that paused delivery is said by ``pause_words`` itself (once).
    if cause.values.get("reason"):
        said = inside_words(str(cause.values["reason"]), lang)
        cause = dataclasses.replace(cause, values={**cause.values, "reason": said})
    return cause.words(lang, zone)


# The dashboard redraws itself this often unless switched off (issue 24 item 10).
REFRESH_SECONDS = 30
REFRESH_COOKIE = "exchange_refresh"


def on_state(deliveries: list[dict[str, Any]], state: State) -> list[str]:
    """The channels (by name) where a message's delivery is in ``state``."""
    return [d["channel"] for d in deliveries if d["state"] == state.value]


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
    def _configured_channels(self, connection: Connection) -> tuple[str, ...]:
        """The channels this process has configured: EXCHANGE_CHANNELS's names, else every
        registered channel not dropped (the one channel of a one-target installation)."""
        if self.config.channels is not None:
            return self.config.channels
        return tuple(
            connection.execute(
                select(channels.c.name).where(channels.c.dropped_at.is_(None))
            ).scalars()
        )

    def _not_found(self, request: web.Request, who: Who, key: str, subject: str) -> web.Response:
        """A page of what is not there (404): the words of ``key``, then what was asked for."""
        return self._render(
            request,
            "error.html",
            who,
            status=404,
            message=word(key, self._lang(request)),
            subject=subject,
        )

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
                coded = self.config.channels is not None  # EXCHANGE_CHANNELS set: codes name
                found = attention(
                    connection,
                    staged,
                    figures,
                    now,
                    self.kinds,
                    self.config.live_within,
                    unwritten,
                    by_channel=(
                        channel_figures(
                            connection,
                            now,
                            self.kinds,
                            figures.workers,
                            channel_ids(connection),
                            configured=self._configured_channels(connection),
                            live_within=self.config.live_within,
                        )
                        if coded
                        else None
                    ),
                    configured=self.config.channels,
                )
                hours = chart.last_day(connection, now)
                onec = onec_exchanges(connection, now)
                waiting = backlog(
                    connection, now, self.kinds, timedelta(seconds=self.config.live_within)
                )
                ids = channel_ids(connection)
                held_channels = control.paused_channels(connection)
                registered = channel_targets(connection)
                # contract 13: the one rule of the words and the banner's buttons alike
                named = channels_named(coded, len(registered))
                by_channel = channel_figures(
                    connection,
                    now,
                    self.kinds,
                    figures.workers,
                    ids,
                    configured=self._configured_channels(connection),
                    live_within=self.config.live_within,
                )
                as_json = figures.as_json()
                shown = shown_workers(as_json["workers"])
                return {
                    # contract 13: a row per channel where the words name the channels (the
                    # banner's "every channel" and its hint speak of these rows), or where
                    # there is more than one (a dropped channel's figures among them)
                    "channels": by_channel if named or len(by_channel) > 1 else {},
                    "chart": Markup(
                        chart.svg(hours, word("last_day", lang), self.zone, lang)
                        + chart.svg(hours, word("last_day", lang), self.zone, lang, chart.COMPACT)
                    ),
                    "backlog": waiting,
                    # owner 31 item 2: why there is no estimate, when the pace is none
                    "backlog_stalled": untaken_channels(by_channel),
                    "dropped_channels": dropped_channels(connection),
                    "any_live": any(w["live"] for w in figures.workers),
                    "site_pace": site_pace(figures.workers),
                    "drawn_at": now,
                    "figures": as_json,
                    # owner 31 item 7: the live rows and each channel's last stopped one
                    "shown_workers": shown[0],
                    "more_stopped": (
                        ngettext(
                            "and {count} more stopped", "and {count} more stopped", shown[1], lang
                        ).format(count=shown[1])
                        if shown[1]
                        else ""
                    ),
                    "held": finder.held(connection, self.kinds),
                    "pause": pause,
                    # contract 13: the channels paused on their own, and those a pause or a
                    # resume may name (registered, not dropped)
                    "paused_channels": sorted(held_channels),
                    # each channel's own pause by name: its workers' rows say who paused it
                    # (issue 31 item 7: a paused channel's worker is not «идёт»)
                    "channel_pauses": held_channels,
                    # with no worker live (contract 13): the channels paused on their own
                    # whose work waits for a resume, and whether any other work waits for a
                    # worker (what 1C handed over, a channel not paused)
                    "paused_waiting": [
                        name
                        for name in sorted(held_channels)
                        if by_channel.get(name, {}).get("backlog", {}).get("messages")
                    ],
                    "others_waiting": bool(found.intake["untaken"])
                    or any(
                        c["backlog"]["messages"]
                        for name, c in by_channel.items()
                        # owner 31 item 3: a channel no process configures (renamed) waits
                        # for no worker: the first to start takes none of it
                        if name not in held_channels and c["configured"]
                    ),
                    # issue 32: work waiting on a channel no configured channel serves (a rename:
                    # ``attention.unserved``, the causes' own count) is work that waits, which no
                    # worker that starts will take: the banner says so, never «nothing waits»
                    "unserved_waiting": [
                        cause.values["channel"] for cause in found.causes if cause.key == "unserved"
                    ],
                    "in_use": set(
                        connection.execute(
                            select(channels.c.name).where(channels.c.dropped_at.is_(None))
                        ).scalars()
                    ),
                    "told": last_told(connection),
                    # each reason's row in a marketplace's words where its records are on
                    # marketplaces' channels (``words.reason_target``: status's rule)
                    "reason_targets": quarantine_reason_targets(connection, ids),
                    "intake": found.intake,
                    "needs": [cause_words(cause, lang, self.zone) for cause in found.causes],
                    # The site's pause in the words of ``status`` and the notice (item 4).
                    "pause_said": (
                        pause_words(
                            figures.pause["cause"],
                            figures.pause["note"],
                            lang,
                            channel=_paused_channel(figures, by_channel, lang) if named else None,
                        )
                        if figures.pause is not None and figures.pause["by"] != "operator"
                        else ""
                    ),
                    # contract 13: the words (and the banner's buttons) name the channels
                    # (``words.channels_named``: EXCHANGE_CHANNELS, or more than one registered)
                    "named": named,
                    # each worker row's channel as its pace names it where it is no site
                    "subjects": _subjects(by_channel, registered, named, lang),
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
            # contract 13: one channel's deliveries (its name); checked against the registry
            # when the list is read (``_known_channel``)
            channel=q.get("channel") or None,
        ), errors

    def _listing(self, request: web.Request, path: str, state: State) -> dict[str, Any]:
        """What a list of messages in ``state`` shows, read from the address: the quarantine's
        and the lists by state share it (their filters, search, orders and pages), each with
        the orders its state allows (``ops.quarantine.sorts_of``)."""
        filters, errors = self._filters(request)
        q = request.query
        allowed = sorts_of(state)
        default = next(iter(allowed))
        sort = q.get("sort", default)
        if sort not in allowed:
            errors.append(f"{word('bad_sort', self._lang(request))}: {sort}")
            sort = default
        # The quarantine's oldest first (what has waited longest); the other lists the
        # latest first (what just happened), the delayed the soonest to go again first.
        descending = q.get("dir", "desc" if state in LATEST_FIRST else "asc") == "desc"
        per = _int(q.get("per"), PER_PAGE, PER_PAGES)
        number = max(_int(q.get("page"), 1), 1)
        bounded = None if state is State.QUARANTINED else COUNTED_AT_MOST
        if bounded is not None:
            # Past what is counted no page is offered: the filters narrow it instead.
            number = min(number, max(bounded // per, 1))

        channels_shown: list[str] = []
        targets: dict[str, str] = {}

        def read() -> tuple[Page, list[tuple[str, int | None, str | None]]]:
            nonlocal filters
            with transaction(self.engine, read_only=True) as connection:
                filters = _known_channel(connection, filters, errors, self._lang(request))
                names = sorted(set(channel_names(connection).values()))
                targets.update(channel_targets(connection))
                if len(names) > 1:  # a filter by channel only where there is a choice
                    channels_shown.extend(names)
                found = page_of(
                    connection,
                    filters,
                    sort=sort,
                    descending=descending,
                    offset=(number - 1) * per,
                    limit=per,
                    state=state,
                    count_limit=bounded,
                )
                if state is State.WITHHELD:
                    _held_behind(connection, found.entries, self._lang(request))
                named = _reasons_named_by(connection, filters, state)
                if state not in REASONS_COUNTED:
                    # Counting the reasons of every delivered message would read them all: the
                    # filter offers the reasons that can occur in this state, uncounted.
                    return found, [
                        (reason, None, named.get(reason)) for reason in finder.reasons_in(state)
                    ]
                counted: list[tuple[str, int | None, str | None]] = [
                    (reason, count, named.get(reason))
                    for reason, count in reasons_present(connection, filters, state)
                ]
                return found, counted

        query = {k: v for k, v in q.items() if k != "hint"}

        def link(**changes: Any) -> str:
            """This list's address with ``changes`` (None drops a parameter)."""
            wanted = {**query, **{k: str(v) for k, v in changes.items() if v is not None}}
            for k, v in changes.items():
                if v is None:
                    wanted.pop(k, None)
            return path + (f"?{urlencode(wanted)}" if wanted else "")

        sorts = {
            key: {
                # the sorted column's link turns its order round; another starts ascending
                "href": link(
                    sort=key, dir="desc" if key == sort and not descending else "asc", page=None
                ),
                "arrow": (" ↓" if descending else " ↑") if key == sort else "",
            }
            for key in allowed
        }
        return {
            "read": read,
            "filters": filters,
            "errors": errors,
            "sorts": sorts,
            "page": number,
            "per": per,
            "per_pages": PER_PAGES,
            "sort": sort,
            "descending": descending,
            "link": link,
            "here": link(),
            "query": query,
            "kinds": sorted(self.config.kinds),
            "filter_fields": QUERY_FIELDS,
            "list_path": path,
            "channels": channels_shown,  # filled by ``read``
            "targets": targets,  # filled by ``read``: each channel's target by its name
        }

    async def _list_page(
        self, request: web.Request, who: Who, template: str, shown: dict[str, Any], **more: Any
    ) -> web.StreamResponse:
        read = shown.pop("read")
        found, reasons = await asyncio.to_thread(read)
        pages = max((found.total + shown["per"] - 1) // shown["per"], 1)
        return self._render(
            request,
            template,
            who,
            rows=found.entries,
            total=found.total,
            more=found.more,
            pages=pages,
            reasons=reasons,
            **shown,
            **more,
        )

    async def quarantine(self, request: web.Request, who: Who) -> web.StreamResponse:
        shown = self._listing(request, "/quarantine", State.QUARANTINED)
        return await self._list_page(
            request,
            who,
            "quarantine.html",
            shown,
            hint=request.query.get("hint") == "nothing-selected",
            bulk=shown["filters"].any() and not shown["errors"],
            export_link=_export_link(shown["query"]),
        )

    async def by_state(self, request: web.Request, who: Who) -> web.StreamResponse:
        """The messages in one state, a page at a time (issue 34 item 6): waiting (``new``),
        delayed (with when each goes again), in flight (whose lease), delivered, cancelled;
        with the quarantine list's filters and search. The quarantine has its own page."""
        name = request.match_info["state"]
        state = BROWSED.get(name)
        if state is None:
            if name == State.QUARANTINED.value:
                raise web.HTTPSeeOther(
                    "/quarantine" + (f"?{request.query_string}" if request.query_string else "")
                )
            return self._not_found(request, who, "no_state", name)
        shown = self._listing(request, f"/messages/{state.value}", state)
        return await self._list_page(
            request, who, "messages.html", shown, state=state.value, bounded=COUNTED_AT_MOST
        )

    async def find(self, request: web.Request, who: Who) -> web.StreamResponse:
        """What the operator looks for, ``FOUND_SHOWN`` a page, the newest first: every page of
        it, however many (issue 34 item 8)."""
        term = request.query.get("q", "").strip()
        per = finder.FOUND_SHOWN
        number = max(_int(request.query.get("page"), 1), 1)
        offset = min((number - 1) * per, 2**62)

        def read() -> tuple[list[dict[str, Any]], int, bool]:
            with transaction(self.engine, read_only=True) as connection:
                rows = finder.find(connection, term, per, offset)
                now = self.clock.now()
                for row in rows:  # a wait's figure from now, not from when it began
                    if row["state"] == State.DELAYED.value and row["last_error"]:
                        row["last_error"] = finder.wait_from_now(
                            row["last_error"], row["next_try_at"], now
                        )
                # Counted only when there may be more than this page shows.
                whole = offset == 0 and len(rows) < per
                # contract 13: a message is found once per channel; with more than one
                # channel each row says whose delivery it is (issue 31 item 7)
                several = len(set(channel_names(connection).values())) > 1
                counted = len(rows) if whole else finder.count_found(connection, term)
                targets.update(channel_targets(connection))
                return rows, counted, several

        targets: dict[str, str] = {}  # each channel's target by its name (a reason's words)
        rows, total, several = await asyncio.to_thread(read) if term else ([], 0, False)
        pages = max((total + per - 1) // per, 1)
        return self._render(
            request,
            "find.html",
            who,
            rows=rows,
            channels=several,
            targets=targets,
            term=term,
            total=total,
            shown=per,
            page=number,
            pages=pages,
            link=lambda page=None: (
                "/find?" + urlencode({"q": term, **({"page": str(page)} if page else {})})
            ),
        )

    async def message(self, request: web.Request, who: Who) -> web.StreamResponse:
        done = request.query.get("done")
        return await self.message_page(
            request, who, request.match_info["message_id"], done=done if done in DONE else None
        )

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
        """A message's page (issue 34 item 9): the product's name first, its price as a price
        and since when it is in its state, then its facts, its actions and its biography. An
        action that failed shows it again with the error and the note the operator typed
        (``error``, ``note``); one that was done says so (``done``)."""

        def read() -> dict[str, Any] | None:
            with transaction(self.engine, read_only=True) as connection:
                try:
                    story = biography(connection, message_id)
                except OperatorError:
                    return None
                row = (
                    connection.execute(
                        select(messages.c.payload, messages.c.name, aggregates.c.sku)
                        .select_from(messages.outerjoin(aggregates))
                        .where(messages.c.message_id == message_id)
                    )
                    .mappings()
                    .one()
                )
                # a delayed from- or to-state that waits for the marketplace said as a wait, not
                # a retry: the words ``exchange history`` says (``waits.awaiting_in_biography``)
                for e, waits in zip(
                    story["history"], awaiting_in_biography(story["history"]), strict=True
                ):
                    e["awaits"] = waits
                story["payload"] = _masked(row["payload"], self.config)
                story["price"] = finder.price_of(story["message"]["kind"], row["payload"])
                story["name"], story["sku"] = row["name"], row["sku"]
                # Since when its delivery (a record: the record) is in its state: the one
                # ``biography`` shows.
                shown = listed(channel_ids(connection), homeless=True)
                since = connection.execute(
                    select(shown.c.updated_at)
                    .where(shown.c.message_id == message_id)
                    .order_by(shown.c.channel_id)
                    .limit(1)
                ).scalar_one()
                story["since"] = since.isoformat()
                story["targets"] = channel_targets(connection)
                # Withheld, with a newer price waiting behind it (Wildberries' quarantine): the
                # page says not to confirm it, as ``status`` does (``ops.withheld_behind``).
                story["behind"] = list(behind_named(connection, [message_id]).values())
                # Quarantined where 1C has sent a newer version since: the advice is cancel,
                # and says whether that one goes, is in quarantine too (review 36 item 4) or is
                # withheld by the marketplace (rev36b):
                # the one decision the quarantine's list and the report take (``newer_advised``).
                # Superseded after quarantine, it says that advice, as the report does.
                newer = newer_version_sent(connection, message_id)
                shown_m = story["message"]
                story["superseded"] = newer.superseded
                story["newer"] = newer_advised(
                    shown_m.get("reason"),
                    story["targets"].get(shown_m.get("channel") or ""),
                    newer.sent,
                    superseded=newer.superseded,
                    held=newer.held,
                    withheld=newer.withheld,
                )
                return story

        story = await asyncio.to_thread(read)
        if story is None:
            return self._not_found(request, who, "no_message", message_id)
        return self._render(
            request,
            "message.html",
            who,
            status=status,
            m=story["message"],
            history=story["history"],
            payload=story["payload"],
            price=story["price"],
            product=story["name"],
            sku=story["sku"],
            since=story["since"],
            targets=story["targets"],
            error=error,
            note=note,
            done=done,
            # contract 13: its state on every channel; an action acts where it is quarantined
            # (or withheld), whichever channel this page's facts show.
            deliveries=story["deliveries"],
            quarantined_on=on_state(story["deliveries"], State.QUARANTINED),
            withheld_on=on_state(story["deliveries"], State.WITHHELD),
            quarantined=story["message"]["state"] == State.QUARANTINED.value
            or bool(on_state(story["deliveries"], State.QUARANTINED)),
            withheld=story["message"]["state"] == State.WITHHELD.value
            or bool(on_state(story["deliveries"], State.WITHHELD)),
            behind=[advice(newer, self._lang(request)) for newer in story["behind"]],
            newer=story["newer"],
            superseded=story["superseded"],
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
        """1C's exchanges (contract 9a), a page at a time, each staged file with the 1C
        document its prices carry and how many of them no worker has taken yet; and the bad
        messages the brokers delivered (contract 12: what the sources recorded in the
        quarantine)."""
        number = max(_int(request.query.get("page"), 1), 1)

        def read() -> dict[str, Any]:
            with transaction(self.engine, read_only=True) as connection:
                rows, total = exchanges_page(
                    connection, (number - 1) * EXCHANGES_SHOWN, EXCHANGES_SHOWN
                )
                refused = refused_records(connection, EXCHANGES_SHOWN)
            # The 1C document its prices carry (``source_ref``): kept with the package, in the
            # staging database (EXCHANGE_STAGING_URL) where that is another one, as are the
            # prices no worker has taken yet.
            versions = {r["version"] for r in rows if r["version"] is not None and r["intents"]}
            documents: dict[int, str] = {}
            waiting: dict[str, int] = {}
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
                    waiting = untaken_by_document(staged, list(documents.values()))
            refused_here: dict[str, int] = {}
            if documents:
                with transaction(self.engine, read_only=True) as connection:
                    refused_here = refused_by_document(connection, list(documents.values()))
            for r in rows:
                staged_here = r["outcome"] == "staged" and r["intents"]
                r["document"] = documents.get(r["version"]) if staged_here else None
                r["untaken"] = waiting.get(r["document"], 0) if r["document"] else 0
                r["refused"] = refused_here.get(r["document"], 0) if r["document"] else 0
            return {"rows": rows, "refused": refused, "total": total}

        shown = await asyncio.to_thread(read)
        pages = max((shown["total"] + EXCHANGES_SHOWN - 1) // EXCHANGES_SHOWN, 1)
        return self._render(
            request,
            "exchanges.html",
            who,
            rows=shown["rows"],
            refused=shown["refused"],
            total=shown["total"],
            page=number,
            pages=pages,
            link=lambda page=None: "/exchanges" + (f"?page={page}" if page else ""),
        )

    async def export(self, request: web.Request, who: Who) -> web.StreamResponse:
        """The quarantine's report with the quarantine list's filters (``QUERY_FIELDS``: the
        CLI's kind, aggregate, reason, since, until, superseded, and the list's search), in
        any format (issue 24 item 12); «Что сделать» names the pages' buttons."""
        fmt = request.query.get("format")
        lang = self._lang(request)
        filters, errors = self._filters(request)  # the quarantine list's, every one
        if filters.channel is not None:  # a channel that is none is said, never a 500

            def known() -> Filters:
                with transaction(self.engine, read_only=True) as connection:
                    return _known_channel(connection, filters, errors, lang)

            filters = await asyncio.to_thread(known)
        if fmt is not None and fmt not in FORMATS:
            errors.append(f"{word('bad_filter', lang)}: {fmt}")
        if fmt is None or errors:

            def present() -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
                with transaction(self.engine, read_only=True) as connection:
                    # each reason in its channels' words, as the quarantine's filter says it
                    return quarantine_by_reason(connection, self.clock.now()), (
                        _reasons_named_by(connection, Filters(), State.QUARANTINED)
                    )

            reasons, named = await asyncio.to_thread(present)
            return self._render(
                request,
                "export.html",
                who,
                status=400 if errors else 200,
                formats=FORMATS,
                errors=errors,
                query=dict(request.query),
                reasons=[(reason, e["count"], named[reason]) for reason, e in reasons.items()],
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
            # Made on the workbench: «Что сделать» names the buttons and where they are (a file
            # has none), never a command.
            data = dataclasses.replace(data, steps=file_steps(lang))
            return report.render(data, chosen, lang)

        body = await asyncio.to_thread(build)
        name = download_name(self.clock.now(), SUFFIXES[chosen], lang, self.config.display_tz)
        response = web.Response(
            body=body,
            content_type=_CONTENT_TYPES[chosen],
            headers={"Content-Disposition": content_disposition(name)},
        )
        return _secure(response)

    async def css(self, request: web.Request) -> web.StreamResponse:
        text = resources.files("exchange.web").joinpath("static/workbench.css").read_text("utf-8")
        return _secure(
            web.Response(
                text=text, content_type="text/css", headers={"Cache-Control": "max-age=3600"}
            )
        )


def _subjects(
    by_channel: dict[str, dict[str, Any]], registered: dict[str, str], named: bool, lang: Lang
) -> dict[str | None, str | None]:
    """Each worker row's channel as its pace names it where it is no site
    (``words.channel_subject``); with one channel registered, the process's own row (of no
    channel: the reporter writes the one channel's loop there) is that channel's."""
    subjects: dict[str | None, str | None] = {
        name: channel_subject(name, c["target"], lang, named=named)
        for name, c in by_channel.items()
    }
    if len(registered) == 1:
        subjects[None] = subjects.get(next(iter(registered)))
    return subjects


def _reasons_named_by(
    connection: Connection, filters: Filters, state: State
) -> defaultdict[str, str | None]:
    """Each reason the filter of a list in ``state`` offers, the target whose words name it
    (``words.reason_target``): the quarantine's each by the channels it is on, as ``status``
    and the dashboard name it (``status.quarantine_reason_targets``); another list's by the
    channels the filter shows. A marketplace's reason reads as the marketplace's
    («нет товара в каталоге площадки»), never the site's or the shop's."""
    ids = channel_ids(connection, filters.channel)
    targets = targets_by_id(connection)
    shown = reason_target(targets.get(i) for i in ids)
    if state is not State.QUARANTINED:
        return defaultdict(lambda: shown)
    return defaultdict(lambda: shown, quarantine_reason_targets(connection, ids))


def _held_behind(connection: Connection, entries: list[dict[str, Any]], lang: Lang) -> None:
    """Marks those of a page of withheld ``entries`` a newer price waits behind (Wildberries'
    price quarantine; ``ops.withheld_behind``) with its ``advice`` (``behind``): their rows
    say not to confirm them, as ``exchange withheld list`` and the message's page do, never
    the channel's «confirm it»."""
    waited = behind_named(connection, [e["message_id"] for e in entries])
    ids = {name: channel_id for channel_id, name in channel_names(connection).items()}
    for e in entries:
        newer = waited.get((e["message_id"], ids.get(e.get("channel") or "", -1)))
        if newer is not None:
            e["behind"] = advice(newer, lang)


def _paused_channel(figures: Any, by_channel: dict[str, dict[str, Any]], lang: Lang) -> str | None:
    """The channel whose loop reported the pause ``figures.pause`` says, named as an
    operator's words name it (contract 13), or None for a process's own row."""
    note = figures.pause["note"]
    for worker in figures.workers:
        channel = worker.get("channel")
        if worker["paused"] == note and channel in by_channel:
            return channel_named(channel, by_channel[channel]["target"], lang)
    return None


def _known_channel(
    connection: Connection, filters: Filters, errors: list[str], lang: Lang
) -> Filters:
    """The list's filters with its channel checked against the registry: a name that is no
    channel is said, as any bad filter is, and the list shows every channel's."""
    if filters.channel is None:
        return filters
    try:
        channel_ids(connection, filters.channel)
    except OperatorError:
        errors.append(f"{word('bad_filter', lang)}: {filters.channel}")
        return dataclasses.replace(filters, channel=None)
    return filters
