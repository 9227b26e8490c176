"""The workbench names the channel (contract 13 "Commands and pages"): with more than one
channel the dashboard has a row per channel (delivery, backlog, withheld, quarantined), and a
message's page shows its state on every channel and says which channels its action touches:
a message delivered on one channel and quarantined on another can be retried there."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select, update
from workbench_helpers import add_operator, csrf_of, post, signed_in

from exchange.db import schema
from exchange.db.engine import transaction
from exchange.db.schema import channels, delivery_pause, history, workers
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take
from exchange.queue import control
from tests.support.second_channel import on_the_one, second_channel, taken

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def _on_two_channels(db: Engine) -> str:
    """SKU-1 waiting on ``api`` and quarantined (http-422) on ``second`` (an Ozon channel): its
    message_id."""
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], NOW)
    second_channel(db, {"SKU-1/retail": ("quarantined", "http-422")}, NOW, target="ozon")
    with transaction(db, read_only=True) as connection:
        return str(connection.execute(select(messages.c.message_id)).scalar_one())


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
    consequence = html.unescape(preview.text).split('id="consequence">')[1].split("</div>")[0]
    assert "никогда не будет отправлена в каналы, перечисленные выше" in consequence
    assert "сайт" not in consequence


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


def _pauses(db: Engine) -> dict[str, str]:
    """The operators' pauses held: each row's name (``delivery``, ``delivery:<channel>``) and
    who paused."""
    with transaction(db, read_only=True) as connection:
        rows = connection.execute(
            select(delivery_pause.c.name, delivery_pause.c.operator).where(
                delivery_pause.c.name.like("delivery%")
            )
        ).all()
    return {name: operator for name, operator in rows}


def test_the_dashboard_pauses_and_resumes_one_channel_and_the_others_deliver_on(
    olga: str, db: Engine
) -> None:
    """Contract 13: with several channels the workbench pauses one channel, as ``exchange
    pause --channel`` does (the pause of that channel alone, with the operator and the note),
    shows which channels are paused, and resumes it; the banner's pause and resume act on
    every channel, and a channel that is none is said, nothing paused."""
    _on_two_channels(db)
    client = signed_in(olga, "olga")
    dashboard = html.unescape(client.get("/").text)
    row = dashboard.split('id="channel-second"')[1].split("</tr>")[0]
    assert 'name="channel" value="second"' in row and "Остановить канал second" in row
    assert "Остановить все каналы" in dashboard.split('id="pause"')[1].split("</div>")[0]
    assert post(client, "/delivery/pause", {"note": "", "channel": "second"}).status_code == 400
    answer = post(client, "/delivery/pause", {"note": "price check", "channel": "second"})
    assert answer.status_code == 303
    assert _pauses(db) == {"delivery:second": "olga"}
    with transaction(db, read_only=True) as connection:
        assert control.operator_pause(connection, "api") is None  # api delivers on
        held = control.operator_pause(connection, "second")
        assert held is not None and held["note"] == "price check"
    dashboard = html.unescape(client.get("/").text)
    assert "Остановлены по отдельности: second" in dashboard
    second_row = dashboard.split('id="channel-second"')[1].split("</tr>")[0]
    assert "остановлена оператором olga" in second_row and 'id="resume-second"' in second_row
    api_row = dashboard.split('id="channel-api"')[1].split("</tr>")[0]
    assert 'id="pause-api"' in api_row and "остановлена" not in api_row
    nowhere = post(client, "/delivery/pause", {"note": "x", "channel": "nowhere"})
    assert nowhere.status_code == 400 and "nowhere" in html.unescape(nowhere.text)
    assert _pauses(db) == {"delivery:second": "olga"}
    assert post(client, "/delivery/resume", {"channel": "second"}).status_code == 303
    assert _pauses(db) == {}
    assert post(client, "/delivery/pause", {"note": "all of them"}).status_code == 303
    assert _pauses(db) == {"delivery": "olga"}
    assert post(client, "/delivery/resume", {}).status_code == 303
    assert _pauses(db) == {}


def test_a_channels_pause_keeps_the_workbenchs_csrf_and_role_rules(olga: str, db: Engine) -> None:
    """The pause of one channel is an action like the others: a form without this session's
    CSRF token, or a viewer's, pauses nothing (403), and a viewer sees no pause in the rows."""
    _on_two_channels(db)
    add_operator(db, "victor", "viewer")
    client = signed_in(olga, "olga")
    forged = client.post(
        "/delivery/pause", data={"csrf": "forged", "note": "x", "channel": "second"}
    )
    assert forged.status_code == 403
    viewer = signed_in(olga, "victor")
    dashboard = html.unescape(viewer.get("/").text)
    assert 'id="channels"' in dashboard and 'name="channel"' not in dashboard
    refused = post(viewer, "/delivery/pause", {"note": "x", "channel": "second"})
    assert refused.status_code == 403
    assert post(viewer, "/delivery/resume", {"channel": "second"}).status_code == 403
    assert _pauses(db) == {}


