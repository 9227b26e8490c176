"""What waits for a person: list, export, retry, cancel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from exchange import app as bootstrap
from exchange.cli.channel_option import ChannelOpt
from exchange.cli.common import (
    AggregateOpt,
    JsonOpt,
    KindOpt,
    LimitOpt,
    ReasonOpt,
    SinceOpt,
    SupersededOpt,
    UntilOpt,
    _filters,
    _guard,
    _header,
    _os_user,
    _reading_engine,
    _settings,
    _shown,
    cli_lang,
    err,
    out,
    quarantine_app,
)
from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids, channel_targets
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import N_, Lang, _, ngettext, pgettext
from exchange.ops.find import check_filters, released_by_cancel
from exchange.ops.quarantine import (
    ActionResult,
    Filters,
    act,
    check_request,
    list_quarantined,
)
from exchange.ops.status import (
    quarantine_by_reason,
    when_ago,
)
from exchange.report import collect as report
from exchange.settings import safe_url
from exchange.words import channels_named, error_words, money, name


@quarantine_app.command("list", help=N_("What waits for a person."))
def quarantine_list(
    ctx: typer.Context,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    as_json: JsonOpt = False,
    channel: ChannelOpt = None,
) -> None:
    filters = on_channel(_filters(kind, aggregate, reason, since, until, superseded), channel)
    with _guard():
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            rows = _shown(list_quarantined(connection, filters, priced=not as_json))
            # a marketplace's reason in its words (``words.on_marketplace``), as ``find`` says it
            targets = channel_targets(connection)
            registered = len(channel_ids(connection))
            present = (
                quarantine_by_reason(
                    connection, SystemClock().now(), channel_ids(connection, channel)
                )
                if not rows and filters.any()
                else {}
            )
    if as_json:
        # Contract 6 promises a list of objects: each names the database it was read from.
        database = safe_url(settings.database_url)
        print(json.dumps([{**row, "database": database} for row in rows], ensure_ascii=False))
        return
    _header(settings)
    lang = cli_lang()
    if present:
        waiting = ", ".join(f"{r} ({e['count']})" for r, e in present.items())
        said = _(
            "no quarantined message matches these filters; the quarantine holds: {waiting}", lang
        )
        err.print(said.format(waiting=waiting), markup=False, highlight=False)
    table = Table(title=_("quarantine: {count}", lang).format(count=len(rows)))
    # contract 13: with more than one channel (the one rule of the words), each row says whose
    # delivery it is: one message quarantined on two channels is two rows, told apart
    by_channel = channels_named(settings.channels is not None, registered) or (
        len({row["channel"] for row in rows if row["channel"]}) > 1
    )
    columns = (
        pgettext("quarantine list column", "message_id", lang),
        *([pgettext("quarantine list column", "channel", lang)] if by_channel else []),
        pgettext("quarantine list column", "product", lang),
        pgettext("quarantine list column", "price", lang),
        pgettext("quarantine list column", "kind", lang),
        pgettext("quarantine list column", "aggregate", lang),
        pgettext("quarantine list column", "v", lang),
        pgettext("quarantine list column", "reason", lang),
        pgettext("quarantine list column", "tries", lang),
        pgettext("quarantine list column", "since", lang),
        pgettext("quarantine list column", "last error", lang),
    )
    for column in columns:
        table.add_column(column, overflow="fold")  # never cut: wrap
    now = SystemClock().now()
    for row in rows:
        # Russian names the kind and the reason in words, the reason's code beside it (what
        # --reason takes); English keeps the codes.
        target = targets.get(row["channel"] or "")
        reason_shown = (
            row["reason"] if lang == "en" else name("reason", row["reason"], lang, target)
        )
        if row["superseded_after_quarantine"]:
            reason_shown += _(" (superseded after quarantine)", lang)
        # Text, not markup: data with [brackets] (a site's error, a 1C reference) shows as is.
        table.add_row(
            *(
                Text(value)
                for value in (
                    row["message_id"],
                    *([row["channel"] or "—"] if by_channel else []),
                    # the product and its price lead, as on the workbench's list (issue 34)
                    row["name"] or "—",
                    money(row["price"], row["currency"], lang),
                    row["kind"] if lang == "en" else name("kind", row["kind"], lang),
                    row["aggregate"],
                    str(row["version"]),
                    reason_shown,
                    str(row["attempts"]),
                    # when, in EXCHANGE_DISPLAY_TZ, and how long it has waited
                    when_ago(row["quarantined_at"], settings.display_tz, now, lang),
                    error_words(row["last_error"] or "", lang)[:80],
                )
            )
        )
    out.print(table)


@quarantine_app.command("export", help=N_("The operators' report, written to a file (atomically)."))
def quarantine_export(
    ctx: typer.Context,
    output: Annotated[
        Path, typer.Option("--output", help=N_("The file to write."), dir_okay=False)
    ],
    fmt: Annotated[
        report.ReportFormat | None,
        typer.Option(
            "--format",
            help=N_("csv, xlsx, html or json (default: the --output suffix, else json)."),
        ),
    ] = None,
    lang: Annotated[
        report.Lang | None,
        typer.Option("--lang", help=N_("Labels in ru or en (default EXCHANGE_REPORT_LANG).")),
    ] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    channel: ChannelOpt = None,
) -> None:
    filters = on_channel(_filters(kind, aggregate, reason, since, until, superseded), channel)
    chosen = fmt or report.format_for(output)
    with _guard():
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine = _reading_engine(settings)
        with transaction(engine, read_only=True) as connection:
            data = report.collect(
                connection,
                filters,
                SystemClock().now(),
                mask_fields=settings.report_mask_fields,
                secrets=report.known_secrets(settings),
                zone=settings.display_tz,
            )
        try:
            report.export(data, chosen, lang or settings.report_lang, output)
        except OSError as exc:
            raise ExchangeError(f"cannot write {output}: {exc.strerror}") from None
    said = ngettext(
        "wrote {count} entry to {output} ({format})",
        "wrote {count} entries to {output} ({format})",
        len(data.entries),
        cli_lang(),
    )
    out.print(said.format(count=len(data.entries), output=output, format=chosen), markup=False)


@quarantine_app.command(
    "retry",
    help=N_("Replay with the same message_id (ids, or filters: shown first, done with --yes)."),
)
def quarantine_retry(
    ctx: typer.Context,
    message_ids: Annotated[list[str] | None, typer.Argument(help=N_("Messages to replay."))] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=N_("Show, change nothing."))] = False,
    yes: Annotated[bool, typer.Option("--yes", help=N_("Confirm a bulk retry."))] = False,
    limit: LimitOpt = None,
    operator: Annotated[str | None, typer.Option(help=N_("Who acts (default: OS user)."))] = None,
    note: Annotated[str | None, typer.Option(help=N_("Why."))] = None,
    channel: ChannelOpt = None,
) -> None:
    ids = message_ids or []
    filters = on_channel(_filters(kind, aggregate, reason, since, until, superseded), channel)
    _operator_action(
        ctx,
        "retry",
        "retried",
        ids,
        filters,
        limit=limit,
        dry_run=dry_run,
        yes=yes,
        operator=operator,
        note=note,
    )


@quarantine_app.command(
    "cancel",
    help=N_(
        "End quarantined messages for good, kept for audit (ids, or filters: shown "
        "first, done with --yes)."
    ),
)
def quarantine_cancel(
    ctx: typer.Context,
    note: Annotated[str, typer.Option(help=N_("Why (required, kept for audit)."))],
    message_ids: Annotated[list[str] | None, typer.Argument(help=N_("Messages to end."))] = None,
    kind: KindOpt = None,
    aggregate: AggregateOpt = None,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    superseded: SupersededOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=N_("Show, change nothing."))] = False,
    yes: Annotated[bool, typer.Option("--yes", help=N_("Confirm a bulk cancel."))] = False,
    limit: LimitOpt = None,
    operator: Annotated[str | None, typer.Option(help=N_("Who acts (default: OS user)."))] = None,
    channel: ChannelOpt = None,
) -> None:
    ids = message_ids or []
    filters = on_channel(_filters(kind, aggregate, reason, since, until, superseded), channel)
    _operator_action(
        ctx,
        "cancel",
        "cancelled",
        ids,
        filters,
        limit=limit,
        dry_run=dry_run,
        yes=yes,
        operator=operator,
        note=note,
    )


def _operator_action(
    ctx: typer.Context,
    action: str,
    done: str,
    ids: list[str],
    filters: Filters,
    *,
    limit: int | None,
    dry_run: bool,
    yes: bool,
    operator: str | None,
    note: str | None,
) -> None:
    """The rules every manual action shares: ids or filters, a bulk one is a dry run until
    --yes, and --limit raises the bulk limit."""
    if ids and limit is not None:
        raise typer.BadParameter(
            _("--limit goes with filters (a bulk {action}), not message ids", cli_lang()).format(
                action=action
            )
        )
    bulk = not ids
    dry = dry_run or (bulk and not yes)
    with _guard():
        check_request(ids, filters, action)
        settings = _settings(ctx)
        check_filters(filters.reason, filters.kind, settings.kinds)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine) as connection:
            result = act(
                connection,
                action,
                ids,
                filters,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
                kinds=settings.policies,
                dry_run=dry,
                limit=limit or settings.bulk_limit,
            )
            released = (
                released_by_cancel(connection, result.touched, settings.policies)
                if action == "cancel"
                else []
            )
            several = len(channel_ids(connection)) > 1
    _print_action(result, action, done, dry=dry, unconfirmed=bulk and not yes and not dry_run)
    if several:
        for line in per_channel_lines(result.per_channel, cli_lang()):
            out.print(line, markup=False, highlight=False)
    for entry in released:
        # The consequence a cancel has beyond the messages it names (strict order).
        if dry:
            said = ngettext(
                "then {count} later version of {kind} {aggregate} (from v{first}) will go out "
                "without the cancelled one",
                "then {count} later versions of {kind} {aggregate} (from v{first}) will go out "
                "without the cancelled one",
                entry["count"],
                cli_lang(),
            )
        else:
            said = ngettext(
                "now {count} later version of {kind} {aggregate} (from v{first}) goes out "
                "without the cancelled one",
                "now {count} later versions of {kind} {aggregate} (from v{first}) go out "
                "without the cancelled one",
                entry["count"],
                cli_lang(),
            )
        values = {"first": entry["first_version"], "kind": name("kind", entry["kind"], cli_lang())}
        out.print(
            said.format(count=entry["count"], aggregate=entry["aggregate"], **values),
            markup=False,
            highlight=False,
        )


def on_channel(filters: Filters, channel: str | None) -> Filters:
    """The filters narrowed to ``--channel`` (every channel's without it)."""
    return replace(filters, channel=channel) if channel is not None else filters


def per_channel_lines(counted: dict[str | None, int], lang: Lang = "en") -> list[str]:
    """A manual action's count per channel (contract 13: the preview counts per channel):
    «  канал ozon: 2», and intake's rejected records, no channel's, last."""
    lines = []
    for channel, count in counted.items():
        if channel is None:
            said = _("  intake's rejected records: {count}", lang)
        else:
            said = _("  on channel {channel}: {count}", lang)
        lines.append(said.format(channel=channel, count=count))
    return lines


def _print_action(
    result: ActionResult, action: str, done: str, *, dry: bool, unconfirmed: bool
) -> None:
    # ``touched`` holds a message once per channel it moves on (contract 13): the words count
    # and name each message once, the per-channel lines count the deliveries
    touched = list(dict.fromkeys(result.touched))
    count, said = len(touched), _action_words(action, dry, len(touched))
    if not count:
        # nothing to do is said so, never «будут отменены 0 … чтобы отменить 0, добавьте
        # --yes» (review mpadvice item 8)
        said = (
            _("nothing to retry: no message is quarantined as asked", cli_lang())
            if action == "retry"
            else _("nothing to cancel: no message is quarantined as asked", cli_lang())
        )
        unconfirmed = False
    out.print(said.format(count=count), markup=False)
    for message_id in touched:
        out.print(f"  {message_id}", markup=False)
    for message_id, why in dict.fromkeys(result.skipped):
        skipped = _("  skipped {message_id}: {why}", cli_lang())
        out.print(
            skipped.format(message_id=message_id, why=error_words(why, cli_lang())), markup=False
        )
    if unconfirmed:
        if action == "retry":
            said = ngettext(
                "nothing changed: add --yes to retry it",
                "nothing changed: add --yes to retry these",
                count,
                cli_lang(),
            )
        else:
            said = ngettext(
                "nothing changed: add --yes to cancel it",
                "nothing changed: add --yes to cancel these",
                count,
                cli_lang(),
            )
        out.print(said.format(count=count), markup=False)


def _action_words(action: str, dry: bool, count: int) -> str:
    """What a manual action did (or would do), with its count: «повторено 2 сообщения»."""
    if action == "retry" and dry:
        return ngettext(
            "would retry {count} message", "would retry {count} messages", count, cli_lang()
        )
    if action == "retry":
        return ngettext("retried {count} message", "retried {count} messages", count, cli_lang())
    if dry:
        return ngettext(
            "would cancel {count} message", "would cancel {count} messages", count, cli_lang()
        )
    return ngettext("cancelled {count} message", "cancelled {count} messages", count, cli_lang())
