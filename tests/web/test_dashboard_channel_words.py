"""What a shop owner moving to channels met on the dashboard (words31): a registered channel no
configured channel serves, with work waiting on it, is under «Требует внимания» with what to
do (item 2); with no worker live and a channel paused on its own, the banner says that
channel's work waits for a resume and the others' for a worker (item 4); a channel's pause
shows the operator's note, escaped, beside who paused and when (item 5)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, update
from web_helpers import TOKEN
from workbench_helpers import add_operator, close_all, signed_in

from exchange.db.engine import transaction
from exchange.db.schema import messages, workers
from exchange.dev.testing import price_row
from exchange.queue import control
from exchange.words import word
from tests.support.second_channel import on_the_one, second_channel, taken


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


def element(page: str, ident: str) -> str:
    """The text of the element with id ``ident`` (tags dropped, entities read)."""
    found = re.search(rf'<(\w+)[^>]*\bid="{ident}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no #{ident} in the page"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(2))).strip()


def _dashboard(serve: Callable[..., Any], db: Engine, **settings: Any) -> str:
    base: str = serve(**settings)
    add_operator(db, "olga", "operator")
    return signed_in(base, "olga").get("/").text


def _two_channels_one_paused(db: Engine, *, api_waits: bool) -> None:
    """SKU-1 waiting on ``second``, paused on its own with a note; on ``api`` waiting too, or
    delivered; no worker has ever run."""
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    if not api_waits:
        on_the_one(db, "SKU-1/retail", state="delivered")
    second_channel(db, {"SKU-1/retail": ("new", None)}, now, target="woocommerce")
    with transaction(db) as connection:
        control.pause(
            connection, operator="olga", note="<b>цены</b> на проверке", now=now, channel="second"
        )


def test_a_channel_renamed_in_the_settings_leaves_its_waiting_work_under_needs_a_person(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """The one channel (``api``, as migrate registered it) configured as ``site`` now: the
    price waiting on ``api`` is no worker's, and «Требует внимания» names the channel, the
    count and what to do."""
    taken(db, [price_row("SKU-1", 1, "10.00")], datetime.now(UTC))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    page = _dashboard(serve, db, channels={"site": site})
    needs = " ".join(element(page, "needs").split())
    assert (
        "канал api (сайт): ждёт 1 доставка, а ни один настроенный канал его не обслуживает: "
        "настройте его снова (канал с именем api в настройках) или, если канал переименован, "
        "удалите его, отменив то, что на нём ждёт (exchange channels drop api --note ТЕКСТ), "
        "и дайте новому каналу все текущие цены: exchange channels seed НОВЫЙ"
    ) in needs, needs


def test_with_no_worker_a_paused_channels_work_waits_for_resume_and_the_others_for_a_worker(
    serve: Callable[..., Any], db: Engine
) -> None:
    _two_channels_one_paused(db, api_waits=True)
    page = _dashboard(serve, db)
    banner = " ".join(element(page, "pause").split())
    assert element(page, "paused-waits") == (
        "Ни один обработчик сейчас не работает. Работа каналов, остановленных по отдельности "
        "(second), ждёт, когда оператор их возобновит: до тех пор запущенный обработчик её не "
        "возьмёт."
    )
    assert "Работа остальных каналов ждёт обработчика: её возьмёт первый запущенный" in banner
    # never the one-channel words that the first worker to start takes all of it
    assert "её возьмёт первый запущенный обработчик" not in banner, banner


def test_with_no_worker_and_only_the_paused_channel_waiting_no_worker_is_said_to_take_it(
    serve: Callable[..., Any], db: Engine
) -> None:
    _two_channels_one_paused(db, api_waits=False)
    page = _dashboard(serve, db)
    assert "(second), ждёт, когда оператор их возобновит" in element(page, "paused-waits")
    assert 'id="others-wait"' not in page
    assert "первый запущенный" not in element(page, "pause")


def test_a_channels_pause_shows_the_operators_note_escaped_beside_who_and_when(
    serve: Callable[..., Any], db: Engine
) -> None:
    _two_channels_one_paused(db, api_waits=True)
    page = _dashboard(serve, db)
    row = page.split('id="channel-second"')[1].split("</tr>")[0]
    cell = row.split('class="delivery"')[1].split("</td>")[0]
    assert "<b>цены</b>" not in cell  # the note is the operator's text, never markup
    said = " ".join(html.unescape(re.sub(r"<[^>]+>", "", cell.split(">", 1)[1])).split())
    assert said.startswith("остановлена оператором olga, "), said
    assert said.endswith(": <b>цены</b> на проверке"), said


def test_with_no_worker_and_work_only_on_a_renamed_channel_the_banner_never_says_none_waits(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Issue 32 (mpwords2 item 3): the one channel ``api`` configured as ``site`` now, its
    price waiting on ``api``, no worker: the banner said «работы, ждущей доставки, нет». It
    says the work waits on ``api``, which no worker that starts takes."""
    taken(db, [price_row("SKU-1", 1, "10.00")], datetime.now(UTC))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    page = _dashboard(serve, db, channels={"site": site})
    banner = " ".join(element(page, "pause").split())
    assert "работы, ждущей доставки, нет" not in banner, banner
    assert element(page, "unserved-waits") == (
        "Ни один обработчик сейчас не работает. Работа ждёт на канале, который не обслуживает "
        "ни один настроенный канал (api): её не возьмёт ни один обработчик, какой ни запусти, "
        "пока этот канал не настроят снова или не удалят (см. ниже)."
    )


