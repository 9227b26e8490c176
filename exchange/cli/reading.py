"""Reading what happened: status, find, prioritize, history."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from exchange import app as bootstrap
from exchange.cli.channel_option import ChannelOpt
from exchange.cli.common import (
    JsonOpt,
    _guard,
    _header,
    _in_zone,
    _os_user,
    _reading_engine,
    _reading_staging_engine,
    _settings,
    _shown,
    app,
    cli_lang,
    out,
)
from exchange.cli.fit import print_table
from exchange.cli.withheld_shown import withheld_table
from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids, channel_targets
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import N_, Lang, _, pgettext
from exchange.ops.attention import attention
from exchange.ops.backlog import backlog, backlog_words, untaken_channels
from exchange.ops.channel_status import channel_figures, channels_table, dropped_channels
from exchange.ops.exchanges import exchanges_table, onec_exchanges
from exchange.ops.find import by_message, by_version, find_whole, next_look_in, wait_from_now
from exchange.ops.find import find as find_messages
from exchange.ops.notify import last_told
from exchange.ops.prioritize import prioritize
from exchange.ops.status import (
    biography,
    human_age,
    quarantine_reason_targets,
    serving,
    source_figures,
    sources_table,
    status,
    tables,
    when_ago,
)
from exchange.ops.waits import awaiting_in_biography
from exchange.queue import control
from exchange.report.words import answer_said, history_words
from exchange.settings import safe_url
from exchange.words import (
    channels_named,
    error_words,
    money,
    name,
    source_words,
    state_said,
)


@app.command(
    "status",
    help=N_(
        "Counts by state, the queue figures, workers, the quarantine by reason, "
        "blocked aggregates.\n\nExit codes, for monitoring: 0 nothing needs a person; "
        "1 something does (quarantine not empty, breaker open, delivery paused, a gap, "
        "a failed 1C exchange, work waiting with no live worker, messages of a kind no "
        "channel takes); 2 bad input or no database."
    ),
)
def status_command(
    ctx: typer.Context, as_json: JsonOpt = False, channel: ChannelOpt = None
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        staging_engine = _reading_staging_engine(settings)
        with (
            transaction(engine, read_only=True) as connection,
            contextlib.ExitStack() as stack,
        ):
            staged = (
                stack.enter_context(transaction(staging_engine, read_only=True))
                if staging_engine is not None
                else None
            )
            now = SystemClock().now()
            figures = status(
                connection,
                now,
                settings.policies,
                live_within=settings.live_within,
                channel=channel,
            )
            waiting = backlog(
                connection,
                now,
                settings.policies,
                timedelta(seconds=settings.live_within),
                channel=channel,
            )
            by_channel = channel_figures(
                connection,
                now,
                settings.policies,
                figures.workers,
                channel_ids(connection, channel),
                configured=[c.name for c in settings.channels_in_force()],
                live_within=settings.live_within,
            )
            onec = onec_exchanges(connection, now)
            registered = channel_targets(connection)
            dropped = dropped_channels(connection)
            held_channels = control.paused_channels(connection)
            pause = control.operator_pause(connection)
            told = last_told(connection)
            reason_targets = quarantine_reason_targets(connection, channel_ids(connection, channel))
            found = attention(
                connection,
                staged,
                figures,
                now,
                settings.policies,
                settings.live_within,
                channel=channel,
                # contract 13: a cause names its channel only where EXCHANGE_CHANNELS is set
                by_channel=by_channel if settings.channels is not None else None,
                configured=(
                    [c.name for c in settings.channels_in_force()]
                    if settings.channels is not None
                    else None
                ),
            )
        brokers = asyncio.run(
            source_figures(bootstrap.source(settings, engine, None), figures.workers)
        )
    needs = [cause.words() for cause in found.causes]  # English: --json's
    if as_json:
        document = {
            "database": safe_url(settings.database_url),
            **figures.as_json(),
            "backlog": waiting,
            "channels": by_channel,
            # ``pause`` (in the figures) replaces it; kept one release as an alias.
            "operator_pause": (
                {**pause, "paused_at": pause["paused_at"].isoformat()} if pause else None
            ),
            "needs_person": needs,
            "needs_person_causes": [cause.code for cause in found.causes],
            "intake": found.intake,
            "sign_ins_refused": found.refused_sign_ins,
            "exchanges_1c": onec,
            "notifications": told,
            "sources": brokers,
        }
        print(json.dumps(document, ensure_ascii=False))
    else:
        lang = cli_lang()
        _header(settings)
        # contract 13: where the words name the channels (the one rule: EXCHANGE_CHANNELS, or
        # more than one registered, whatever ``--channel`` shows) the words about one name it
        named = (
            {name: channel["target"] for name, channel in by_channel.items()}
            if channels_named(settings.channels is not None, len(registered))
            else None
        )
        # ``--channel``: that channel's loops only, and the processes whose loops serve it
        # (``status.serving``), never every channel's workers (issue 31 item 7, review 33);
        # --json keeps them all.
        on_it = (
            replace(figures, workers=serving(figures.workers, by_channel))
            if channel is not None
            else figures
        )
        shown = tables(
            on_it,
            settings.display_tz,
            lang,
            channels=len(by_channel),
            named=named,
            targets=registered,
            channel_pauses=held_channels,
            reason_targets=reason_targets,
        )
        # Each table at the terminal's width, its words whole (mpminor 2: at 80 columns the
        # headers broke mid-word and the withheld list overflowed)
        for table in shown:
            _table(table)
        if len(by_channel) > 1:
            _table(channels_table(by_channel, lang, settings.display_tz, dropped))
        if figures.counts.get("withheld"):  # contract 13: each with the channel's words
            listed = withheld_table(engine, lang, settings.display_tz, channel=channel)
            if listed is not None:
                _table(listed)
        _prose(_intake_line(found.intake, lang))
        said = backlog_words(
            waiting,
            paused=figures.delivery_paused,
            unreachable=figures.site_unreachable_since is not None,
            lang=lang,
            channels=named is not None,
            untaken=untaken_channels(by_channel),
            live=any(w["live"] for w in figures.workers),
        )
        _prose(said)
        _table(exchanges_table(onec, settings.display_tz, lang))
        if brokers:
            _table(sources_table(brokers, lang))
        if told is not None:
            _prose(
                _("operators last notified {when} by {sent_by}: {outcome}", lang).format(
                    when=when_ago(told["attempted_at"], settings.display_tz, now, lang),
                    sent_by=told["sent_by"],
                    outcome=told["outcome"] or _("no outcome recorded", lang),
                )
            )
        if needs:
            said = "; ".join(cause.words(lang) for cause in found.causes)
            _prose(_("needs a person: {causes}", lang).format(causes=said))
        else:
            _prose(_("nothing needs a person", lang))
    raise typer.Exit(1 if needs else 0)


def _table(table: Table) -> None:
    """A table of ``status`` at the terminal's width, its words whole (``fit``); its title
    above it at the left, wrapped between words at the terminal's width like the prose (never
    one line past the width, nor squeezed into a narrow table's)."""
    print_table(out, table)