def test_one_channels_pause_button_is_as_before(olga: str, db: Engine) -> None:
    """One channel: the dashboard's pause is the one it always was (no channel rows, no
    channel in the form), and it pauses every channel."""
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    client = signed_in(olga, "olga")
    dashboard = html.unescape(client.get("/").text)
    banner = dashboard.split('id="pause"')[1].split("</div>")[0]
    assert "Остановить доставку" in banner and 'name="channel"' not in dashboard
    assert "каналы" not in banner
    assert post(client, "/delivery/pause", {"note": "maintenance"}).status_code == 303
    assert _pauses(db) == {"delivery": "olga"}


def _channels_served(serve: Callable[..., Any], db: Engine, tmp_path: Path) -> str:
    """``api`` and ``second`` (a WooCommerce channel) registered, SKU-1 waiting on both, and a
    workbench served with EXCHANGE_CHANNELS naming both: its base URL (olga signs in)."""
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    second_channel(db, {"SKU-1/retail": ("new", None)}, now, target="woocommerce")
    secret = tmp_path / "woo-secret"
    secret.write_text("ck_test\n")
    base: str = serve(
        channels={
            "api": {"target": "api", "site_url": "http://127.0.0.1:9"},
            "second": {
                "target": "woocommerce",
                "woo_url": "http://127.0.0.1:9",
                "woo_key_file": str(secret),
                "woo_secret_file": str(secret),
            },
        }
    )
    add_operator(db, "olga", "operator")
    return base


def _loop_row(db: Engine, channel: str, **row: Any) -> None:
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=f"w1/{channel}",
                started_at=now - timedelta(minutes=30),
                heartbeat_at=now,
                channel=channel,
                **{"breaker_state": "closed", **row},
            )
        )


