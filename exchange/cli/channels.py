"""The channels (contract 13): list, seed (a new channel gets every current price), drop."""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from exchange import app as bootstrap
from exchange.cli.common import (
    JsonOpt,
    _guard,
    _header,
    _in_zone,
    _os_user,
    _reading_engine,
    _settings,
    app,
    cli_lang,
    err,
    out,
)
from exchange.db.engine import transaction
from exchange.domain.clock import SystemClock
from exchange.domain.states import State
from exchange.i18n import N_, Lang, _, ngettext, pgettext
from exchange.ops.channels import list_channels
from exchange.queue import channels as channel_ops
from exchange.words import name as code_name

channels_app = typer.Typer(
    help=N_("The places that receive the messages: list, seed a new one, drop one."),
    no_args_is_help=True,
)
app.add_typer(channels_app, name="channels")


@channels_app.command(
    "list",
    help=N_(
        "Every channel ever registered: its target, the kinds it takes, when it was added "
        "and dropped, whether this process has it configured, its deliveries by state."
    ),
)
def channels_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        configured = [channel.name for channel in settings.channels_in_force()]
        with transaction(engine, read_only=True) as connection:
            rows = list_channels(connection, configured)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    _header(settings)
    lang = cli_lang()
    table = Table()
    for column in (
        pgettext("channels list column", "name", lang),
        pgettext("channels list column", "target", lang),
        pgettext("channels list column", "takes", lang),
        pgettext("channels list column", "added", lang),
        pgettext("channels list column", "here", lang),
        pgettext("channels list column", "deliveries", lang),
    ):
        table.add_column(column, overflow="fold")
    zone = settings.display_tz
    for row in rows:
        if row["dropped_at"]:
            here = pgettext("channel", "dropped {when}", lang).format(
                when=_in_zone(row["dropped_at"], zone, lang)
            )
        elif row["configured"]:
            here = pgettext("channel", "configured", lang)
        else:
            here = pgettext("channel", "not configured", lang)
        counts = ", ".join(_counted(row["counts"], row["awaiting"], lang))
        table.add_row(
            Text(row["name"]),
            row["target"],
            ", ".join(row["takes"]),
            _in_zone(row["added_at"], zone, lang),
            here,
            counts or "—",
        )
    if not rows:
        table.caption = _("no channel is registered: exchange migrate registers them", lang)
    out.print(table)


# What a delayed delivery waits for (``waits.wait_of``) as ``words.state_said`` names it.
_WAITS = {"channel": "awaiting", "1c": "awaiting-1c", "person": "awaiting-person"}


def _counted(counts: dict[str, int], awaiting: dict[str, int], lang: Lang) -> list[str]:
    """A channel's deliveries by state in words: the delayed that wait (Ozon's hourly limit, a
    read-back, 1C's other price type, a person) by what they wait for, never as a retry
    (``waits.wait_of``: the one rule ``status`` and ``find`` read), the rest as delayed."""
    said: list[str] = []
    for state, count in counts.items():
        waits = awaiting if state == State.DELAYED.value else {}
        retried = count - sum(waits.values())
        if retried:
            said.append(f"{code_name('state', state, lang)} {retried}")
        said.extend(
            f"{code_name('state', _WAITS[wait], lang)} {waiting}"
            for wait, waiting in sorted(waits.items(), key=lambda kv: list(_WAITS).index(kv[0]))
            if waiting
        )
    return said