def _prose(text: str) -> None:
    """A sentence of ``status`` wrapped at the terminal's width (COLUMNS) between words, as
    its tables' cells are, never cut mid-word by the terminal (issue 32); a word longer
    than the width (an id) alone is folded."""
    out.print(text, markup=False, highlight=False, soft_wrap=False)


def _intake_line(taken: dict[str, Any], lang: Lang = "en") -> str:
    if not taken["untaken"]:
        return _("received from 1C, not taken yet: 0", lang)
    return _("received from 1C, not taken yet: {count} (the oldest {age} ago)", lang).format(
        count=taken["untaken"], age=human_age(taken["oldest_untaken_age_s"], lang)
    )


@app.command(
    "find",
    help=N_(
        "Any message in any state by the beginning of a SKU, aggregate, id, or of any "
        "word of its 1C document or product name."
    ),
)
def find_command(
    ctx: typer.Context,
    term: Annotated[
        str,
        typer.Argument(
            help=N_(
                "The beginning of a SKU, an aggregate or a message_id, or of any word of a 1C "
                "document (source_ref) or a product name."
            )
        ),
    ],
    as_json: JsonOpt = False,
    channel: ChannelOpt = None,
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            rows = _shown(find_whole(connection, term, channel=channel))
            several = len(channel_ids(connection)) > 1
    if as_json:
        # Contract 6: a list, an object per message (its state on each channel in
        # ``deliveries``), each naming the database it was read from, as ``quarantine list``.
        database = safe_url(settings.database_url)
        found = [{**message, "database": database} for message in by_message(rows)]
        print(json.dumps(found, ensure_ascii=False))
        return
    _header(settings)
    _print_found(rows, settings.display_tz, cli_lang(), several=several, now=SystemClock().now())
    if not rows:
        out.print(_("no message matches {term!r}", cli_lang()).format(term=term), markup=False)


@app.command(
    "prioritize",
    help=N_(
        "Send these before any backlog: only their place in the claim order changes "
        "(never Retry-After, the pace, the breaker, a pause or strict order), until "
        "each is sent."
    ),
)
def prioritize_command(
    ctx: typer.Context,
    targets: Annotated[
        list[str],
        typer.Argument(help=N_("message_ids, or price aggregates (their waiting message).")),
    ],
    note: Annotated[str, typer.Option(help=N_("Why (required, kept for audit)."))],
    operator: Annotated[str | None, typer.Option(help=N_("Who acts (default: OS user)."))] = None,
    channel: ChannelOpt = None,
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine) as connection:
            chosen = prioritize(
                connection,
                targets,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
                channel=channel,
            )
    first = _("first in line: {message_id}", cli_lang())
    for message_id in chosen:
        said = first.format(message_id=message_id)
        out.print(said, markup=False, highlight=False, soft_wrap=True)


def _print_found(
    rows: list[dict[str, Any]],
    zone: str,
    lang: Lang = "en",
    *,
    several: bool = False,
    now: datetime | None = None,
) -> None:
    """Each message's full id on a line of its own (a table would cut it), then its facts: in
    Russian the state, kind and reason in words, the price as Russian writes it, the time in
    the display zone («05.12.2026 14:30:00 MSK»); the id, SKU and codes as they are. A
    message's deliveries (one row each, contract 13) follow its id, said once."""
    last = None
    for row in rows:
        if row["message_id"] != last:
            out.print(row["message_id"], markup=False, highlight=False, soft_wrap=True)
        last = row["message_id"]
        facts = _found_facts(row, zone, lang, now)
        if several:  # contract 13: each delivery's channel (a rejected record: none)
            facts = (
                "    "
                + _("channel {channel}:", lang).format(
                    channel=_channel_said(row, zone, lang) if row["channel"] else "-"
                )
                + " "
                + facts.lstrip()
            )
        out.print(facts, markup=False, highlight=False)
        if row.get("delivered_nowhere"):
            out.print("    " + nowhere_words(row, lang), markup=False, highlight=False)


def _channel_said(row: dict[str, Any], zone: str, lang: Lang) -> str:
    """A delivery's channel as ``find`` and ``history`` name it: its name, and a dropped
    channel's «ozon (удалён …)» / "ozon (removed …)", never the bare name a channel added
    again under it has (review ozon 34b: the removed one's ``cancelled`` read as the
    channel's state)."""
    removed = row.get("channel_removed_at")
    if not removed:
        return str(row["channel"])
    return _("{channel} (removed {when})", lang).format(
        channel=row["channel"], when=_in_zone(removed, zone, lang)
    )


def nowhere_words(message: dict[str, Any], lang: Lang) -> str:
    """A message with no delivery on any channel (contract 1: kept, never invisible): why,
    and the command that gives it to a channel (``channels seed --from``: a strictly ordered
    kind is otherwise given only what came in after the channel's registration)."""
    if message.get("no_channel_takes"):
        said = _(
            "no channel takes {kind}: this message is delivered nowhere. Configure a channel "
            "whose takes include {kind}, then: exchange channels seed NAME --from {message_id}",
            lang,
        )
    else:
        said = _(
            "on no channel: it came in before a channel that takes {kind} was registered. To "
            "deliver it: exchange channels seed NAME --from {message_id}",
            lang,
        )
    # The first earlier version kept on no channel, when there is one (review 32k: a seed from
    # this one would skip it).
    start = message.get("seed_from") or message["message_id"]
    return said.format(kind=message["kind"], message_id=start)


def _found_facts(row: dict[str, Any], zone: str, lang: Lang, now: datetime | None = None) -> str:
    reason = row["reason"] or "-"
    if lang != "en":
        reason = name("reason", row["reason"], lang, row.get("target")) or "—"
    facts = [
        _("{state}  {kind} {aggregate} v{version}", lang).format(
            state=_state_shown(row, lang),
            kind=name("kind", row["kind"], lang) if lang != "en" else row["kind"],
            aggregate=row["aggregate"],
            version=row["version"],
        ),
        _("reason={reason}", lang).format(reason=reason),
        _("1C={source}", lang).format(
            source=(source_words(row["source_ref"], lang) or "—")
            if lang != "en"
            else row["source_ref"] or "-"
        ),
    ]
    if row.get("price"):  # as ``quarantine list`` and the workbench write it (mpminor 7)
        price = money(row["price"], row["currency"], lang)
        facts.append(_("price={price}", lang).format(price=price))
    if row.get("name"):
        facts.append(_("name={name}", lang).format(name=row["name"]))
    facts.append(_("updated {when}", lang).format(when=_in_zone(row["updated_at"], zone, lang)))
    if row["state"] == "delayed" and row.get("last_error"):
        # why it waits, and until when (a channel's uncharged wait has no reason: its words
        # are its last detail, review 32b finding 10a)
        # its wait counted from now, not the figure written when the wait began
        said = row["last_error"]
        left = None
        if now is not None:
            left = next_look_in(said, row.get("next_try_at"), now)
            said = wait_from_now(said, row.get("next_try_at"), now)
        facts.append(_waits(error_words(said, lang), lang))
        if left is not None:  # words with no figure of their own: when it goes on (words38)
            again = (
                _("looks again in {age}", lang)
                if row.get("awaiting")
                else _("tried again in {age}", lang)
            )
            facts.append(again.format(age=human_age(left, lang)))
    return "    " + "  ".join(facts)


def _state_shown(row: dict[str, Any], lang: Lang) -> str:
    """A delivery's state as ``find`` and ``history`` print it: in words in Russian; in
    English its code, except a wait for the channel (or for 1C, or for a person), said in
    words as in Russian, never ``delayed`` as a retry (review ozon: English showed ``delayed``
    for a price waiting for Ozon's hour while Russian said «ждёт площадку»)."""
    state = row["state"]
    awaiting = bool(row.get("awaiting"))
    if lang != "en" or (state == "delayed" and awaiting):
        return state_said(
            state,
            lang,
            awaiting=awaiting,
            on_1c=bool(row.get("awaiting_1c")),
            on_person=bool(row.get("awaiting_person")),
        ) or ("—" if lang != "en" else "-")
    return state or "-"


def _waits(said: str, lang: Lang) -> str:
    """A delayed row's detail after «ждёт: » / "waits: ", unless it already says it waits
    (Ozon's hold reads «ждёт: за этот час…», "held: …"; a companion's «ждёт {m}…»): said
    once, never «ждёт: ждёт: …»."""
    prefix = _("waits: {detail}", lang)
    word = prefix.split("{detail}")[0].rstrip(": ")
    if said.startswith(("held:", "waits", word)):
        return said
    return prefix.format(detail=said)


def _one_per_message(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``find``'s rows, one per message (its first live channel's, as ``find`` says its
    state: ``by_message``; a dropped channel's only when no live one has it): a message
    delivered on two channels is one message to choose, not two. Review rev35ow: after a drop
    and re-add the list said the dropped channel's «cancelled» where ``find`` said the live
    channel's state."""
    kept: dict[str, dict[str, Any]] = {}
    for row in found:
        was = kept.get(row["message_id"])
        if was is None or (
            was.get("channel_removed_at") and row["channel"] and not row.get("channel_removed_at")
        ):
            kept[row["message_id"]] = row
    return list(kept.values())


def _delivery_line(
    delivery: dict[str, Any], lang: Lang = "en", target: str | None = None, zone: str = "UTC"
) -> str:
    """A message's delivery on one channel (of ``target``), as ``history`` prints it under the
    headline."""
    state, reason = _state_shown(delivery, lang), delivery["reason"]
    if lang != "en":
        reason = name("reason", reason, lang, target)
    return _(
        "  channel {channel}: {state}, reason: {reason}, charged attempts: {attempts}", lang
    ).format(
        channel=_channel_said(delivery, zone, lang),
        state=state,
        reason=reason or "-",
        attempts=delivery["attempts"],
    )


@app.command(help=N_("The message's biography."))
def history(
    ctx: typer.Context,
    message_id: Annotated[
        str,
        typer.Argument(
            help=N_(
                "A message_id, or what finds one message: SKU, aggregate, 1C document "
                "(source_ref) or an id prefix."
            )
        ),
    ],
    as_json: JsonOpt = False,
    channel: ChannelOpt = None,
) -> None:
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            found = _one_per_message(find_messages(connection, message_id, channel=channel))
            exact = [r for r in found if r["message_id"] == message_id]
            if not exact and len(found) > 1:
                if not as_json:
                    _header(settings)
                _print_found(
                    _shown(by_version(found)),
                    settings.display_tz,
                    cli_lang(),
                    now=SystemClock().now(),
                )
                raise ExchangeError(
                    f"{message_id!r} matches {len(found)} messages: give one of the ids above"
                )
            chosen = (
                exact[0]["message_id"]
                if exact
                else (found[0]["message_id"] if found else message_id)
            )
            bio = _shown(biography(connection, chosen, channel=channel))
            targets = channel_targets(connection)  # a marketplace's reasons in its words
    if as_json:
        print(json.dumps({"database": safe_url(settings.database_url), **bio}, ensure_ascii=False))
        return
    _header(settings)
    m, lang = bio["message"], cli_lang()
    # the delivery's count is of charged attempts, said so: a wait's look is numbered in its row
    # (the lease's attempt) but not charged (words38 item 3: «attempts=0» beside «attempt 1»)
    if lang == "en":
        headline = (
            f"{m['message_id']}  {m['kind']} {m['aggregate']} v{m['version']}  "
            f"state={_state_shown(m, lang)} reason={m['reason']} "
            f"charged_attempts={m['attempts']}"
        )
    else:  # the state, the kind and the reason in words; the reason's code beside its name
        headline = _(
            "{message_id}  {kind} {aggregate} v{version}  state: {state}, reason: {reason}, "
            "charged attempts: {attempts}",
            lang,
        ).format(
            message_id=m["message_id"],
            kind=name("kind", m["kind"], lang),
            aggregate=m["aggregate"],
            version=m["version"],
            state=state_said(
                m["state"],
                lang,
                awaiting=bool(m.get("awaiting")),
                on_1c=bool(m.get("awaiting_1c")),
                on_person=bool(m.get("awaiting_person")),
            )
            or "—",
            reason=name("reason", m["reason"], lang, targets.get(m["channel"] or "")) or "—",
            attempts=m["attempts"],
        )
    out.print(headline, markup=False)
    for waiting in m.get("waiting_on_it") or ():  # words35b item 1: 1C did send it
        said = "  " + _(
            "1C's {aggregate} v{version} ({message_id}) waits for an operator's decision on "
            "this price: retrying this one sends both together, cancelling it lets that one go",
            lang,
        ).format(**waiting)
        out.print(said, markup=False, highlight=False)
    if m.get("delivered_nowhere"):
        out.print("  " + nowhere_words(m, lang), markup=False, highlight=False)
    if len(bio["deliveries"]) > 1:  # contract 13: its state on every channel
        for delivery in bio["deliveries"]:
            target = targets.get(delivery["channel"])
            line = _delivery_line(delivery, lang, target, settings.display_tz)
            out.print(line, markup=False, highlight=False)
    table = Table()
    # contract 13: with more than one channel, each event says whose delivery it is (intake's
    # own events are no channel's: "—")
    by_channel = len(bio["deliveries"]) > 1
    for column in (
        pgettext("history column", "at", lang),
        *([pgettext("history column", "channel", lang)] if by_channel else []),
        pgettext("history column", "event", lang),
        pgettext("history column", "from", lang),
        pgettext("history column", "to", lang),
        pgettext("history column", "worker", lang),
        pgettext("history column", "attempt", lang),
        pgettext("history column", "leased", lang),
        pgettext("history column", "http", lang),
        pgettext("history column", "detail", lang),
    ):
        table.add_column(column, overflow="fold")  # never cut: wrap
    # a delayed state that waits for the marketplace is said as a wait, not a retry (the rule
    # ``find`` and ``status`` share, read along the story)
    awaits = awaiting_in_biography(bio["history"])
    for e, waits in zip(bio["history"], awaits, strict=True):
        detail = error_words(e["detail"], lang) if e["detail"] else ""
        if e["operator"]:
            detail += f" [{e['operator']}: {e['note'] or ''}]"
        leased = _in_zone(e["leased_at"], settings.display_tz, lang)
        if e["lease_until"]:  # unanswered (or still in flight): when its lease runs out
            leased += f" – {_in_zone(e['lease_until'], settings.display_tz, lang)}"
        event, from_state, to_state = history_words(
            e["event"], e["from"], e["to"], lang, waits, e["detail"]
        )
        cells = (
            _in_zone(e["at"], settings.display_tz, lang),
            *(
                [_channel_said(e, settings.display_tz, lang) if e.get("channel") else "—"]
                if by_channel
                else []
            ),
            event,
            from_state or "",
            to_state or "",
            e["worker"] or "",
            str(e["attempt"] or ""),
            leased,
            answer_said(e["http_status"], e["error_class"], lang) or "",
            detail,
        )
        # Text, not str: rich would read "[operator: note]" or data from the site as markup.
        table.add_row(*(Text(cell) for cell in cells))
    out.print(table)