def test_with_channels_the_dashboard_names_each_silent_channel_never_the_site(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Contract 13: with EXCHANGE_CHANNELS, a channel that does not answer is named by its
    name and what it is on the dashboard («канал second (WooCommerce) не отвечает с …»), and
    when none answers the banner says no channel does, never «Сайт не отвечает»."""
    base = _channels_served(serve, db, tmp_path)
    silent = datetime.now(UTC) - timedelta(minutes=5)
    for channel in ("api", "second"):
        _loop_row(db, channel, breaker_state="open", unreachable_since=silent)
    client = signed_in(base, "olga")
    page = html.unescape(client.get("/").text)
    banner = page.split('id="pause"')[1].split("</div>")[0]
    assert "Ни один канал не отвечает с" in banner and "Сайт" not in banner
    needs = page.split('id="needs"')[1].split("</section>")[0]
    assert "канал second (WooCommerce) не отвечает с" in needs
    assert "канал api (сайт) не отвечает с" in needs
    assert "сайт не отвечает" not in needs
    eta = page.split('id="backlog-eta">')[1].split("</small>")[0]
    assert eta == "ни один канал не отвечает: срок не оценить"


def test_with_channels_a_channels_refusal_on_the_banner_names_that_channel(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    base = _channels_served(serve, db, tmp_path)
    _loop_row(db, "api")
    _loop_row(
        db,
        "second",
        paused_reason="HTTP 409: the shop refused",
        paused_at=datetime.now(UTC),
        pause_cause="other",
    )
    client = signed_in(base, "olga")
    page = html.unescape(client.get("/").text)
    banner = page.split('id="pause"')[1].split("</div>")[0]
    assert "Доставка в канал second (WooCommerce) остановлена: канал отказал (HTTP 409" in banner
    assert "сайт" not in banner
    # Each worker row is a channel's loop: what answers is the channel, not «Сайт».
    heads = page.split('<table id="workers">')[1].split("</thead>")[0]
    assert "Ответы канала" in heads and "Темп канала и предел запросов" in heads
    assert "Сайт" not in heads and "сайта" not in heads
    card = page.split('id="site-pace">')[1].split("</div>")[0]
    assert card.startswith("<span>Темп всех каналов</span>")


BUSY = (
    '{"accepted_rate": 40, "in_flight": 2, "limit": 3, "max_limit": 16, "refused_last_minute": 12}'
)


def test_with_channels_a_worker_row_says_its_channel_busy_and_its_channels_pause(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Issue 31 item 7: a channel's loop that is refused says «канал перегружен», never
    «сайт перегружен»; a channel an operator paused has its loop's row say who paused it,
    not «идёт», while the other channel's loop runs on."""
    base = _channels_served(serve, db, tmp_path)
    _loop_row(db, "api")
    _loop_row(db, "second", pace=BUSY)
    with transaction(db) as connection:
        control.pause(
            connection, operator="olga", note="price check", now=datetime.now(UTC), channel="second"
        )
    client = signed_in(base, "olga")
    page = html.unescape(client.get("/").text)
    rows = page.split('<table id="workers">')[1].split("</table>")[0]
    second = rows.split('data-label="Обработчик">w1/')[2].split("</tr>")[0]
    said = "канал second (WooCommerce) перегружен: 40 запросов/с"
    assert said in second and "сайт" not in second, second
    assert "остановлена оператором olga" in second and "идёт" not in second, second
    api = rows.split('data-label="Обработчик">w1/')[1].split("</tr>")[0]
    assert "идёт" in api and "остановлена" not in api, api


def _channel_cells(page: str) -> list[str]:
    return re.findall(r'<td class="channel" data-label="Канал">([^<]*)</td>', page)


def test_the_search_says_each_rows_channel_with_several_and_none_with_one(
    olga: str, db: Engine
) -> None:
    """Issue 31 item 7: found once per channel, each row of the search says its channel;
    with one channel the rows are what they were (no channel column)."""
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    client = signed_in(olga, "olga")
    one = html.unescape(client.get("/find", params={"q": "SKU-1"}).text)
    assert "SKU-1" in one and _channel_cells(one) == [] and ">Канал</th>" not in one
    second_channel(db, {"SKU-1/retail": ("quarantined", "http-422")}, NOW, target="ozon")
    several = html.unescape(client.get("/find", params={"q": "SKU-1"}).text)
    assert ">Канал</th>" in several
    assert sorted(_channel_cells(several)) == ["api", "second"]


def test_a_messages_page_says_each_channels_state_never_one_with_several(
    olga: str, db: Engine
) -> None:
    """Issue 31 item 7: new on ``api`` and quarantined on ``second``, the page's header and its
    «Состояние» say both, not one state as the message's; one channel: «… с <when>» as ever."""
    mid = _on_two_channels(db)
    client = signed_in(olga, "olga")
    page = html.unescape(client.get(f"/message/{mid}").text)
    header = page.split('<span id="in-state">')[1].split("</span>")[0]
    assert header == "По каналам: api: новое; second: в карантине", header
    state = page.split('<dd id="state"')[1].split("</dd>")[0]
    assert state.endswith(">api: новое; second: в карантине"), state


def test_one_channels_message_page_keeps_its_one_state(olga: str, db: Engine) -> None:
    stage(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(db, None, dict(DEFAULT_KINDS), NOW)
    with transaction(db, read_only=True) as connection:
        mid = str(connection.execute(select(messages.c.message_id)).scalar_one())
    page = html.unescape(signed_in(olga, "olga").get(f"/message/{mid}").text)
    header = page.split('<span id="in-state">')[1].split("</span>")[0]
    assert header.startswith("новое с ") and "По каналам" not in page, header
    assert page.split('<dd id="state"')[1].split("</dd>")[0].endswith(">новое")


def test_several_channels_without_exchange_channels_say_channel_too(olga: str, db: Engine) -> None:
    """Issue 31 item 7: several channels registered (EXCHANGE_CHANNELS unset in this
    process) are still channels: the workers' columns and pace say «канал»."""
    _on_two_channels(db)
    _loop_row(db, "second", pace=BUSY)
    page = html.unescape(signed_in(olga, "olga").get("/").text)
    table = page.split('<table id="workers">')[1].split("</table>")[0]
    assert "Ответы канала" in table, table
    assert "канал second (Ozon) перегружен: 40 запросов/с" in table, table
    assert "сайт" not in table.lower(), table
    # The banner's buttons follow the same rule as these words (``words.channels_named``).
    banner = page.split('id="pause"')[1].split("</div>")[0]
    assert "Остановить все каналы" in banner and "Остановить доставку" not in banner, banner


def test_one_named_channel_speaks_of_channels_in_its_words_and_its_buttons_alike(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """The one rule (``words.channels_named``): with EXCHANGE_CHANNELS naming one channel, an
    Ozon channel, the words name it and the banner's buttons say «все каналы», beside its row
    (which pauses it alone, as the hint says); never «Сайт» and «Остановить доставку» beside
    «канал ozon (Ozon)»."""
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    with transaction(db) as connection:
        connection.execute(
            channels.update().where(channels.c.name == "api").values(name="ozon", target="ozon")
        )
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key\n")
    base = serve(
        channels={
            "ozon": {
                "target": "ozon",
                "ozon_api_url": "http://127.0.0.1:9",
                "ozon_client_id": "1",
                "ozon_api_key_file": str(key),
            }
        }
    )
    add_operator(db, "olga", "operator")
    _loop_row(db, "ozon", pace=BUSY)
    page = html.unescape(signed_in(base, "olga").get("/").text)
    banner = page.split('id="pause"')[1].split("</div>")[0]
    assert "Остановить все каналы" in banner and "Остановить доставку" not in banner, banner
    assert 'id="channel-ozon"' in page and 'id="pause-ozon"' in page
    table = page.split('<table id="workers">')[1].split("</table>")[0]
    assert "канал ozon (Ozon) перегружен: 40 запросов/с" in table, table
    assert "Сайт" not in table and "сайт" not in table.lower(), table


def test_exchange_target_ozon_alone_is_busy_by_its_name_on_the_dashboard(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """EXCHANGE_TARGET=ozon, one channel: the words are the one channel's (no channel rows,
    «Остановить доставку»), but its loop's row, the process's own, is Ozon's, never the site's:
    «Ozon перегружен»."""
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    with transaction(db) as connection:
        connection.execute(
            channels.update().where(channels.c.name == "api").values(name="ozon", target="ozon")
        )
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key\n")
    base = serve(
        target="ozon",
        ozon_api_url="http://127.0.0.1:9",
        ozon_client_id="1",
        ozon_api_key_file=str(key),
    )
    add_operator(db, "olga", "operator")
    with transaction(db) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w1",
                started_at=now - timedelta(minutes=30),
                heartbeat_at=now,
                breaker_state="closed",
                pace=BUSY,
            )
        )
    page = html.unescape(signed_in(base, "olga").get("/").text)
    banner = page.split('id="pause"')[1].split("</div>")[0]
    assert "Остановить доставку" in banner and "каналы" not in banner, banner
    table = page.split('<table id="workers">')[1].split("</table>")[0]
    assert "Ozon перегружен: 40 запросов/с" in table, table
    assert "сайт" not in table.lower(), table


def test_work_waiting_only_on_a_renamed_channel_is_no_workers_and_has_no_pace(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Owner 31 items 2 and 3 (contract 6, 13): ``api`` delivered SKU-1; ``second``, renamed
    away (registered, configured in no process), still has it waiting. No worker would take
    it: the banner neither says «Ничего не доставляется» (``no-live-worker``) nor that the
    first worker to start takes it, and the backlog's card names the channel its work waits
    on instead of «за последнюю минуту ничего не доставлено»."""
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)  # older than any live window
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], an_hour_ago)
    on_the_one(db, "SKU-1/retail", state="delivered", updated_at=an_hour_ago)
    second_channel(db, {"SKU-1/retail": ("new", None)}, an_hour_ago, target="woocommerce")
    with transaction(db) as connection:
        connection.execute(update(schema.messages).values(created_at=an_hour_ago))
    base = serve(channels={"api": {"target": "api", "site_url": "http://127.0.0.1:9"}})
    add_operator(db, "olga", "operator")
    page = html.unescape(signed_in(base, "olga").get("/").text)
    eta = page.split('id="backlog-eta">')[1].split("</small>")[0]
    assert "second" in eta and "ничего не доставлено" not in eta, eta
    assert "Ничего не доставляется" not in page
    assert "возьмёт первый запущенный обработчик" not in page


def test_a_dropped_channels_row_says_dropped_never_not_configured(olga: str, db: Engine) -> None:
    """Owner 31 item 5: the dashboard's row of a dropped channel says «удалён» (``channels
    list``'s word), never «не настроен»."""
    _on_two_channels(db)
    with transaction(db) as connection:
        connection.execute(
            update(channels).where(channels.c.name == "second").values(dropped_at=datetime.now(UTC))
        )
    page = html.unescape(signed_in(olga, "olga").get("/").text)
    row = page.split('id="channel-second"')[1].split("</tr>")[0]
    assert "удалён" in row and "не настроен" not in row, row


def test_the_dashboard_shows_each_channels_last_stopped_worker_and_counts_the_rest(
    olga: str, db: Engine
) -> None:
    """Owner 31 item 7: 4 short runs leave a process row and a loop row per channel each;
    the workers' table shows a live worker, the last stopped row of each channel, and «ещё N
    остановленных» for the rest; a process's own row beside its loops' rows is neither shown
    nor counted (review mpadvice item 7: each worker once)."""
    _on_two_channels(db)
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(workers.delete())
        for run in range(4):
            stopped = now - timedelta(minutes=4 - run)
            for channel in (None, "api", "second"):
                connection.execute(
                    insert(workers).values(
                        worker_id=f"vm-{run}" + (f"/{channel}" if channel else ""),
                        started_at=stopped - timedelta(seconds=5),
                        heartbeat_at=stopped,
                        stopped_at=stopped,
                        breaker_state="closed",
                        channel=channel,
                    )
                )
    _loop_row(db, "api")
    page = html.unescape(signed_in(olga, "olga").get("/").text)
    table = page.split('<table id="workers">')[1].split("</table>")[0]
    ids = re.findall(r'<td class="id"[^>]*>(.*?)</td>', table)
    assert ["vm-3/api", "vm-3/second", "w1/api"] == sorted(i.replace("<wbr>", "") for i in ids), ids
    assert "ещё 6 остановленных" in page.split('id="more-stopped">')[1].split("</p>")[0]


def test_a_paused_channels_row_has_no_estimate_from_the_pace_before_the_pause(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Owner 31 item 6: ``second`` paused by an operator while its loop is live and delivered
    a moment ago: its row's backlog says delivery is paused, never «около … при нынешней
    скорости» from the pace before the pause."""
    base = _channels_served(serve, db, tmp_path)
    _loop_row(db, "second")
    now = datetime.now(UTC)
    with transaction(db) as connection:
        second = connection.execute(
            select(channels.c.id).where(channels.c.name == "second")
        ).scalar_one()
        pk = connection.execute(select(messages.c.id)).scalar_one()
        connection.execute(
            insert(history).values(
                message_pk=pk,
                channel_id=second,
                at=now - timedelta(seconds=5),
                event="delivered",
                worker="w1/second",
            )
        )
        control.pause(connection, operator="olga", note="price check", now=now, channel="second")
    page = html.unescape(signed_in(base, "olga").get("/").text)
    row = page.split('id="channel-second"')[1].split("</tr>")[0]
    assert "доставка приостановлена: срок не оценить" in row, row
    assert "при нынешней скорости" not in row, row


def test_a_channels_refusal_pauses_only_its_own_rows_estimate(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Seller 34 item 1: ``second``'s key refused (its loop paused) while ``api`` runs: the
    «Каналы» table says «доставка приостановлена» on ``second``'s row only, never on ``api``'s
    (``status``'s rule: each channel's own pause, ``channel_status.backlog_cell``)."""
    base = _channels_served(serve, db, tmp_path)
    _loop_row(db, "api")
    _loop_row(
        db,
        "second",
        paused_reason="HTTP 401: the key is refused",
        paused_at=datetime.now(UTC),
        pause_cause="woo-key",
    )
    page = html.unescape(signed_in(base, "olga").get("/").text)
    second = page.split('id="channel-second"')[1].split("</tr>")[0]
    assert "доставка приостановлена: срок не оценить" in second, second
    api = page.split('id="channel-api"')[1].split("</tr>")[0]
    assert "приостановлена" not in api, api
