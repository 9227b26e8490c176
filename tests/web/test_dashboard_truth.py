"""The dashboard says one thing at a time, and says it as ``exchange status`` does (issue 24
item 1, the fresh operator review): work waiting with no live worker is red and a cause at
once, whatever its age; the backlog card counts what 1C handed over and no worker took; a
cleanly stopped worker is said as stopped, when; a pause and no worker are both said; no
estimate while paused, none for nothing; an empty value is «—»."""

from __future__ import annotations

import html
import random
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import Engine, insert, select, update
from web_helpers import PASSWORD, USER
from workbench_helpers import add_operator, close_all, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import (
    channels,
    deliveries,
    messages,
    sign_in_refusals,
    staging,
    wb_tasks,
    workers,
)
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops.attention import pause_words
from exchange.queue import control, lease, record
from exchange.words import word

DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200)


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def bench(serve: Callable[..., Any], db: Engine) -> str:
    base: str = serve()
    add_operator(db, "olga", "operator")
    return base


def element(page: str, ident: str) -> str:
    """The text of the element with id ``ident`` (tags dropped, entities read)."""
    found = re.search(rf'<(\w+)[^>]*\bid="{ident}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no #{ident} in the page"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(2))).strip()


def banner_class(page: str) -> str:
    found = re.search(r'<div class="([^"]*)" id="pause"', page)
    assert found, "no banner"
    return found.group(1)


def test_rows_staged_before_run_started_are_red_a_cause_and_counted_in_the_backlog(
    bench: str, db: Engine
) -> None:
    """140 prices staged two minutes ago (older than max(lease, 3 x poll): contract 6), no
    worker ever ran: the banner is red, the same cause is listed (never «Ничего не требует
    внимания»), and the backlog card says 140 are not taken yet (never «сообщений ещё нет»)."""
    stage(db, [price_row(f"SKU-{n:03d}", 1) for n in range(140)])
    with transaction(db) as connection:
        connection.execute(
            update(staging).values(created_at=datetime.now(UTC) - timedelta(seconds=120))
        )
    page = signed_in(bench, "olga").get("/").text
    assert "stopped" in banner_class(page).split(), banner_class(page)
    assert word("nothing_delivered", "ru") in element(page, "pause")
    needs = element(page, "needs")
    assert word("nothing_needs", "ru") not in needs
    assert "ни один обработчик не работает" in needs, needs
    card = element(page, "backlog")
    assert "ещё не взято из 1С: 140" in card, card
    assert "сообщений ещё нет" not in card and word("backlog_none", "ru") not in card


def test_a_pause_with_work_waiting_and_no_worker_says_both(bench: str, db: Engine) -> None:
    """Both facts, the pause and no worker, as soon as work waits; red once the work is older
    than max(lease, 3 x poll) (contract 6: then no worker is a cause)."""
    stage(db, [price_row("SKU-1", 1)])
    with transaction(db) as connection:
        control.pause(connection, operator="olga", note="проверка цен", now=datetime.now(UTC))
    client = signed_in(bench, "olga")
    page = client.get("/").text
    said = element(page, "pause")
    assert word("paused_by", "ru") in said and "olga" in said, said
    assert word("no_live_worker_too", "ru") in said, said
    assert "stopped" not in banner_class(page).split()  # a worker's next poll away
    with transaction(db) as connection:
        connection.execute(
            update(staging).values(created_at=datetime.now(UTC) - timedelta(seconds=120))
        )
    page = client.get("/").text
    assert word("no_live_worker_too", "ru") in element(page, "pause")
    assert "stopped" in banner_class(page).split()


def _delivering_worker(db: Engine, db_url: str, sent: int, claimed: int) -> None:
    """A live worker that delivered ``sent`` messages just now and holds ``claimed`` more."""
    settings = fast_settings(db_url)
    now = datetime.now(UTC)
    stage(db, [price_row(f"SKU-{n:02d}", 1) for n in range(sent + claimed)])
    intake.take(db, None, settings.kinds, now)
    with transaction(db) as c:
        c.execute(insert(workers).values(worker_id="w1", started_at=now, heartbeat_at=now))
        batch = lease.claim(
            c, worker="w1", now=now, limit=sent, lease_seconds=60, max_attempts=3,
            kinds=settings.policies,
        )  # fmt: skip
    with transaction(db) as c:
        record.record(
            c, token=batch.token, worker="w1", now=now,
            outcomes=[(m, DELIVERED) for m in batch.messages], kinds=settings.policies,
        )  # fmt: skip


def test_no_estimate_while_paused(bench: str, db: Engine, db_url: str) -> None:
    _delivering_worker(db, db_url, sent=20, claimed=30)
    client = signed_in(bench, "olga")
    running = element(client.get("/").text, "backlog")
    assert "при нынешнем темпе" in running, running  # the pace is there to extrapolate from
    with transaction(db) as connection:
        control.pause(connection, operator="olga", note="ночь", now=datetime.now(UTC))
    card = element(client.get("/").text, "backlog")
    assert "при нынешнем темпе" not in card and "около" not in card, card
    assert word("backlog_paused", "ru") in card, card


def test_a_backlog_due_later_than_the_pace_says_so_as_status_does(
    bench: str, db: Engine, db_url: str
) -> None:
    """rev32p (the seller): the dashboard said «около 20 с при нынешнем темпе» of a price that
    waits 10 minutes for Wildberries' catalogue, while ``exchange status`` said «около 9 мин
    57 с». Both say the last delayed delivery's due time when it is later than the pace
    (``ops.backlog.waits_for_its_time``), on the card and on the channel's row."""
    _delivering_worker(db, db_url, sent=20, claimed=0)
    stage(db, [price_row("SKU-LATE", 1)])
    intake.take(db, None, fast_settings(db_url).kinds, datetime.now(UTC))
    with transaction(db) as c:
        c.execute(
            update(deliveries)
            .where(deliveries.c.state == State.NEW.value)
            .values(
                state=State.DELAYED.value, next_try_at=datetime.now(UTC) + timedelta(minutes=10)
            )
        )
    page = signed_in(bench, "olga").get("/").text
    card = html.unescape(element(page, "backlog"))
    assert "лишь тогда подойдёт срок последнего" in card, card
    assert "при нынешнем темпе" not in card, card
    assert re.search(r"около (9|10) мин", card), card


def test_a_backlog_held_by_a_possibly_applied_wb_upload_says_up_to_the_holds_end(
    bench: str, db: Engine, db_url: str
) -> None:
    """Seller review 35 (wbwords35 item 1): a price whose Wildberries upload's answer was lost
    waits until WB shows whether it applied it, up to an hour; its due time (9 minutes) is
    only the next look. The card says the bound from the hold's end and what it waits for, as
    ``exchange status`` does (``ops.backlog.estimate_kind``), never «около 9 мин»."""
    _delivering_worker(db, db_url, sent=20, claimed=0)
    stage(db, [price_row("SKU-HELD", 1, "900.00")])
    now = datetime.now(UTC)
    intake.take(db, None, fast_settings(db_url).kinds, now)
    with transaction(db) as c:
        c.execute(update(channels).values(target="wildberries"))
        name = c.execute(select(channels.c.name)).scalar_one()
        c.execute(
            update(deliveries)
            .where(deliveries.c.state == State.NEW.value)
            .values(state=State.DELAYED.value, next_try_at=now + timedelta(minutes=9))
        )
        held = c.execute(
            select(messages.c.message_id).where(messages.c.aggregate.like("%SKU-HELD%"))
        ).scalar_one()
        c.execute(
            insert(wb_tasks).values(
                channel=name, nm_id=1, upload_id=0, price=Decimal("900"), message_id=held,
                uploaded_at=now - timedelta(minutes=1), goods=1,
            )
        )  # fmt: skip
    card = html.unescape(element(signed_in(bench, "olga").get("/").text, "backlog"))
    assert re.search(r"до 5\d мин \d+ с \(ждём, применил ли WB загрузку\)", card), card
    assert "около" not in card and "лишь тогда подойдёт срок" not in card, card


def test_nothing_to_deliver_has_no_estimate_of_zero(bench: str, db: Engine, db_url: str) -> None:
    _delivering_worker(db, db_url, sent=20, claimed=0)
    card = element(signed_in(bench, "olga").get("/").text, "backlog")
    assert "около" not in card and "при нынешнем темпе" not in card, card
    assert word("backlog_none", "ru") in card, card


def test_an_empty_oldest_is_a_dash_like_every_empty_value(bench: str) -> None:
    page = signed_in(bench, "olga").get("/").text
    card = re.search(rf"<span>{word('oldest', 'ru')}</span><b>([^<]*)</b>", page)
    assert card and card.group(1) == "—", card and card.group(1)


def test_a_cleanly_stopped_worker_is_said_stopped_not_an_hour_silent(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    stage(db, [price_row("SKU-1", 1)])
    worker = bootstrap.worker(fast_settings(db_url, site.url), db, rng=random.Random(3))
    run_worker(worker)
    worker.retire()  # what SIGTERM ends with
    page = signed_in(bench, "olga").get("/").text
    said = element(page, "last-stopped")
    assert f"Обработчик {worker.worker_id} остановлен" in said, said
    assert re.search(r"остановлен \d+ с назад", said), said  # the test ran in under a minute
    assert word("no_workers", "ru") not in page


def test_a_worker_started_again_under_its_id_is_shown_delivering_not_stopped(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    """Issue 34 item 1: after a clean stop and a start under the same EXCHANGE_WORKER_ID
    (the shipped configuration fixes it), the page never says «Ничего не доставляется… ни один
    обработчик не работает»: the worker's row is live, the banner says delivery runs."""
    settings = fast_settings(db_url, site.url)
    first = bootstrap.worker(settings, db, rng=random.Random(3))
    run_worker(first)
    first.retire()
    stage(db, [price_row("SKU-2", 1)])
    with transaction(db) as connection:
        connection.execute(
            update(staging).values(created_at=datetime.now(UTC) - timedelta(seconds=120))
        )
    again = bootstrap.worker(settings, db, rng=random.Random(4))
    run_worker(again, lambda w: w.cycle())
    page = signed_in(bench, "olga").get("/").text
    assert word("delivery_runs", "ru") in element(page, "pause")
    assert word("nothing_delivered", "ru") not in page
    assert re.search(r'data-state="live"><td[^>]*>test-(<wbr>)?worker</td>', page), page


def test_a_site_refusing_connections_is_said_unreachable_never_delivery_runs(
    bench: str, db: Engine, db_url: str
) -> None:
    """Issue 34 item 3: with the site refusing connections, the banner says since when the
    site has not answered and that the prices go by themselves once it answers; no estimate
    at 0 requests/s; no «предохранитель» anywhere."""
    stage(db, [price_row(f"SKU-{n}", 1) for n in range(3)])
    worker = bootstrap.worker(fast_settings(db_url, "http://127.0.0.1:9"), db)
    run_worker(worker, lambda w: w.cycle())
    page = signed_in(bench, "olga").get("/").text
    said = element(page, "pause")
    assert "Сайт не отвечает с" in said and "уйдут сами" in said, said
    assert word("delivery_runs", "ru") not in said
    card = element(page, "backlog")
    assert word("backlog_unreachable", "ru") in card and "около" not in card, card
    assert "предохранител" not in page.lower()
    # One truth (the new operator's review): the worker row reads the banner's facts, never
    # «отвечает», «идёт» or «перегружен» for a site that gives no answer at all.
    row = re.search(r'<tr class="live" data-state="live">(.*?)</tr>', page, re.S)
    assert row, page
    cells = html.unescape(re.sub(r"<[^>]+>", "|", row.group(1)))
    assert "не отвечает с" in cells and word("waits_for_site", "ru") in cells, cells
    assert "нет ответа" in cells, cells
    for wrong in (f"|{word('breaker_closed', 'ru')}|", f"|{word('running', 'ru')}|", "перегружен"):
        assert wrong not in cells, (wrong, cells)


def test_wrong_1c_passwords_are_said_under_needs_a_person_until_1c_signs_in(
    bench: str, db: Engine
) -> None:
    """Issue 34 item 5 (contract 15): wrong 1C passwords are a cause on the page at once, in
    the words ``status`` and the notice use; written to the database (one row for the first,
    every other process sees it), never with the name or the address tried; a successful
    sign-in clears it."""
    for _ in range(3):
        answer = httpx.get(
            f"{bench}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, "wrong")
        )
        assert answer.text.startswith("failure")
    client = signed_in(bench, "olga")
    needs = element(client.get("/").text, "needs")
    assert "1С не может войти: 3 неверных входа с" in needs, needs
    assert "EXCHANGE_1C_USER" in needs
    with transaction(db) as connection:
        rows = connection.execute(select(sign_in_refusals)).mappings().all()
    # The first refusal at once, the rest within the minute; olga's sign-in is a mark (0).
    assert sorted((r["door"], r["count"]) for r in rows) == [("1c", 1), ("workbench", 0)]
    assert not any("wrong" in str(v) or "127.0.0.1" in str(v) for r in rows for v in r.values())
    right = httpx.get(f"{bench}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, PASSWORD))
    assert right.text.startswith("success")
    assert "1С не может войти" not in element(client.get("/").text, "needs")


def test_a_cause_time_is_said_in_the_display_zone_like_every_other_time(
    serve: Callable[..., Any], db: Engine
) -> None:
    """The new operator's review: «1С не может войти: … с 2026-12-05 06:13 UTC» beside a
    footer that says the page's times are in Europe/Moscow; the cause says its time in
    EXCHANGE_DISPLAY_TZ, as every other time on the page."""
    base = serve(display_tz="Europe/Moscow")
    add_operator(db, "olga", "operator")
    before = datetime.now(UTC)
    httpx.get(f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, "wrong"))
    needs = element(signed_in(base, "olga").get("/").text, "needs")
    assert "1С не может войти" in needs, needs
    said = re.search(r" с (\d{4}-\d\d-\d\d \d\d:\d\d) (\w+),", needs)
    assert said and said.group(2) == "MSK", needs
    moscow = before.astimezone(ZoneInfo("Europe/Moscow")).replace(second=0, microsecond=0)
    assert said.group(1) >= moscow.strftime("%Y-%m-%d %H:%M"), needs
    assert "UTC" not in needs


def _paused_by_the_site(db: Engine, answer: str, cause: str) -> None:
    """One live worker paused by the site's ``answer`` (``pause_cause`` ``cause``)."""
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="shop-1",
                started_at=now,
                heartbeat_at=now,
                paused_reason=answer,
                paused_at=now,
                pause_cause=cause,
            )
        )


def test_a_pause_by_the_site_says_what_to_mend_in_the_words_of_status(
    bench: str, db: Engine
) -> None:
    """Issue 34 item 4: a WooCommerce key that may only read is said as such on the page,
    whom to ask included, with the words ``status`` and the notice use (never «сайт не принял
    токен» where there is no token)."""
    answer = "the key may read but not write (HTTP 401: woocommerce_rest_cannot_edit)"
    _paused_by_the_site(db, answer, "read-only-key")
    page = signed_in(bench, "olga").get("/").text
    said = element(page, "pause")
    assert pause_words("read-only-key", answer, "ru") in said, said
    assert "Администратор магазина" in said and "токен" not in said
    assert pause_words("read-only-key", answer, "ru") in element(page, "needs")


def test_a_breaker_checking_the_site_shows_no_past_time_and_no_jargon(
    bench: str, db: Engine
) -> None:
    """Issue 34 items 3 and 4: a half-open breaker's time lies in the past; the row says the
    service checks whether the site answers, never «пробный запрос» at a past time."""
    now = datetime.now(UTC)
    past = now - timedelta(minutes=7)
    with transaction(db) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="shop-1",
                started_at=now,
                heartbeat_at=now,
                breaker_state="half-open",
                breaker_until=past,
            )
        )
    page = signed_in(bench, "olga").get("/").text
    table = element(page, "workers")
    assert word("breaker_half-open", "ru") in table, table
    assert "пробный запрос" not in page and past.strftime("%H:%M:%S") not in table, table
    assert "предохранител" not in page.lower()


