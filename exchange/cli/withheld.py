"""Prices a channel took and withholds from buyers until a person confirms them (contract 13):
``exchange withheld release``."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer

from exchange import app as bootstrap
from exchange.cli.channel_option import ChannelOpt
from exchange.cli.common import (
    JsonOpt,
    _guard,
    _header,
    _os_user,
    _reading_engine,
    _settings,
    app,
    cli_lang,
    out,
)
from exchange.cli.fit import print_table
from exchange.cli.withheld_shown import withheld_entries, withheld_table
from exchange.delivery import withheld
from exchange.domain.clock import SystemClock
from exchange.i18n import N_, Lang, _
from exchange.words import detail_words

withheld_app = typer.Typer(
    help=N_(
        "Prices a channel took and withholds from buyers until a person confirms them: release."
    ),
    no_args_is_help=True,
)
app.add_typer(withheld_app, name="withheld")


def release_headline(done: list[withheld.Released], lang: Lang) -> str:
    """How many were asked, how many the channel released and did not, and of how many
    buyers see the new price now (a count, never read as a price: review 32): never
    "released" for a release the channel did not carry out."""
    released = sum(1 for r in done if r.asked)
    # live already: the channel shows the price (an earlier release took effect), nothing
    # was left to release, and that is no refusal (mpminor 6)
    already = sum(1 for r in done if _already_live(r))
    said = (
        _(
            "asked {asked}, released {released}, already live {already}, not released "
            "{refused}; buyers see the new price of {live} of {asked} now",
            lang,
        )
        if already
        else _(
            "asked {asked}, released {released}, not released {refused}; "
            "buyers see the new price of {live} of {asked} now",
            lang,
        )
    )
    return said.format(
        asked=len(done),
        released=released,
        already=already,
        refused=len(done) - released - already,
        live=sum(1 for r in done if r.delivered),
    )


def _already_live(r: withheld.Released) -> bool:
    """The channel was not asked because it shows the version already: delivered now."""
    return r.delivered and not r.asked


@withheld_app.command(
    "list",
    help=N_(
        "Every withheld price, with the channel's words and what releases it (status lists "
        "the first 20); --json: the ids, SKUs, channels and prices, for withheld release."
    ),
)
def withheld_list(ctx: typer.Context, as_json: JsonOpt = False, channel: ChannelOpt = None) -> None:
    lang = cli_lang()
    with _guard():
        settings = _settings(ctx)
        engine = _reading_engine(settings)
        try:
            if as_json:  # the ids a script collects for ``withheld release`` (all of them)
                entries = withheld_entries(engine, channel)
            else:
                table = withheld_table(
                    engine, lang, settings.display_tz, limit=None, channel=channel
                )
        finally:
            engine.dispose()
    if as_json:
        print(json.dumps(entries, ensure_ascii=False))
        return
    _header(settings)
    if table is None:
        out.print(_("no price is withheld", lang), markup=False)
        return
    print_table(out, table)


@withheld_app.command(
    "release",
    help=N_(
        "Ask the channel to show withheld prices to buyers (where it has a way; else it "
        "says where the seller must act), recorded with the operator and the note."
    ),
)
def withheld_release(
    ctx: typer.Context,
    note: Annotated[str, typer.Option(help=N_("Why (required, kept for audit)."))],
    message_ids: Annotated[list[str], typer.Argument(help=N_("Withheld messages to release."))],
    channel: Annotated[
        str | None,
        typer.Option(help=N_("The channel (may be left out when there is one).")),
    ] = None,
    operator: Annotated[str | None, typer.Option(help=N_("Who acts (default: OS user)."))] = None,
) -> None:
    lang = cli_lang()
    with _guard():
        settings = _settings(ctx)
        if channel is not None:
            bootstrap.named_channel(settings, channel)  # configured here, else refused first
        engine, staging = bootstrap.engines(settings)
        try:
            # The channel the release acts on (issue 32): the named one, else the one where
            # the messages are withheld; its own delivery there is what is judged.
            name = withheld.choose_channel(engine, message_ids, channel)
            target = bootstrap.target(bootstrap.named_channel(settings, name), engine=engine)
        except BaseException:
            engine.dispose()
            if staging is not None:
                staging.dispose()
            raise

        async def go() -> list[withheld.Released]:
            try:
                return await withheld.release(
                    engine,
                    target,
                    message_ids,
                    operator=operator or _os_user(),
                    note=note,
                    now=SystemClock().now,
                    channel=name,
                    staging_engine=staging,
                    kinds=settings.kinds,
                )
            finally:
                await target.aclose()

        try:
            done = asyncio.run(go())
        finally:
            engine.dispose()
            if staging is not None:
                staging.dispose()
    out.print(release_headline(done, lang), markup=False)
    for r in done:
        if _already_live(r):
            line = _("  {message_id}: already live, nothing to release: {answer}", lang)
        elif r.delivered:
            line = _("  {message_id}: delivered, buyers see it", lang)
        elif r.asked:
            line = _("  {message_id}: the channel was asked: {answer}", lang)
        else:
            line = _("  {message_id}: not released: {answer}", lang)
        answer = detail_words(r.detail) if lang == "ru" else r.detail
        out.print(line.format(message_id=r.message_id, answer=answer), markup=False)
    if any(not r.asked and not r.delivered for r in done):
        raise typer.Exit(1)  # a script can tell: the channel did not release every one
