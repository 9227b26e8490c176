"""``exchange verify``: does the shop hold what was delivered? (contract 15)"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from exchange import app as bootstrap
from exchange.cli.common import JsonOpt, _guard, _reading_engine, _settings, app, cli_lang, out
from exchange.db.engine import transaction
from exchange.errors import ExchangeError, OperatorError
from exchange.i18n import N_, Lang, _, ngettext, pgettext
from exchange.ops.attention import unserved, unserved_words
from exchange.ops.verify import (
    Newer,
    Verification,
    channel_target,
    choose,
    chosen_channel,
    dropped_said,
    latest_delivered,
    one_channel,
    verify,
)
from exchange.settings import Settings
from exchange.words import error_words, money, on_marketplace, state_said


@app.command(
    "verify",
    help=N_(
        "Read prices back from the shop and list where it differs from the latest "
        "delivered price: exit 1 when it does, 0 when it agrees, 2 when the shop "
        "cannot be read (the api and bitrix targets have no way to read a price back)."
    ),
)
def verify_command(
    ctx: typer.Context,
    channel: Annotated[
        str | None,
        typer.Option(
            "--channel",
            metavar="NAME",
            help=N_(
                "The channel to read: one of the channels configured (EXCHANGE_CHANNELS, or the "
                "configuration file's [channels.NAME] tables; needed when there are several), "
                "else the one named after EXCHANGE_TARGET."
            ),
        ),
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option("--sample", metavar="N", min=1, help=N_("Read N SKUs chosen at random.")),
    ] = None,
    skus: Annotated[
        list[str] | None,
        typer.Option("--sku", metavar="SKU", help=N_("Read this SKU (again for more than one).")),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    with _guard():
        if skus and sample is not None:
            raise OperatorError("--sample and --sku choose the prices two ways: give one")
        settings = _settings(ctx)
        try:
            named = chosen_channel(
                settings.channels_in_force(), channel, settings.channels_source()
            )
        except OperatorError:
            # a dropped channel is said dropped, when and by whom, never «no channel»
            said = _dropped(settings, channel)
            if said is not None:
                raise OperatorError(said) from None
            raise
        engine = _reading_engine(settings)
        target = bootstrap.target(named.settings, engine=engine)

        async def read() -> Verification:
            try:
                reader = channel_target(target)
                # This channel's deliveries alone: another channel's (a dropped or renamed one's,
                # or one delivering while this one is paused) say nothing of this shop. Without
                # EXCHANGE_CHANNELS the one channel is the one registered, whatever its name.
                ref = named.name if settings.channels is not None else one_channel(engine)
                delivered = latest_delivered(engine, ref)
                chosen, missing = choose(delivered, skus=skus or (), sample=sample)
                return await verify(
                    reader,
                    chosen,
                    channel=named.name,
                    not_delivered=missing,
                    engine=engine,
                    channel_ref=ref,
                )
            finally:
                await target.aclose()

        verification = asyncio.run(read())
        stuck: dict[str, dict[str, object]] = {}
        if settings.channels is not None:
            # Prices waiting on a channel no configured channel serves (one renamed in the
            # settings) never reach this shop: "nothing differs" would hide them (owner31c).
            with transaction(engine, read_only=True) as connection:
                stuck = unserved(connection, [c.name for c in settings.channels_in_force()])
    if as_json:
        out.print_json(
            json.dumps({**verification.as_json(), "unserved": stuck}, ensure_ascii=False)
        )
    else:
        _print(verification, False, marketplace=on_marketplace(named.settings.target))
        _print_stuck(stuck)
    raise typer.Exit(1 if verification.differing or stuck else 0)


def _dropped(settings: Settings, channel: str | None) -> str | None:
    """``dropped_said`` of ``--channel``, or None where the database cannot say (not there)."""
    try:
        engine = _reading_engine(settings)
        return dropped_said(engine, channel, settings.channels_in_force(), settings.display_tz)
    except (ExchangeError, SQLAlchemyError):
        return None


def _print_stuck(stuck: dict[str, dict[str, object]]) -> None:
    lang = cli_lang()
    for name, found in stuck.items():
        said = _("channel {name}: {words}", lang).format(
            name=name, words=unserved_words({**found, "channel": name}, lang)
        )
        out.print(said, markup=False, highlight=False)


def _print(verification: Verification, as_json: bool, *, marketplace: bool = False) -> None:
    """``marketplace``: the channel is a marketplace's (``words.on_marketplace``), which the
    words name, never "the shop" (contract 14)."""
    if as_json:
        out.print_json(json.dumps(verification.as_json(), ensure_ascii=False))
        return
    lang = cli_lang()
    differing = verification.differing
    checked = len(verification.held)
    for sku in verification.not_delivered:
        said = _("no delivered price of SKU {sku} to compare", lang).format(sku=sku)
        out.print(said, markup=False, highlight=False)
    if not differing:
        said = (
            ngettext(
                "{channel}: the marketplace holds the latest delivered price of all {count} "
                "checked",
                "{channel}: the marketplace holds the latest delivered price of all {count} "
                "checked",
                checked,
                lang,
            )
            if marketplace
            else ngettext(
                "{channel}: the shop holds the latest delivered price of all {count} checked",
                "{channel}: the shop holds the latest delivered price of all {count} checked",
                checked,
                lang,
            )
        )
        out.print(
            said.format(channel=verification.channel, count=checked),
            markup=False,
            highlight=False,
        )
        return
    table = Table(
        pgettext("verify column", "SKU", lang),
        pgettext("verify column", "field", lang),
        pgettext("verify column", "delivered", lang),
        pgettext("verify column", "the marketplace holds", lang)
        if marketplace
        else pgettext("verify column", "the shop holds", lang),
        "message_id",
        # only where a differing price has one: what the difference may come from
        *([pgettext("verify column", "1C's newer version", lang)] if verification.newer else []),
        box=None,
    )
    for held in differing:
        shop = (
            error_words(held.unreadable, lang)
            if held.unreadable is not None
            else _("no such product", lang)
            if not held.found
            # A marketplace's none (Ozon's "0" of a product never priced): no price yet,
            # never "0" (review words34); of an old price, none (``_none_of``).
            else _none_of(held.where, verification.newer.get(held.message_id), lang)
            if marketplace and held.held is None
            else _("no price", lang)
            if held.held is None
            else _price(held.held, lang)
        )
        table.add_row(
            held.sku,
            held.where,
            "" if held.sent is None else _price(held.sent, lang),
            shop,
            held.message_id,
            *(
                [_newer(verification.newer.get(held.message_id), lang)]
                if verification.newer
                else []
            ),
        )
    out.print(table)
    said = ngettext(
        "{channel}: {count} of {checked} checked differs from the latest delivered price",
        "{channel}: {count} of {checked} checked differ from the latest delivered price",
        len(differing),
        lang,
    )
    out.print(
        said.format(channel=verification.channel, count=len(differing), checked=checked),
        markup=False,
        highlight=False,
    )


def _none_of(field: str, newer: Newer | None, lang: Lang) -> str:
    """What a marketplace holds where it shows no price of ``field``: "no price yet" of the
    price itself (a product never priced); of a strikethrough or minimum price (``DEPENDENT``)
    none, which is no missing price: the product has one (review ozwords38 item 5), and where
    1C's newer one is quarantined, the service cleared the one 1C replaced on purpose
    (``items._clearing``). The dependent types are the targets' own lists, imported here:
    the targets import httpx, which a command that serves nothing never loads."""
    from exchange.targets.ozon.target import DEPENDENT as OZON_DEPENDENT
    from exchange.targets.yandex_market.target import DEPENDENT as YM_DEPENDENT

    if field not in {*OZON_DEPENDENT, *YM_DEPENDENT}:
        return _("no price yet", lang)
    if newer is not None and newer.state == "quarantined":
        return _("none (cleared by the service)", lang)
    return _("none", lang)


def _newer(newer: Newer | None, lang: Lang) -> str:
    """A differing price's newer version from 1C, not delivered: what the difference may
    come from («v2 1 100: ждёт площадку»; a price sent whose answer was lost, one in
    quarantine the service replaced the old one for); empty where there is none."""
    if newer is None:
        return ""
    state = state_said(
        newer.state,
        lang,
        awaiting=newer.awaiting,
        on_1c=newer.wait == "1c",
        on_person=newer.wait == "person",
    )
    price = "" if newer.price is None else " " + _price(Decimal(newer.price), lang)
    return f"v{newer.version}{price}: {state}"


def _price(price: Decimal, lang: Lang) -> str:
    """A price as sent or held, as the reader writes numbers («1 234,5» in Russian); English
    as the shop's API carries it."""
    return str(price) if lang == "en" else money(str(price), None, lang)