def test_a_refused_token_is_said_in_russian_in_the_banner_the_needs_and_the_worker_row(
    bench: str, db: Engine
) -> None:
    """Issue 34 item 7: the site's 401 is recorded in English ("HTTP 401: the site refused the
    token"); the Russian page says it in Russian wherever it shows it (the banner, what needs a
    person, the worker's row), never «остановлена: HTTP 401: the site refused the token»."""
    _paused_by_the_site(db, "HTTP 401: the site refused the token", "token")
    page = signed_in(bench, "olga").get("/").text
    for ident in ("pause", "needs", "workers"):
        said = element(page, ident)
        assert "refused" not in said, (ident, said)
    # The worker's row says the answer; the banner and the needs say the cause with the
    # answer's own facts beside it, each thing once (never «сайт не принял токен (HTTP 401:
    # сайт не принял токен)»).
    assert "HTTP 401: сайт не принял токен" in element(page, "workers")
    for ident in ("pause", "needs"):
        said = element(page, ident)
        assert "сайт не принял токен (HTTP 401)" in said, (ident, said)
        assert 1 == said.count("не принял токен"), (ident, said)


def test_a_stopped_worker_is_no_last_one_beside_a_silent_row(bench: str, db: Engine) -> None:
    """After ``kill -9`` of w1 and a clean stop of w2 the page said «Обработчик w2 остановлен
    … ; других нет» under a table listing w1 as silent: the sentence names w1, silent since
    when, and never says «других нет»; ``exchange status`` says the same under its table."""
    from rich.console import Console

    from exchange.domain.policy import KindPolicies
    from exchange.ops.status import status, tables

    now = datetime.now(UTC)
    killed = now - timedelta(minutes=5)
    with transaction(db) as connection:
        for worker_id, seen, stopped in (("w1", killed, None), ("w2", now, now)):
            connection.execute(
                insert(workers).values(
                    worker_id=worker_id,
                    started_at=seen - timedelta(hours=1),
                    heartbeat_at=seen,
                    stopped_at=stopped,
                    breaker_state="closed",
                )
            )
    said = element(signed_in(bench, "olga").get("/").text, "last-stopped")
    assert "Обработчик w2 остановлен" in said and "других нет" not in said, said
    assert "w1 молчит с" in said and "не доставляет" in said, said
    with transaction(db, read_only=True) as connection:
        figures = status(connection, now, KindPolicies.of({}))
    console = Console(width=400, record=True)
    for table in tables(figures, lang="ru"):
        console.print(table)
    printed = " ".join(console.export_text().split())
    assert "не работают и другие: w1 молчит с" in printed, printed


