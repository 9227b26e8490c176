"""The workbench on withheld prices (contract 13): the dashboard counts them and links their
list, and a message's page offers the release (role operator), recorded with the signed-in
operator and the note. Against the site simulator's withholding switch (a test device)."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, select
from workbench_helpers import add_operator, csrf_of, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

TOKEN = "test-token"
NOTE = "цену проверили с закупкой"


@pytest.fixture
def withholding_site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN, faults=Faults(seed=1), withhold_drops=Decimal("0.5")) as sim:
        yield sim


def _withheld(db_url: str, db: Engine, site: SiteSimulator) -> str:
    for version, price in ((1, "100.00"), (2, "10.00")):
        stage(db, [price_row("S1", version, price)])
        run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    with transaction(db, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.state == "withheld")
            ).scalar_one()
        )


def test_the_dashboard_lists_withheld_and_a_release_is_recorded_with_the_operator(
    serve: Callable[..., Any], db_url: str, db: Engine, withholding_site: SiteSimulator
) -> None:
    mid = _withheld(db_url, db, withholding_site)
    base = serve(site_url=withholding_site.url, site_token=TOKEN)
    add_operator(db, "olga", "operator")
    add_operator(db, "vera", "viewer")
    client = signed_in(base, "olga")
    dashboard = client.get("/").text
    assert 'id="state-withheld">1<' in dashboard
    assert "придержано каналом" in dashboard
    assert "канал принял, но придержал от покупателей" in html.unescape(dashboard)  # the cause
    listed = client.get("/messages/withheld")
    assert listed.status_code == 200 and mid in listed.text
    page = client.get(f"/message/{mid}").text
    assert 'id="release"' in page
    assert 'id="release"' not in signed_in(base, "vera").get(f"/message/{mid}").text
    no_note = client.post(
        "/action/release",
        data={"csrf": csrf_of(client, f"/message/{mid}"), "message_id": mid, "note": " "},
    )
    assert no_note.status_code == 400
    done = client.post(
        "/action/release",
        data={"csrf": csrf_of(client, f"/message/{mid}"), "message_id": mid, "note": NOTE},
    )
    assert done.status_code == 303 and done.headers["location"].endswith("?done=release")
    assert "Готово" in html.unescape(client.get(done.headers["location"]).text)
    assert withholding_site.effect_counts()[mid] == 1
    with transaction(db, read_only=True) as connection:
        state = connection.execute(
            select(messages.c.state).where(messages.c.message_id == mid)
        ).scalar_one()
        released = connection.execute(
            select(history.c.operator, history.c.note)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.message_id == mid, history.c.event == "operator-release")
        ).one()
    assert state == "delivered"
    assert tuple(released) == ("olga", NOTE)


def test_a_withheld_messages_page_says_it_waits_for_a_persons_release_in_the_channels_words(
    serve: Callable[..., Any], db_url: str, db: Engine, withholding_site: SiteSimulator
) -> None:
    """Promise: a withheld message waits for a person, and its page says so (what the channel
    said, and the release), never «не ждёт решения оператора» beside the release button."""
    mid = _withheld(db_url, db, withholding_site)
    base = serve(site_url=withholding_site.url, site_token=TOKEN)
    add_operator(db, "olga", "operator")
    page = html.unescape(signed_in(base, "olga").get(f"/message/{mid}").text)
    reason = page.split('id="reason">', 1)[1].split("</dd>", 1)[0]
    assert "не ждёт решения оператора" not in reason, reason
    assert "ждёт" in reason and "Выпустить к покупателям" in reason, reason
    assert "придержал" in reason, reason  # the channel's words


YM_WITHHELD = (
    "Yandex Market took offer 'S1' and withholds its price in its price quarantine "
    "(PRICE_CHANGE): release it with `exchange withheld release`, or in the cabinet"
)


def test_a_yandex_withheld_price_on_a_page_names_the_release_button_not_the_command(
    serve: Callable[..., Any], db_url: str, db: Engine, withholding_site: SiteSimulator
) -> None:
    """Seller 34 item 5: Yandex Market's words on a withheld price name the command line's
    `exchange withheld release`; on the message's page they name its button «Выпустить к
    покупателям» instead (the command line keeps the command: ``words.page_words``)."""
    mid = _withheld(db_url, db, withholding_site)
    with transaction(db) as connection:
        pk = connection.execute(
            select(messages.c.id).where(messages.c.message_id == mid)
        ).scalar_one()
        connection.execute(
            history.update()
            .where(history.c.message_pk == pk, history.c.detail.is_not(None))
            .values(detail=YM_WITHHELD)
        )
    base = serve(site_url=withholding_site.url, site_token=TOKEN)
    add_operator(db, "olga", "operator")
    page = html.unescape(signed_in(base, "olga").get(f"/message/{mid}").text)
    assert "кнопкой «Выпустить к покупателям» или в кабинете" in page, page
    assert "exchange withheld release" not in page, page


def test_a_release_the_prices_state_refuses_is_a_conflict_409_a_malformed_one_stays_400(
    serve: Callable[..., Any], db_url: str, db: Engine, withholding_site: SiteSimulator
) -> None:
    """Seller review 35: «Выпустить к покупателям» of a price live already (released, now
    delivered) is a valid ask its state refuses: 409 Conflict with the page saying why, never
    400; an ask without its note (malformed) stays 400."""
    mid = _withheld(db_url, db, withholding_site)
    base = serve(site_url=withholding_site.url, site_token=TOKEN)
    add_operator(db, "olga", "operator")
    client = signed_in(base, "olga")

    def release(note: str) -> Any:
        return client.post(
            "/action/release",
            data={"csrf": csrf_of(client, f"/message/{mid}"), "message_id": mid, "note": note},
        )

    assert release(NOTE).status_code == 303
    again = release(NOTE)
    assert again.status_code == 409, again.status_code
    assert "только придержанные" in html.unescape(again.text).lower(), again.text
    assert release(" ").status_code == 400
