"""docs/marketplaces.ru.md, «Задача, которая может примениться поздно»: an upload whose answer
was lost holds its good — «ни эта цена повторно, ни более новая не отправляются» — until WB's
catalogue shows that price (research §2.4: the time to apply is not documented; §2.5, §8: the
order of two tasks of one nmID is not documented). Whatever the worker made of the lost
answer: here the site's health failed too, so the attempt was ``released`` uncharged
(contract 5c), not ``retry-scheduled`` (review 32p-wb: the released path). The real worker,
the Wildberries simulator over HTTP, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from clitools import Cli
from marketsims import wb_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.dev.wbsim import WbSimulator
from exchange.targets.wildberries import target as wb_target
from exchange.words import detail_words, event_said
from exchange.worker import Worker

LOST, NEWER = 1010, 1030
LANDS_AFTER = 4.0  # seconds (the simulator's clock runs as the wall's) the lost task lands


class LostWhileDown(httpx.AsyncBaseTransport):
    """WB stops answering for a while (``kill -STOP``): the first upload reaches WB, which
    makes its task (fault ``late``: it lands ``LANDS_AFTER`` later), but its answer never comes
    back (``ReadTimeout``); the health check asked then fails as well, so the worker takes the
    timeout for the site's (released, not charged). Then WB answers again."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lost = False
        self.health_failed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        health = (
            request.url.path == "/api/v2/list/goods/filter"
            and "filterNmID" not in request.url.params
            and request.url.params.get("limit") == "1"
        )
        if health and self.lost and not self.health_failed:
            self.health_failed = True
            raise httpx.ConnectError("WB does not answer", request=request)
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and not self.lost:
            self.lost = True
            await response.aread()
            await response.aclose()
            raise httpx.ReadTimeout("timed out", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    with wb_sim([("SKU-1", 1000)], processing_delay=0.3) as sim:
        yield sim


def story(engine: Engine) -> list[tuple[int, str, str]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.version, history.c.event, history.c.detail)
            .join(messages, messages.c.id == history.c.message_pk)
            .order_by(history.c.id)
        )
        return [(v, e, d or "") for v, e, d in rows]


def test_a_newer_price_waits_for_an_upload_released_uncharged_with_its_answer_lost(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wb_target, "REPLAY_WAIT", 0.5)  # a read of the catalogue a second
    good = wb.by_vendor_code("SKU-1")
    assert good is not None
    wb.faults.late = {(good.nm_id, LOST): LANDS_AFTER}
    transport = LostWhileDown()
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
    )
    worker: Worker = bootstrap.worker(settings, engine, transport=transport, rng=random.Random(3))
    # What WB held each time an upload of the newer price reached it.
    held_at_newer: list[int] = []
    serve = wb.serve

    def watched(method, target, headers, raw):  # type: ignore[no-untyped-def]
        if method == "POST" and f'"price": {NEWER}'.encode() in raw:
            held_at_newer.append(wb.goods[good.nm_id].price)
        return serve(method, target, headers, raw)

    wb.serve = watched  # type: ignore[method-assign]
    stage(engine, [price_row("SKU-1", 1, f"{LOST}.00")])

    async def scenario(w: Worker) -> None:
        for _ in range(2000):
            await w.cycle()
            if any(e == "released" for _, e, _ in story(engine)):
                break
            await asyncio.sleep(0.01)
        stage(engine, [price_row("SKU-1", 2, f"{NEWER}.00")])
        for _ in range(3000):
            await w.cycle()
            if w.idle():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(story(engine))

    run_worker(worker, scenario)

    seen = story(engine)
    released = [d for v, e, d in seen if v == 1 and e == "released"]
    assert released and "result-unknown" in released[0], seen
    assert not any(v == 1 and e == "retry-scheduled" for v, e, _ in seen), "the released path"
    assert held_at_newer and all(p == LOST for p in held_at_newer), (
        f"{NEWER} uploaded while WB held {held_at_newer}: before the lost {LOST} landed"
    )
    assert [LOST, NEWER] == wb.applied[good.nm_id], "the lost task never lands over the newer"
    assert NEWER == wb.goods[good.nm_id].price
    assert ("delivered", 2) in [(e, v) for v, e, _ in seen]
    # The newer price's history says why it went (read without it, the hold looked skipped:
    # v1 superseded, v2 uploaded).
    went = [d for v, e, d in seen if v == 2 and "has landed" in d]
    assert went, [d for v, _, d in seen if v == 2]
    assert f"the upload of {LOST}.00 whose answer was lost has landed" in went[0], went
    assert f"применилась загрузка {LOST}.00, ответ на которую потерян" in detail_words(went[0])


def test_the_history_of_a_lost_upload_says_it_waits_to_learn_never_sent_again(
    db_url: str, engine: Engine, wb: WbSimulator, tmp_path: Path
) -> None:
    """Seller review 35 (wbwords35 item 2): the released row of an upload whose answer was lost
    read «отправлено, ответ неизвестен: отправится снова» ("sent, answer unknown: sent
    again"), but the service never uploads it again: the next attempt waits until WB shows
    whether it applied it, up to an hour. ``exchange history`` (and the workbench's event
    words) say that wait; ``exchange find`` says what the good waits for. The targets that do
    send again keep their words (tests/report)."""
    good = wb.by_vendor_code("SKU-1")
    assert good is not None
    wb.faults.late = {(good.nm_id, LOST): 600.0}
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
    )
    worker: Worker = bootstrap.worker(
        settings, engine, transport=LostWhileDown(), rng=random.Random(3)
    )
    stage(engine, [price_row("SKU-1", 1, f"{LOST}.00")])

    async def scenario(w: Worker) -> None:
        for _ in range(2000):
            await w.cycle()
            if any(e == "awaiting-outcome" for _, e, _ in story(engine)):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(story(engine))

    run_worker(worker, scenario)
    (released,) = [d for _, e, d in story(engine) if e == "released"]
    assert "whether it applied the upload, up to 60 min" in released, released
    for lang in ("ru", "en"):
        said = event_said("released", released, lang)
        assert "снова" not in said and "sent again" not in said, said
    cli = Cli(tmp_path)
    ru = cli("history", "SKU-1", db=db_url, env={"LANG": "ru_RU.UTF-8", "COLUMNS": "600"})
    text = " ".join(ru.stdout.replace("│", " ").split())
    assert "ответ неизвестен: ждём, пока канал покажет, применена ли загрузка" in text, text
    assert "отправится снова" not in text, text
    assert "применил ли он загрузку, — до 60 мин" in text, text
    en = cli("history", "SKU-1", db=db_url, env={"COLUMNS": "600"})
    text = " ".join(en.stdout.replace("│", " ").split())
    assert "its answer was lost: the good waits until Wildberries shows whether it" in text, text
    for lang, waits in (
        ("ru_RU.UTF-8", "ответ на которую потерян"),
        ("C.UTF-8", "whose answer was lost"),
    ):
        found = cli("find", "SKU-1", db=db_url, env={"LANG": lang}).stdout
        assert waits in found and "снова" not in found and "sent again" not in found, found
