"""The workbench names the channel (contract 13 "Commands and pages"): with more than one
channel the dashboard has a row per channel (delivery, backlog, withheld, quarantined), and a
message's page shows its state on every channel and says which channels its action touches:
a message delivered on one channel and quarantined on another can be retried there."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select
from workbench_helpers import csrf_of, signed_in

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries, history
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def _on_two_channels(db: Engine) -> str:
    """SKU-1 waiting on ``api`` and quarantined (http-422) on ``second``: its message_id."""
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    with transaction(db) as connection:
        row = connection.execute(select(messages).where(~messages.c.rejected)).one()
        second = connection.execute(
            insert(channels)
            .values(name="second", target="ozon", added_at=NOW)
            .returning(channels.c.id)
        ).scalar_one()
        connection.execute(
            insert(deliveries).values(
                message_pk=row.id,
                channel_id=second,
                aggregate_id=row.aggregate_id,
                kind=row.kind,
                version=row.version,
                state="quarantined",
                reason="http-422",
                waiting_since=NOW,
                updated_at=NOW,
            )
        )
        connection.execute(
            insert(channel_aggregates).values(aggregate_id=row.aggregate_id, channel_id=second)
        )
        return str(row.message_id)


def test_the_dashboard_has_a_row_per_channel_and_the_message_page_every_channels_state(
    olga: str, db: Engine
) -> None:
    mid = _on_two_channels(db)
    client = signed_in(olga, "olga")
    dashboard = html.unescape(client.get("/").text)
    assert 'id="channels"' in dashboard
    assert 'id="channel-api"' in dashboard and 'id="channel-second"' in dashboard
    second_row = dashboard.split('id="channel-second"')[1].split("</tr>")[0]
    assert "ozon" in second_row and ">1</td>" in second_row  # one quarantined there
    page = html.unescape(client.get(f"/message/{mid}").text)
    assert 'id="deliveries"' in page and 'id="on-second"' in page
    assert 'id="retry"' in page  # quarantined on second, whatever api's state
    acts = page.split('id="acts-on">')[1].split("</p>")[0]
    assert acts.endswith(": second")
    preview = client.post(
        "/action/preview",
        data={"csrf": csrf_of(client, f"/message/{mid}"), "action": "cancel", "message_id": mid},
    )
    assert preview.status_code == 200, preview.text
    counted = html.unescape(preview.text).split('id="per-channel">')[1].split("</ul>")[0]
    assert "second: 1" in counted and "api" not in counted  # where it is quarantined


def test_one_channel_has_no_channel_rows(olga: str, db: Engine) -> None:
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    client = signed_in(olga, "olga")
    assert 'id="channels"' not in client.get("/").text


def test_the_biography_names_each_events_channel_and_the_counts_say_deliveries(
    olga: str, db: Engine
) -> None:
    """With two channels a message's history says whose delivery each event is (intake's own
    events are no channel's), and the dashboard's counts by state say they count deliveries."""
    mid = _on_two_channels(db)
    with transaction(db) as connection:
        row = connection.execute(select(messages).where(messages.c.message_id == mid)).one()
        second = connection.execute(
            select(channels.c.id).where(channels.c.name == "second")
        ).scalar_one()
        connection.execute(
            insert(history).values(
                message_pk=row.id,
                channel_id=second,
                at=NOW,
                event="quarantined",
                from_state="in_progress",
                to_state="quarantined",
                http_status=422,
            )
        )
    client = signed_in(olga, "olga")
    page = html.unescape(client.get(f"/message/{mid}").text)
    story = page.split('<table class="history">')[1].split("</table>")[0]
    cells = re.findall(r'<td class="channel"[^>]*>([^<]*)</td>', story)
    assert "second" in cells and "—" in cells  # the shop's quarantine; intake's taking-in
    dashboard = html.unescape(client.get("/").text)
    title = dashboard.split('<h2 id="by-state">')[1].split("</h2>")[0]
    assert title == "Доставки по состояниям (сообщение считается на каждом канале)"


def test_one_channels_biography_has_no_channel_column(olga: str, db: Engine) -> None:
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    with transaction(db, read_only=True) as connection:
        mid = connection.execute(select(messages.c.message_id)).scalar_one()
    client = signed_in(olga, "olga")
    page = html.unescape(client.get(f"/message/{mid}").text)
    assert 'class="channel"' not in page.split('<table class="history">')[1]
    dashboard = html.unescape(client.get("/").text)
    assert dashboard.split('<h2 id="by-state">')[1].startswith("Сообщения по состояниям")


def test_the_export_keeps_the_lists_channel_and_says_an_unknown_one(olga: str, db: Engine) -> None:
    """The list's «export these» carries its channel filter; a channel that is none is said
    as any bad filter is (before, the export failed with a server error)."""
    mid = _on_two_channels(db)
    client = signed_in(olga, "olga")
    listed = html.unescape(client.get("/quarantine", params={"channel": "second"}).text)
    link = re.search(r'<a href="([^"]+)" id="export-these">', listed)
    assert link is not None and "channel=second" in link.group(1)
    shown = client.get("/export", params={"format": "csv", "channel": "second"})
    assert shown.status_code == 200 and mid in shown.text
    assert client.get("/export", params={"format": "csv", "channel": "api"}).text.count(mid) == 0
    wrong = client.get("/export", params={"format": "csv", "channel": "nowhere"})
    assert wrong.status_code == 400 and "nowhere" in html.unescape(wrong.text)