def test_messages_waiting_out_the_sites_retry_after_are_said_waiting_not_sent(
    bench: str, db: Engine, db_url: str
) -> None:
    """The site answered 503 with Retry-After 40: the worker keeps its 44 leases (contract 4)
    but sends none (contract 5c: every request waits for the pace's hold), and the page and
    ``status`` said «отправляется 44» beside «в работе 0». Both now say how many of them wait,
    and until when the site asked to wait."""
    import json

    from rich.console import Console

    from exchange.domain.policy import KindPolicies
    from exchange.ops.status import status, tables

    settings = fast_settings(db_url)
    now = datetime.now(UTC)
    stage(db, [price_row(f"SKU-{n:02d}", 1) for n in range(44)])
    intake.take(db, None, settings.kinds, now)
    pace = {"limit": 1, "max_limit": 4, "in_flight": 0, "accepted_rate": 0, "hold_s": 40,
            "refused_last_minute": 3}  # fmt: skip
    with transaction(db) as c:
        c.execute(
            insert(workers).values(
                worker_id="w1", started_at=now, heartbeat_at=now, pace=json.dumps(pace)
            )
        )
        lease.claim(
            c, worker="w1", now=now, limit=44, lease_seconds=60, max_attempts=3,
            kinds=settings.policies,
        )  # fmt: skip
    until = (now + timedelta(seconds=40)).strftime("%H:%M")
    said = element(signed_in(bench, "olga").get("/").text, "in-progress-waiting")
    assert "из них ждут, сайт просил подождать до" in said and until in said, said
    assert said.endswith("44"), said
    with transaction(db, read_only=True) as connection:
        figures = status(connection, now, KindPolicies.of({}))
    assert figures.waiting_for_site and figures.waiting_for_site["count"] == 44
    console = Console(width=400, record=True)
    for table in tables(figures, lang="ru"):
        console.print(table)
    printed = " ".join(console.export_text().split())
    assert "из них ждут, сайт просил подождать до" in printed, printed
