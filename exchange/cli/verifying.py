"""``exchange verify``: does the shop hold what was delivered? (contract 15)"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.table import Table

from exchange import app as bootstrap
from exchange.cli.common import JsonOpt, _guard, _reading_engine, _settings, app, out
from exchange.errors import OperatorError
from exchange.ops.verify import (
    Verification,
    channel_target,
    choose,
    chosen_channel,
    latest_delivered,
    verify,
)


@app.command("verify")
def verify_command(
    ctx: typer.Context,
    channel: Annotated[
        str | None,
        typer.Option(
            "--channel",
            metavar="NAME",
            help="The channel to read: one of EXCHANGE_CHANNELS (needed when it names several), "
            "else the one named after EXCHANGE_TARGET.",
        ),
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option("--sample", metavar="N", min=1, help="Read N SKUs chosen at random."),
    ] = None,
    skus: Annotated[
        list[str] | None,
        typer.Option("--sku", metavar="SKU", help="Read this SKU (again for more than one)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read prices back from the shop and list where it differs from the latest delivered
    price: exit 1 when it does, 0 when it agrees, 2 when the shop cannot be read (the api and
    bitrix targets have no way to read a price back)."""
    with _guard():
        if skus and sample is not None:
            raise OperatorError("--sample and --sku choose the prices two ways: give one")
        settings = _settings(ctx)
        named = chosen_channel(settings.channels_in_force(), channel)
        engine = _reading_engine(settings)
        target = bootstrap.target(named.settings, engine=engine)

        async def read() -> Verification:
            try:
                reader = channel_target(target)
                chosen, missing = choose(latest_delivered(engine), skus=skus or (), sample=sample)
                return await verify(reader, chosen, channel=named.name, not_delivered=missing)
            finally:
                await target.aclose()

        verification = asyncio.run(read())
    _print(verification, as_json)
    raise typer.Exit(1 if verification.differing else 0)


def _print(verification: Verification, as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps(verification.as_json(), ensure_ascii=False))
        return
    differing = verification.differing
    checked = len(verification.held)
    for sku in verification.not_delivered:
        out.print(f"no delivered price of SKU {sku} to compare", markup=False, highlight=False)
    if not differing:
        out.print(
            f"{verification.channel}: the shop holds the latest delivered price of all "
            f"{checked} checked",
            markup=False,
            highlight=False,
        )
        return
    table = Table("SKU", "field", "delivered", "the shop holds", "message_id", box=None)
    for held in differing:
        shop = (
            held.unreadable
            if held.unreadable is not None
            else "no such product"
            if not held.found
            else "no price"
            if held.held is None
            else str(held.held)
        )
        table.add_row(
            held.sku, held.where, "" if held.sent is None else str(held.sent), shop, held.message_id
        )
    out.print(table)
    out.print(
        f"{verification.channel}: {len(differing)} of {checked} checked differ from the latest "
        "delivered price",
        markup=False,
        highlight=False,
    )