def test_the_quarantine_by_reason_table_says_a_marketplaces_reason_in_its_words(
    serve: Callable[..., Any], db: Engine
) -> None:
    """Issue 32 (mpwords2 item 1): a price quarantined ``unknown-response`` on an Ozon channel
    is «непонятный ответ площадки» in the dashboard's quarantine table, as on the quarantine's
    own list (``words.reason_target``), never the site's words; a site's reason keeps its."""
    now = datetime.now(UTC)
    taken(db, [price_row(f"SKU-{n}", 1, "10.00", aggregate=f"SKU-{n}/retail") for n in (1, 2)], now)
    on_the_one(db, "SKU-1/retail", state="delivered")
    on_the_one(db, "SKU-2/retail", state="quarantined", reason="http-422")
    second_channel(db, {"SKU-1/retail": ("quarantined", "unknown-response")}, now, target="ozon")
    page = _dashboard(serve, db)
    table = page.split(f"<h2>{word('quarantine', 'ru')}</h2>")[-1].split("</table>")[0]
    said = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", table)).split())
    assert "непонятный ответ площадки (unknown-response)" in said, said
    assert "сайт отклонил (http-422)" in said, said


def test_a_channel_whose_only_worker_died_is_under_needs_a_person_with_what_to_start(
    serve: Callable[..., Any], db: Engine, tmp_path: Path
) -> None:
    """Review 33 (contract 6: no live worker is a cause): ``api``'s worker is live, ``second``'s
    only worker (``exchange run --channel second``) died an hour ago, and a price has waited
    on ``second`` since. The channels table said «нет живого обработчика», but «Требует
    внимания» listed nothing: it names the channel, what waits and the worker to start
    (``ops.attention.unmanned``); ``api``, served, is not named."""
    now = datetime.now(UTC)
    long_ago = now - timedelta(hours=1)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], long_ago)
    on_the_one(db, "SKU-1/retail", state="delivered")
    second_channel(db, {"SKU-1/retail": ("new", None)}, long_ago)
    with transaction(db) as connection:
        connection.execute(update(messages).values(created_at=long_ago))  # 1C sent it then
        for worker, channel, seen in (("w1/api", "api", now), ("w2/second", "second", long_ago)):
            connection.execute(
                insert(workers).values(
                    worker_id=worker, started_at=long_ago, heartbeat_at=seen, channel=channel
                )
            )
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    other = {**site, "site_url": "https://second.example.com"}
    page = _dashboard(serve, db, channels={"api": site, "second": other})
    needs = " ".join(element(page, "needs").split())
    assert (
        "канал second (сайт): ждёт 1 доставка, а ни одного живого обработчика, доставляющего на "
        "него, нет: на него ничего не уходит. Запустите обработчик для него: exchange run "
        "--channel second (или exchange run, который доставляет на все настроенные каналы)"
    ) in needs, needs
    assert "канал api" not in needs, needs
