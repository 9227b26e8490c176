"""Seller review 35 (wbwords35 item 1): a price whose Wildberries upload may have been applied
(its answer lost, or 5xx/422) is held until WB shows whether it applied it, up to an hour
(``task_timeout`` + ``lost_hold``); its delivery's due time is only the next look. ``exchange
status``'s backlog line and its channels' table said «около 9 мин» of it; they say the bound
from the hold's end, and what it waits for (``ops.backlog.estimate_kind``)."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from clitools import Cli, describe
from rich.console import Console
from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids
from exchange.db.schema import channels, deliveries, messages, wb_tasks, workers
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.states import State
from exchange.intake import staging_table as intake
from exchange.ops.channel_status import channel_figures, channels_table


def held_by_a_lost_upload(db_url: str, engine: Engine, upload_id: int = 0) -> None:
    """SKU-1's price on the Wildberries channel (a worker live), delayed 9 minutes (the next
    look), its good
    held by an upload made a minute ago whose answer was lost (``upload_id`` 0; below 0: WB
    answered 5xx/422)."""
    now = datetime.now(UTC)
    stage(engine, [price_row("SKU-1", 1, "900.00")])
    intake.take(engine, None, fast_settings(db_url).kinds, now)
    with transaction(engine) as c:
        c.execute(insert(workers).values(worker_id="w1", started_at=now, heartbeat_at=now))
        c.execute(update(channels).values(target="wildberries"))
        name = c.execute(select(channels.c.name)).scalar_one()
        c.execute(
            update(deliveries).values(
                state=State.DELAYED.value, next_try_at=now + timedelta(minutes=9)
            )
        )
        message_id = c.execute(select(messages.c.message_id)).scalar_one()
        c.execute(
            wb_tasks.insert().values(
                channel=name,
                nm_id=100000001,
                upload_id=upload_id,
                price=Decimal("900"),
                message_id=message_id,
                uploaded_at=now - timedelta(minutes=1),
                goods=1,
            )
        )


def test_status_says_up_to_the_holds_end_never_about_the_next_look(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    held_by_a_lost_upload(db_url, engine)

    ru = cli("status", db=db_url, env={"LANG": "ru_RU.UTF-8"})
    line = next((x for x in ru.stdout.splitlines() if x.startswith("очередь:")), "")
    assert re.search(r"до 5\d мин .*\(ждём, применил ли WB загрузку\)", line), describe(ru)
    assert "около" not in line, line
    en = cli("status", db=db_url)
    line = next((x for x in en.stdout.splitlines() if x.startswith("backlog:")), "")
    assert re.search(r"up to 5\d min .*waiting to learn whether WB applied the upload", line), (
        describe(en)
    )
    assert "about" not in line, line


def test_the_channels_table_says_up_to_the_holds_end(db_url: str, engine: Engine) -> None:
    held_by_a_lost_upload(db_url, engine, upload_id=-503)
    settings = fast_settings(db_url)
    with transaction(engine, read_only=True) as connection:
        by_channel = channel_figures(
            connection,
            datetime.now(UTC),
            settings.policies,
            [],
            channel_ids(connection),
            configured=[c.name for c in settings.channels_in_force()],
            live_within=settings.live_within,
        )
    (figures,) = by_channel.values()
    assert figures["backlog"]["hold_s"] is not None and figures["backlog"]["hold_s"] > 3000
    for lang, said in (
        ("ru", r"1 \(до 5\d мин \d+ с: ждём, применил ли WB загрузку\)"),
        ("en", r"1 \(up to 5\d min \d+ s: waiting to learn whether WB applied the upload\)"),
    ):
        shown = io.StringIO()
        Console(file=shown, width=400, color_system=None).print(channels_table(by_channel, lang))
        text = " ".join(shown.getvalue().split())
        assert re.search(said, text), text
