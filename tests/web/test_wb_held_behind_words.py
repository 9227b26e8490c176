"""A price Wildberries' quarantine holds while a newer one waits behind it (contract 13, 14;
research §2.4; review finding): the held price must not be confirmed (it would go live over
the newer until the next check uploads the newer again); the good is taken out of the
quarantine at the newer price. ``exchange status`` (its cause and its withheld list) and the
workbench (its dashboard's cause and the held message's page) and the operators' notice say
so, in the words the newer
price's history says, never «confirm it» alone."""

from __future__ import annotations

import html
import io
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from marketsims import wb_sim
from rich.console import Console
from sqlalchemy import Engine, select
from workbench_helpers import add_operator, signed_in

from exchange import app as bootstrap
from exchange.cli.withheld_shown import withheld_entries, withheld_table
from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids
from exchange.db.schema import deliveries, messages
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.dev.wbsim import Limits, WbSimulator
from exchange.ops.attention import delivery_causes
from exchange.ops.notify import withheld_by_channel
from exchange.ops.status import status
from exchange.report.notice import _withheld_lines
from exchange.runner import run_until_idle
from exchange.targets.wildberries.target import WildberriesTarget


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    with wb_sim((("SKU-1", 1400),), processing_delay=0.3) as sim:
        yield sim


def _held_behind(db_url: str, db: Engine, wb: WbSimulator) -> tuple[str, str]:
    """v1 = 1400 live, v2 = 400 withheld in WB's quarantine, v3 = 1400 "already set" waiting
    behind it (WB keeps 400 held: ``already_set_releases`` off): v2's and v3's message ids."""
    wb.limits = Limits(period=1.0, requests=1000, burst=100)
    wb.switches.already_set_releases = False

    def deliver(rows: list[Any], seconds: float) -> None:
        settings = fast_settings(
            db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
        )
        worker = bootstrap.worker(settings, db, rng=random.Random(3))
        sending = worker.loop.target
        assert isinstance(sending, WildberriesTarget)
        sending.first_poll = sending.poll_every = sending.quarantine_wait = 0.2
        if rows:
            stage(db, rows)
        run_worker(worker, lambda w: run_until_idle(w, max_seconds=seconds, poll_interval=0.05))

    deliver([price_row("SKU-1", 1, "1400.00")], 15)
    deliver([price_row("SKU-1", 2, "400.00")], 15)

    def states() -> dict[int, tuple[str, str]]:
        with transaction(db, read_only=True) as connection:
            return {
                row.version: (row.message_id, row.state)
                for row in connection.execute(
                    select(messages.c.version, messages.c.message_id, deliveries.c.state).join(
                        deliveries, deliveries.c.message_pk == messages.c.id
                    )
                )
            }

    # v3 is never idle (WB answers "already set" and it waits behind v2): a worker runs a few
    # seconds at a time until it waits, so a loaded machine takes longer rather than failing.
    deliver([price_row("SKU-1", 3, "1400.00")], 3)
    for _ in range(10):
        found = states()
        if found[3][1] == "delayed":
            break
        deliver([], 3)
    assert (found[2][1], found[3][1]) == ("withheld", "delayed"), found
    return found[2][0], found[3][0]


def test_status_says_not_to_confirm_a_held_price_a_newer_one_waits_behind(
    serve: Callable[..., Any], db_url: str, db: Engine, wb: WbSimulator
) -> None:
    held, newer = _held_behind(db_url, db, wb)

    # status's withheld list: the held row says what the newer price's history says
    table = withheld_table(db, "ru", "UTC")
    assert table is not None
    shown = io.StringIO()
    Console(file=shown, width=400, color_system=None).print(table)
    text = " ".join(shown.getvalue().split())
    assert newer in text and "не подтверждать" in text, text
    assert "вывести товар из карантина по цене 1400" in text, text
    # ``withheld list --json``: the held price says a newer one waits behind it (not to confirm)
    (entry,) = withheld_entries(db)
    assert (entry["message_id"], entry["newer_waits_behind"]) == (held, True), entry
    assert (entry["sku"], entry["price"]) == ("SKU-1", "400.00"), entry

    # status's cause (and the dashboard's, the same cause): not «confirm them» alone
    with transaction(db, read_only=True) as connection:
        figures = status(connection, datetime.now(UTC), fast_settings(db_url).policies)
    assert 1 == figures.withheld_behind
    (cause,) = [c for c in delivery_causes(figures, "") if c.code == "withheld"]
    for lang, words in (("en", "do not confirm 1 of them"), ("ru", "не подтверждайте 1 из них")):
        said = cause.words(lang)
        assert words in said and ("newer price" in said or "более новая" in said), said

    # the operators' notice: the channel's withheld lines say not to confirm it
    with transaction(db, read_only=True) as connection:
        by_channel = withheld_by_channel(connection, datetime.now(UTC), channel_ids(connection))
    (entry,) = by_channel.values()
    assert 1 == entry["behind"]
    found = SimpleNamespace(situation=SimpleNamespace(withheld=1), withheld_by_channel=by_channel)
    notice = "\n".join(_withheld_lines(found, "ru", None))  # type: ignore[arg-type]
    assert "Не подтверждайте 1 из них" in notice, notice

    # the workbench: its dashboard's cause and the held message's page
    base = serve()
    add_operator(db, "olga", "operator")
    client = signed_in(base, "olga")
    dashboard = html.unescape(client.get("/").text)
    assert "не подтверждайте 1 из них" in dashboard
    page = html.unescape(client.get(f"/message/{held}").text)
    reason = " ".join(page.split('id="reason">', 1)[1].split("</dd>", 1)[0].split())
    assert "не подтверждайте эту цену" in reason and newer in reason, reason
    assert "вывести товар из карантина по цене 1400" in reason, reason


def test_the_workbench_withheld_list_says_not_to_confirm_a_held_price_a_newer_one_waits_behind(
    serve: Callable[..., Any], db_url: str, db: Engine, wb: WbSimulator
) -> None:
    """Promise (review 33): the workbench's list of withheld prices says of a held price a
    newer one waits behind what ``exchange withheld list`` and its page say (one decision,
    ``ops.withheld_behind``): not to confirm it but to take the good out of the quarantine
    at the newer price; never the channel's «until the seller confirms it»."""
    held, newer = _held_behind(db_url, db, wb)
    base = serve()
    add_operator(db, "olga", "operator")
    client = signed_in(base, "olga")
    listed = html.unescape(client.get("/messages/withheld").text)
    rows = [
        r for r in listed.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>") if held in r
    ]
    assert len(rows) == 1, listed
    row = " ".join(rows[0].split())
    assert "не подтверждайте эту цену" in row and newer in row, row
    assert "вывести товар из карантина по цене 1400" in row, row
    assert "пока продавец не подтвердит" not in row, row