@channels_app.command(
    "seed",
    help=N_(
        "Give a new channel every current price: a delivery of the latest accepted version "
        "of every aggregate of a coalescing kind it takes, and of the strictly ordered "
        "messages accepted since it was registered (or from --from on). Creates deliveries "
        "only, in batches: run it again after a crash; exchange run delivers them."
    ),
)
def channels_seed(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help=N_("The channel's name."))],
    from_message: Annotated[
        str | None,
        typer.Option(
            "--from",
            help=N_(
                "Strictly ordered kinds from this message on (its intake order, inclusive), "
                "instead of from the channel's registration."
            ),
        ),
    ] = None,
    batch: Annotated[
        int,
        typer.Option(
            "--batch", min=1, help=N_("Deliveries created per transaction (default 2000).")
        ),
    ] = channel_ops.SEED_BATCH,
) -> None:
    lang = cli_lang()
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        bootstrap.register_channels(settings, engine)

        # Each batch's count said when the next one is done: the last batch's count is the
        # result line's, said once (issue 32: a seed of one batch printed its count twice).
        done_before: list[channel_ops.Seeded] = []

        def progress(done: channel_ops.Seeded) -> None:
            if done_before:
                created = done_before.pop().created
                said = ngettext(
                    "… {count} delivery created", "… {count} deliveries created", created, lang
                )
                err.print(said.format(count=created), markup=False, highlight=False)
            done_before.append(done)

        seeded = channel_ops.seed(
            engine,
            channel,
            settings.policies,
            now=SystemClock().now(),
            from_message=from_message,
            batch=batch,
            progress=progress,
        )
    said = ngettext(
        "channel {name}: {count} delivery created",
        "channel {name}: {count} deliveries created",
        seeded.created,
        lang,
    )
    said = said.format(name=channel, count=seeded.created)
    if not seeded.created:  # why none, in the same line
        said += "; " + _seeded_none(seeded, lang)
    out.print(said, markup=False, highlight=False)
    for kind, kept in sorted((seeded.kept or {}).items()):
        # Still kept on no channel (review 32k): a strictly ordered kind's accepted before the
        # channel was registered are given only from --from on, so the command says it.
        left = ngettext(
            "{count} message of kind {kind} is still kept on no channel (accepted before a "
            "channel took that kind): exchange channels seed {name} --from {oldest}",
            "{count} messages of kind {kind} are still kept on no channel (accepted before a "
            "channel took that kind): exchange channels seed {name} --from {oldest}",
            kept["count"],
            lang,
        )
        out.print(
            left.format(count=kept["count"], kind=kind, name=channel, oldest=kept["oldest"]),
            markup=False,
            highlight=False,
        )


def _seeded_none(seeded: channel_ops.Seeded, lang: Lang) -> str:
    """Why a seed created no delivery: what it walked had one already, an earlier seed walked
    it all, or nothing accepted is of the kinds the channel takes."""
    if seeded.walked:
        return ngettext(
            "the {walked} current message it takes already has a delivery on it (delivered or "
            "waiting)",
            "each of the {walked} current messages it takes already has a delivery on it "
            "(delivered or waiting)",
            seeded.walked,
            lang,
        ).format(walked=seeded.walked)
    if seeded.after_earlier:
        return _(
            "an earlier seed already gave it every message accepted until then; what came "
            "since reached it as it came",
            lang,
        )
    if not seeded.takes:
        return _("it takes no kind of message (its settings' takes)", lang)
    return _("no message of the kinds it takes ({kinds}) has been accepted", lang).format(
        kinds=", ".join(seeded.takes)
    )


@channels_app.command(
    "drop",
    help=N_(
        "Remove a channel: mark it dropped and cancel its waiting deliveries (reason "
        "channel-removed, the operator and the note in their history). Its name used again "
        "later is a new channel (seed it)."
    ),
)
def channels_drop(
    ctx: typer.Context,
    channel: Annotated[str, typer.Argument(help=N_("The channel's name."))],
    note: Annotated[str, typer.Option(help=N_("Why (required, kept for audit)."))],
    operator: Annotated[str | None, typer.Option(help=N_("Who acts (default: OS user)."))] = None,
) -> None:
    lang = cli_lang()
    with _guard():
        settings = _settings(ctx)
        engine, _staging = bootstrap.engines(settings)
        with transaction(engine) as connection:
            dropped = channel_ops.drop(
                connection,
                channel,
                operator=operator or _os_user(),
                note=note,
                now=SystemClock().now(),
            )
    said = ngettext(
        "channel {name} dropped: {count} waiting delivery cancelled",
        "channel {name} dropped: {count} waiting deliveries cancelled",
        dropped.cancelled,
        lang,
    )
    out.print(said.format(name=channel, count=dropped.cancelled), markup=False, highlight=False)
    if channel in {found.name for found in settings.channels_in_force()}:
        again = _(
            "channel {name} is still configured here: the next run or check registers it "
            "again as a new channel, with no deliveries, unless it is removed from "
            "EXCHANGE_CHANNELS",
            lang,
        )
        out.print(again.format(name=channel), markup=False, highlight=False)
    if dropped.in_flight:
        left = ngettext(
            "{count} delivery in flight is left to its worker, which records how it ended; "
            "if that worker is gone, it ends when its lease runs out (in about {seconds} s)",
            "{count} deliveries in flight are left to their workers, which record how they "
            "ended; if a worker is gone, its delivery ends when its lease runs out (at the "
            "latest in about {seconds} s)",
            dropped.in_flight,
            lang,
        )
        seconds = math.ceil(dropped.lease_left)
        out.print(
            left.format(count=dropped.in_flight, seconds=seconds), markup=False, highlight=False
        )
