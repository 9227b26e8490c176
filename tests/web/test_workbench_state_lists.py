"""Browse by state (issue 34 item 6): the waiting, delayed (with the next try, «через 40 с»),
in-flight, delivered and cancelled messages, each a list of pages with the quarantine list's
filters and search; the dashboard's figures lead there; a 1C file's «цены из этого файла»
says how many of them no worker has taken yet."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, insert, update
from workbench_helpers import signed_in

from exchange.db.engine import transaction
from exchange.db.schema import DELIVERY_COLUMNS, cml_exchanges, cml_packages, messages
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.reasons import CANCELLED_REASONS
from exchange.intake.staging_table import take
from tests.support.follow import set_delivery

REF = "1C exchange offers.xml 2026-12-05T06:00:00"


def _put(engine: Engine, aggregate: str, **values: Any) -> None:
    """The aggregate's messages take ``values``: a delivery's columns on their delivery on the
    one channel, the others (``payload``) on the message itself."""
    own = {name: value for name, value in values.items() if name not in DELIVERY_COLUMNS}
    delivered = {name: value for name, value in values.items() if name in DELIVERY_COLUMNS}
    with transaction(engine) as connection:
        if own:
            connection.execute(
                update(messages).where(messages.c.aggregate == aggregate).values(**own)
            )
        if delivered:
            set_delivery(connection, messages.c.aggregate == aggregate, **delivered)


def _taken(engine: Engine) -> datetime:
    stage(
        engine,
        [
            price_row("SKU-1", 1, "1234.50", aggregate="SKU-1/retail", name="Кофе молотый"),
            price_row("SKU-2", 1, "99.00", aggregate="SKU-2/retail", name="Чай чёрный"),
            price_row("SKU-3", 1, "10.00", aggregate="SKU-3/retail", name="Кофе в зёрнах"),
            price_row("SKU-4", 1, "5.00", aggregate="SKU-4/retail", name="Сахар"),
        ],
    )
    now = datetime.now(UTC)
    take(engine, None, dict(DEFAULT_KINDS), now)
    _put(
        engine,
        "SKU-1/retail",
        state="delayed",
        reason="http-503",
        next_try_at=now + timedelta(seconds=40),
        updated_at=now - timedelta(minutes=3),
    )
    _put(
        engine,
        "SKU-3/retail",
        state="delayed",
        reason="timeout",
        next_try_at=now - timedelta(seconds=5),
        updated_at=now - timedelta(minutes=1),
    )
    _put(engine, "SKU-2/retail", state="delivered", updated_at=now - timedelta(minutes=2))
    _put(
        engine,
        "SKU-4/retail",
        state="in_progress",
        locked_by="worker-7",
        locked_until=now + timedelta(seconds=30),
        updated_at=now,
    )
    return now


def _rows(page: str) -> list[str]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in page else ""
    body = body.replace("<wbr>", "")
    return re.findall(r"(SKU-\d)/retail", body)


def test_the_delayed_list_says_when_each_goes_again_with_its_name_and_price(
    olga: str, db: Engine
) -> None:
    _taken(db)
    client = signed_in(olga, "olga")
    answer = client.get("/messages/delayed")
    page = html.unescape(answer.text)
    assert answer.status_code == 200
    assert "Отложены до следующей попытки" in page
    assert _rows(page) == ["SKU-3", "SKU-1"]  # the soonest to go again first
    assert re.search(r"через [1-4]\d с", page), page  # SKU-1, 40 s after it was set
    assert "уже пора: ждёт обработчика" in page  # SKU-3's time has come
    assert "1\xa0234,50\xa0₽" in page and "Кофе молотый" in page
    assert "В этом состоянии с" in page and re.search(r"3 мин \d+ с назад", page)


def test_each_list_by_state_has_the_quarantines_filters_search_and_pages(
    olga: str, db: Engine
) -> None:
    _taken(db)
    client = signed_in(olga, "olga")
    assert _rows(client.get("/messages/delayed", params={"q": "зёрнах"}).text) == ["SKU-3"]
    assert _rows(client.get("/messages/delayed", params={"reason": "http-503"}).text) == ["SKU-1"]
    assert _rows(client.get("/messages/delayed", params={"aggregate": "sku-1"}).text) == ["SKU-1"]
    assert _rows(client.get("/messages/delivered").text) == ["SKU-2"]
    flying = client.get("/messages/in_progress").text
    assert _rows(flying) == ["SKU-4"] and "worker-<wbr>7" in flying
    assert _rows(client.get("/messages/new").text) == []
    paged = client.get("/messages/delayed", params={"per": "50", "page": "1"}).text
    assert "Страница 1 из 1" in paged
    # a typo in a filter is said, not a 500; an order the list cannot walk is said too
    bad = html.unescape(client.get("/messages/delayed", params={"reason": "nope"}).text)
    assert "Неизвестное значение фильтра: nope" in bad
    bad = html.unescape(client.get("/messages/delivered", params={"sort": "attempts"}).text)
    assert "Неизвестный порядок сортировки" in bad
    # no such list: a Russian 404; the quarantine's list is its own page
    missing = client.get("/messages/nonsense")
    assert missing.status_code == 404 and "Такого списка сообщений нет" in missing.text
    moved = client.get("/messages/quarantined?reason=timeout", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (303, "/quarantine?reason=timeout")


def test_the_dashboards_figures_lead_to_the_lists(olga: str, db: Engine) -> None:
    _taken(db)
    page = signed_in(olga, "olga").get("/").text
    for state in ("new", "delayed", "in_progress", "delivered"):
        assert f'href="/messages/{state}"' in page, state
    assert re.search(r'<b id="new"><a href="/messages/new">', page)
    assert 'href="/quarantine"' in page


def test_a_1c_files_prices_say_how_many_no_worker_has_taken_yet(olga: str, db: Engine) -> None:
    now = datetime.now(UTC)
    stage(db, [price_row(f"SKU-{i}", 1, source_ref=REF) for i in range(3)])
    with transaction(db) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="staged",
                detail="3 prices",
                intents=3,
                version=7,
            )
        )
        connection.execute(
            insert(cml_packages).values(
                digest="e" * 64, version=7, source_ref=REF, intents=3, staged_at=now
            )
        )
    client = signed_in(olga, "olga")
    page = html.unescape(client.get("/exchanges").text)
    assert "цены из этого файла: 3" in page
    assert "ещё не взяты обработчиком: 3" in page
    take(db, None, dict(DEFAULT_KINDS), now)
    page = html.unescape(client.get("/exchanges").text)
    assert "цены из этого файла: 3" in page and "ещё не взяты обработчиком" not in page


def _reasons_offered(page: str) -> list[str]:
    select = page.split('<select name="reason">', 1)[1].split("</select>", 1)[0]
    return [v for v in re.findall(r'<option value="([^"]*)"', select) if v]


def test_a_state_lists_reason_filter_offers_only_the_reasons_that_state_can_hold(
    olga: str, db: Engine
) -> None:
    """Issue 34 item 7 (a fresh operator's review): the delivered list offered all 16 reasons,
    «unroutable» among them; a delivered, new or in-progress message carries no reason, a
    cancelled one only why it ended (domain.reasons.CANCELLED_REASONS); the delayed list and the
    quarantine offer those present."""
    _taken(db)
    client = signed_in(olga, "olga")
    for state in ("delivered", "new", "in_progress"):
        assert _reasons_offered(client.get(f"/messages/{state}").text) == [], state
    cancelled = _reasons_offered(client.get("/messages/cancelled").text)
    assert sorted(cancelled) == sorted(r.value for r in CANCELLED_REASONS)
    assert "unroutable" not in cancelled and "http-422" not in cancelled
    assert _reasons_offered(client.get("/messages/delayed").text) == ["http-503", "timeout"]


def test_search_shows_every_price_with_its_currency_and_a_1c_document_in_russian(
    olga: str, db: Engine
) -> None:
    """Issue 34 item 7 (a fresh operator's review): a price whose payload names no currency
    read «5» beside «1,00 ₽»; the contract's default currency (RUB) is shown as for the others.
    «Документ 1С» read «1C exchange offers.xml …» (English, a Latin C): said in Russian."""
    stage(
        db,
        [
            price_row("SKU-8", 1, "1.00", aggregate="SKU-8/retail", name="Соль", source_ref=REF),
            price_row("SKU-9", 1, "5", aggregate="SKU-9/retail", name="Соль морская"),
        ],
    )
    take(db, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    # a payload as a sender may write it: no currency (the contract's default applies)
    _put(db, "SKU-9/retail", payload='{"sku": "SKU-9", "price": "5", "price_type": "retail"}')
    page = html.unescape(signed_in(olga, "olga").get("/find", params={"q": "Соль"}).text)
    assert "1,00\xa0₽" in page and "5,00\xa0₽" in page, page
    assert "Обмен с 1С: offers.xml от 05.12.2026 06:00:00" in page.replace("<wbr>", "")
    assert "1C exchange" not in page
