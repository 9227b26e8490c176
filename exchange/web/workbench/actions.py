"""The actions: retry and cancel (a preview, then a confirm acting on what it showed),
put first, release a withheld price, pause and resume."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web
from sqlalchemy import Connection

from exchange.db.channels import in_use
from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids
from exchange.delivery import withheld
from exchange.errors import ConfigurationError, Conflict, OperatorError
from exchange.ops import find as finder
from exchange.ops import quarantine
from exchange.ops.prioritize import prioritize
from exchange.ops.quarantine import (
    ActionResult,
    Filters,
    PreviewChanged,
    filter_time,
    list_quarantined,
)
from exchange.queue import control
from exchange.queue.channels import no_such_channel
from exchange.web.workbench.core import ACTION_PATHS, Core, Who
from exchange.words import error_words, word


class Actions(Core):
    def _note_required(self, request: web.Request, who: Who, back: str = "") -> web.Response:
        """Every action that changes something says why: without a note, this page (400),
        with «Назад» to the list it came from when there is one."""
        return self._render(
            request,
            "error.html",
            who,
            status=400,
            message=word("note_required", self._lang(request)),
            back=back,
        )

    # -- actions ---------------------------------------------------------------------------

    def _action_target(self, form: Any) -> tuple[list[str], Filters]:
        """What an action names: the messages checked on the list (``message_id``), with the
        list's page (``scope=page``: its ``page_id``s); or every message the list's filters
        select (``scope=all``: the filters as ``all_*``); or, from a preview, the filters
        themselves. ``ValueError`` for a date that is not one (``filter_time``)."""
        scope = {str(v) for v in form.getall("scope", [])}
        prefix = "all_" if "all" in scope else ""
        ids: list[str] = []
        if not prefix:
            ids = [str(i) for i in form.getall("message_id", []) if str(i).strip()]
            if "page" in scope:
                ids += [str(i) for i in form.getall("page_id", []) if str(i) not in ids]
        since = str(form.get(prefix + "since", "")) or None
        until = str(form.get(prefix + "until", "")) or None
        filters = Filters(
            kind=str(form.get(prefix + "kind", "")) or None,
            aggregate=str(form.get(prefix + "aggregate", "")).strip() or None,
            reason=str(form.get(prefix + "reason", "")) or None,
            since=filter_time(since) if since else None,
            until=filter_time(until) if until else None,
            search=str(form.get(prefix + "q", "")).strip() or None,
            superseded_after_quarantine=str(form.get(prefix + "superseded", "")) == "1",
            # contract 13: a list filtered by channel acts on that channel's deliveries only
            channel=str(form.get(prefix + "channel", "")) or None,
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
            filters.aggregate or "",
            "superseded" if filters.superseded_after_quarantine else "",
            filters.reason or "",
            filters.since.isoformat() if filters.since else "",
            filters.until.isoformat() if filters.until else "",
            filters.search or "",
            str(filters.channel or ""),
            *sorted(shown),
        ]
        return self._previews.tag("\n".join(fields))

    def _act(
        self,
        connection: Connection,
        who: Who,
        action: str,
        ids: list[str],
        filters: Filters,
        note: str,
        *,
        dry_run: bool,
        expected: list[str] | None = None,
    ) -> ActionResult:
        """The one ``ops.quarantine.act`` the CLI calls too: the preview is its dry run."""
        return quarantine.act(
            connection,
            action,
            ids,
            filters,
            operator=who.name,
            note=note,
            now=self.clock.now(),
            kinds=self.kinds,
            dry_run=dry_run,
            limit=self.config.bulk_limit,
            expected=expected,
            # A page checked whole may hold rejected rows: the preview lists them as skipped.
            skip_rejected=True,
        )

    def _plan(self, who: Who, action: str, ids: list[str], filters: Filters) -> dict[str, Any]:
        """What the action would do now (a dry run), as the preview page shows it."""
        with transaction(self.engine) as connection:
            result = self._act(connection, who, action, ids, filters, "preview", dry_run=True)
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
                "about": quarantine.described(
                    connection, [*result.touched, *(i for i, _ in result.skipped)]
                ),
                "superseded": superseded if action == "retry" else set(),
                "released": released,
                # contract 13: which channels the action touches, counted (several only)
                "per_channel": (result.per_channel if len(channel_ids(connection)) > 1 else {}),
            }

    async def _show_preview(
        self,
        request: web.Request,
        who: Who,
        action: str,
        ids: list[str],
        filters: Filters,
        changed: PreviewChanged | None = None,
        *,
        back: str = "/quarantine",
        error: str | None = None,
        note: str = "",
    ) -> web.StreamResponse:
        """The preview of an action; shown again, with ``error`` and the ``note`` the operator
        typed, when its confirmation failed (issue 34 item 9)."""
        try:
            plan = await asyncio.to_thread(self._plan, who, action, ids, filters)
        except OperatorError as exc:
            if ids and error:  # a confirmation that failed: the form again where it can be
                shown = await self._after_failure(
                    request, who, action, ids, filters, back=back, error=error, note=note
                )
                if shown is not None:
                    return shown
            return self._render(
                request, "error.html", who, status=400, message=str(exc), back=back, note=note
            )
        return self._render(
            request,
            "preview.html",
            who,
            status=409 if changed is not None else 400 if error else 200,
            error=error,
            note=note,
            action=action,
            ids=ids,
            filters=filters,
            note_missing=False,
            changed=changed,
            mac="" if ids else self._preview_mac(who, action, filters, plan["touched"]),
            back=back,
            **plan,
        )

    async def _after_failure(
        self,
        request: web.Request,
        who: Who,
        action: str,
        ids: list[str],
        filters: Filters,
        *,
        back: str,
        error: str,
        note: str,
    ) -> web.StreamResponse | None:
        """A confirmation on named messages failed because some are no longer quarantined
        (another operator acted, the message was delivered): the preview of those still
        quarantined, or one message's own page, with why and the note typed (the runbook's
        «форма и набранное примечание остаются»); None where neither can be shown."""

        def read() -> list[str]:
            with transaction(self.engine, read_only=True) as connection:
                return quarantine.still_quarantined(connection, ids)

        still = await asyncio.to_thread(read)
        if still and still != ids:
            return await self._show_preview(
                request, who, action, still, filters, back=back, error=error, note=note
            )
        if len(ids) == 1:
            return await self.message_page(request, who, ids[0], status=400, error=error, note=note)
        return None

    async def preview(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        action = str(form.get("action", ""))
        if action not in ("retry", "cancel"):
            raise web.HTTPBadRequest(text="action must be retry or cancel\n")
        try:
            ids, filters = self._action_target(form)
        except ValueError:
            raise web.HTTPBadRequest(text=word("bad_date", self._lang(request)) + "\n") from None
        back = _back(request, form)
        if not ids and not filters.any():
            # Nothing chosen: said on the list the button was pressed on, not an error page.
            hint = "hint=nothing-selected"
            raise web.HTTPSeeOther(back + ("&" if "?" in back else "?") + hint)
        return await self._show_preview(request, who, action, ids, filters, back=back)

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
            raise web.HTTPBadRequest(text=word("bad_date", self._lang(request)) + "\n") from None
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
        back = _back(request, form)

        def again(
            error: str, changed: PreviewChanged | None = None
        ) -> Awaitable[web.StreamResponse]:
            """The preview again, with why it was not done and the note typed (item 9)."""
            return self._show_preview(
                request, who, action, ids, filters, changed, back=back, error=error, note=note
            )

        if not note:
            return await again(word("note_required", self._lang(request)))

        def act() -> list[str]:
            with transaction(self.engine) as connection:
                return self._act(
                    connection, who, action, ids, filters, note, dry_run=False, expected=expected
                ).touched

        try:
            touched = await asyncio.to_thread(act)
        except PreviewChanged as changed:
            return await again("", changed)  # the difference says it: no error besides
        except OperatorError as exc:
            return await again(str(exc))
        return self._render(
            request, "done.html", who, action=action, touched=touched, back=_back(request, form)
        )

    async def prioritize(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        """Put one waiting message first (contract 6, issue 23 item 4): the same
        ``ops.prioritize.prioritize`` as ``exchange prioritize``, recorded in the message's
        history with the signed-in operator and the note; then its page again."""
        message_id = str(form.get("message_id", "")).strip()
        note = str(form.get("note", "")).strip()
        if not message_id:
            raise web.HTTPBadRequest(text="message_id is required\n")
        lang = self._lang(request)
        if not note:
            # The message's page again, saying what is missing (issue 34 item 9).
            return await self.message_page(
                request, who, message_id, status=400, error=word("note_required", lang)
            )

        def act() -> None:
            with transaction(self.engine) as connection:
                prioritize(
                    connection, [message_id], operator=who.name, note=note, now=self.clock.now()
                )

        try:
            await asyncio.to_thread(act)
        except OperatorError as exc:
            # Its page again, with why, and the note the operator typed still in its field.
            return await self.message_page(
                request, who, message_id, status=400, error=str(exc), note=note
            )
        raise web.HTTPSeeOther(f"/message/{quote(message_id, safe='')}?done=prioritize")

    async def release_withheld(
        self, request: web.Request, who: Who, form: Any
    ) -> web.StreamResponse:
        """Release one withheld price (contract 13): the same ``delivery.withheld.release`` as
        ``exchange withheld release``, with the signed-in operator and the note; then its page
        again, saying what the channel answered when it did not release it. It acts on the
        channel the form names (the page's withheld row), else on the one where the message is
        withheld (issue 32)."""
        message_id = str(form.get("message_id", "")).strip()
        note = str(form.get("note", "")).strip()
        channel = str(form.get("channel", "")).strip() or None
        if not message_id:
            raise web.HTTPBadRequest(text="message_id is required\n")
        lang = self._lang(request)
        if not note:
            return await self.message_page(
                request, who, message_id, status=400, error=word("note_required", lang)
            )
        if self.config.withheld_target is None:
            return await self.message_page(
                request, who, message_id, status=400, error=withheld.NO_WAY, note=note
            )
        make = self.config.withheld_target

        async def go() -> list[withheld.Released]:
            # (this runs in a thread of its own: the database's call may block here)
            name = withheld.choose_channel(self.engine, [message_id], channel)
            target = make(name)
            try:
                return await withheld.release(
                    self.engine,
                    target,
                    [message_id],
                    operator=who.name,
                    note=note,
                    now=self.clock.now,
                    channel=name,
                    staging_engine=self.staging_engine,
                    kinds=self.config.kinds,
                )
            finally:
                await target.aclose()

        try:
            # In a thread of its own, with its own loop: the database's calls block, and the
            # channel's client lives and closes in that loop.
            done = await asyncio.to_thread(asyncio.run, go())
        except (OperatorError, ConfigurationError) as exc:
            # A valid ask the price's state refuses (a newer price, live already) is a
            # conflict (409); an ask that cannot be read stays 400 (seller review 35).
            return await self.message_page(
                request,
                who,
                message_id,
                status=409 if isinstance(exc, Conflict) else 400,
                error=str(exc),
                note=note,
            )
        if not done[0].asked and not done[0].delivered:  # live already: nothing to release
            return await self.message_page(request, who, message_id, error=done[0].detail)
        raise web.HTTPSeeOther(f"/message/{quote(message_id, safe='')}?done=release")

    async def pause(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        """Pause delivery: every channel, or the one the form names (contract 13: ``channel``,
        as ``exchange pause --channel``); the note is required either way."""
        note = str(form.get("note", "")).strip()
        if not note:
            return self._note_required(request, who, back="/")
        channel = str(form.get("channel", "")).strip() or None

        def act() -> None:
            with transaction(self.engine) as connection:
                _known_channel(connection, channel)
                control.pause(
                    connection, operator=who.name, note=note, now=self.clock.now(), channel=channel
                )

        return await self._on_delivery(request, who, act)

    async def resume(self, request: web.Request, who: Who, form: Any) -> web.StreamResponse:
        """Resume delivery: every channel (every pause ends, each channel's own too), or the
        one the form names (its own pause; a pause of every channel holds it still)."""
        channel = str(form.get("channel", "")).strip() or None
        note = str(form.get("note", "")).strip()  # optional, as exchange resume --note

        def act() -> None:
            with transaction(self.engine) as connection:
                _known_channel(connection, channel)
                control.resume(
                    connection, operator=who.name, now=self.clock.now(), channel=channel, note=note
                )

        return await self._on_delivery(request, who, act)

    async def _on_delivery(
        self, request: web.Request, who: Who, act: Callable[[], None]
    ) -> web.StreamResponse:
        """A pause or a resume done, then the dashboard; a channel that is no channel in use
        is said on a page of its own (400), nothing done."""
        try:
            await asyncio.to_thread(act)
        except OperatorError as exc:
            lang = self._lang(request)
            return self._render(
                request,
                "error.html",
                who,
                status=400,
                message=error_words(str(exc), lang),
                back="/",
            )
        raise web.HTTPSeeOther("/")


def _known_channel(connection: Connection, channel: str | None) -> None:
    """A pause or resume of one channel names a registered channel not dropped (the rule of
    ``exchange pause --channel``)."""
    if channel is not None and in_use(connection, channel) is None:
        raise no_such_channel(channel)


def _back(request: web.Request, form: Any) -> str:
    """Where the operator came from (the form's ``back``, else the Referer of this site), as
    a path of this site: the preview's «Назад» and the hint go there; else the quarantine."""
    wanted = str(form.get("back", ""))
    if not wanted:
        referer = urlsplit(request.headers.get("Referer", ""))
        if referer.netloc == request.host and referer.path not in ACTION_PATHS:
            wanted = referer.path + (f"?{referer.query}" if referer.query else "")
    unsafe = "\\" in wanted or any(c <= " " for c in wanted)  # "/\t/x" is "//x" to a browser
    if not wanted.startswith("/") or wanted.startswith("//") or unsafe:
        return "/quarantine"
    return wanted
