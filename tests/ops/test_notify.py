"""Issue 16 item 6: the operators are told by e-mail or Telegram when the quarantine gains entries
or delivery stops, at most once per EXCHANGE_NOTIFY_EVERY for every process sharing the
database; against a real SMTP server (aiosmtpd) and a simulated Bot API, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from notifytools import (
    BOT_TOKEN,
    SMTP_PASSWORD,
    SMTP_USER,
    BotApi,
    bot_api,
    free_port,
    silent_server,
    smtp_server,
)
from opstools import TOKEN
from securitytools import make_pki, server_context
from sqlalchemy import Engine, event, insert, select, update

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import notifications, workers
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.domain.notify import Stop
from exchange.ops.check import check_notifications
from exchange.queue import control
from exchange.report.notice import Notifier, notifier
from exchange.runner import run_forever
from exchange.settings import Settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

EVERY = 3600.0


def mail_settings(
    db_url: str, port: int, site: SiteSimulator | None = None, **more: Any
) -> Settings:
    options: dict[str, Any] = {
        "notify_smtp_host": "127.0.0.1",
        "notify_smtp_port": port,
        "notify_smtp_security": "none",
        "notify_smtp_from": "exchange@shop.example",
        "notify_smtp_to": ["ops@shop.example"],
        "notify_every": EVERY,
        "public_url": "https://exchange.shop.example:8443",
    }
    return fast_settings(db_url, site.url if site else None, **{**options, **more})


def quarantine(db_url: str, engine: Engine, site: SiteSimulator, *skus: str) -> None:
    """Prices the site refuses (422): they end in the quarantine, through the real worker."""
    site.faults.reject.update(skus)
    stage(engine, [price_row(sku, 1, "199.90") for sku in skus])
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), engine))


def clock_now() -> FakeClock:
    return FakeClock(datetime.now(UTC))


def the_notifier(settings: Settings, engine: Engine, clock: FakeClock) -> Notifier:
    found = notifier(settings, engine, clock)
    assert found is not None
    return found


@pytest.fixture
def inbox() -> Iterator[Any]:
    with smtp_server() as served:
        yield served


def test_a_quarantine_that_gains_entries_is_told_once_per_period(
    db_url: str, engine: Engine, site: SiteSimulator, inbox: Any
) -> None:
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    assert not told.step().sent and [] == mail.messages  # nothing needs a person yet

    quarantine(db_url, engine, site, "SKU-1")
    first_at = clock.now()
    first = told.step()
    assert first.sent and 1 == len(mail.messages)
    assert mail.subject() == "Обмен с 1С: нужен человек: в карантине новые записи"
    text = mail.text()
    with transaction(engine, read_only=True) as connection:
        message_id = connection.execute(select(messages.c.message_id)).scalar_one()
    for expected in (
        "Карантин: записей 1.",
        f"- http-422: 1; самая старая {message_id}, ждёт",
        "Сайт отклонил сообщение (http-422)",  # the report's own advice, in Russian
        "Рабочее место: https://exchange.shop.example:8443/",
        "  Открыть: https://exchange.shop.example:8443/quarantine?reason=http-422",
        "exchange quarantine list --reason http-422",
        "exchange status",
        "не раньше чем через 1 ч",
    ):
        assert expected in text, (expected, text)
    assert told.step().sent is False  # the same entry is not news

    clock.advance(600)
    quarantine(db_url, engine, site, "SKU-2", "SKU-3")
    within = told.step()
    assert not within.sent and 1 == len(mail.messages)
    assert within.next_at == first_at + timedelta(seconds=EVERY)

    clock.advance(EVERY)
    again = told.step()
    assert again.sent and 2 == len(mail.messages)
    assert "Карантин: записей 3." in mail.text()
    clock.advance(EVERY)
    assert not told.step().sent and 2 == len(mail.messages)


def test_several_processes_sharing_the_database_send_one_message_per_period(
    db_url: str, engine: Engine, site: SiteSimulator, inbox: Any
) -> None:
    mail, port = inbox
    settings = mail_settings(db_url, port)
    clock = clock_now()
    engines = [make_engine(db_url) for _ in range(6)]
    processes = [the_notifier(settings, e, clock) for e in engines]

    def together() -> list[bool]:
        start = threading.Barrier(len(processes))
        results: list[bool] = []

        def one(process: Notifier) -> None:
            start.wait()
            results.append(process.step().sent)

        threads = [threading.Thread(target=one, args=(p,)) for p in processes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return results

    try:
        quarantine(db_url, engine, site, "SKU-1")
        assert 1 == sum(together()) == len(mail.messages)
        quarantine(db_url, engine, site, "SKU-2")
        assert 0 == sum(together()) and 1 == len(mail.messages)  # within the period
        clock.advance(EVERY)
        assert 1 == sum(together()) == len(mail.messages) - 1
    finally:
        for e in engines:
            e.dispose()


def _worker_row(engine: Engine, **values: Any) -> None:
    now = datetime.now(UTC)
    row = {
        "worker_id": "shop-1",
        "started_at": now,
        "heartbeat_at": now,
        "paused_reason": None,
        "breaker_state": "closed",
        "breaker_until": None,
        "pace": None,
        **values,
    }
    with transaction(engine) as connection:
        connection.execute(insert(workers).values(row))


@pytest.mark.parametrize(
    ("stop", "words", "resumed"),
    [
        (Stop.OPERATOR, "доставку остановил оператор olga", "оператор возобновил доставку"),
        # Issue 34 item 4: the pause in the words of status and the page, what to mend.
        (Stop.TOKEN, "сайт не принял токен (HTTP 401). Запишите верный токен", "принимает токен"),
        (Stop.BREAKER, "сайт раз за разом отвечает ошибкой", "сайт снова отвечает"),
        (Stop.NO_WORKER, "ни один обработчик не отчитывался", "обработчик снова отчитывается"),
    ],
)
def test_delivery_that_stops_is_told_and_so_is_its_resumption(
    db_url: str, engine: Engine, inbox: Any, stop: Stop, words: str, resumed: str
) -> None:
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port, notify_stalled_after=600), engine, clock)
    assert not told.step().sent
    if stop is Stop.OPERATOR:
        with transaction(engine) as connection:
            control.pause(connection, operator="olga", note="переоценка", now=clock.now())
    elif stop is Stop.TOKEN:
        # The target's own record of the refusal (shop_api/answers.py): said once (issue 34).
        _worker_row(
            engine, paused_reason="HTTP 401: the site refused the token", pause_cause="token"
        )
    elif stop is Stop.BREAKER:
        until = datetime.now(UTC) + timedelta(minutes=5)
        _worker_row(engine, breaker_state="open", breaker_until=until)
    else:
        stage(engine, [price_row("SKU-1", 1)])
        assert not told.step().sent  # work just arrived: no worker yet is not a stop
        clock.advance(601)
    result = told.step()
    assert result.sent and result.decision.new_stops == {stop}
    assert "доставка остановлена" in mail.subject()
    assert "Доставка остановлена:" in mail.text() and words in mail.text(), mail.text()
    assert "refused" not in mail.text() and mail.text().count("не принял токен") <= 1
    clock.advance(EVERY * 5)
    if stop in (Stop.TOKEN, Stop.BREAKER):  # the worker still reports the cause
        with transaction(engine) as connection:
            connection.execute(update(workers).values(heartbeat_at=clock.now()))
    assert not told.step().sent and 1 == len(mail.messages)  # told once, not again

    with transaction(engine) as connection:  # the cause ends
        if stop is Stop.OPERATOR:
            control.resume(connection)
        elif stop is Stop.NO_WORKER:
            connection.execute(insert(workers).values(_fresh_worker(clock.now())))
        else:
            connection.execute(
                update(workers).values(
                    paused_reason=None, breaker_state="closed", heartbeat_at=clock.now()
                )
            )
    back = told.step()
    assert back.sent and back.decision.resumed == {stop}, back
    assert 2 == len(mail.messages)
    assert mail.subject() == "Обмен с 1С: доставка возобновилась"
    assert "Доставка снова идёт, ничего делать не нужно:" in mail.text()
    assert resumed in mail.text() and "не раньше чем" not in mail.text(), mail.text()
    clock.advance(60)
    assert not told.step().sent and 2 == len(mail.messages)  # told once


def test_a_breaker_gone_with_its_worker_is_no_resumption(
    db_url: str, engine: Engine, inbox: Any
) -> None:
    """The worker with the open breaker stopped reporting: nothing says delivery runs again."""
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    _worker_row(engine, breaker_state="open", breaker_until=clock.now() + timedelta(minutes=5))
    assert told.step().sent and 1 == len(mail.messages)
    clock.advance(EVERY / 2)  # its heartbeat is old now: not a live worker
    result = told.step()
    assert not result.sent and not result.decision.resumed and 1 == len(mail.messages)


def test_delivery_resumed_that_cannot_be_sent_is_not_tried_again(
    db_url: str, engine: Engine, inbox: Any
) -> None:
    """Good news is told once or not at all: a failing way is not asked again each poll."""
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    _worker_row(engine, paused_reason="HTTP 401")
    assert told.step().sent
    told.messengers[0].port = free_port()  # type: ignore[attr-defined]  # the mail server is gone
    with transaction(engine) as connection:
        connection.execute(update(workers).values(paused_reason=None))
    failed = told.step()
    assert failed.decision.resumed == {Stop.TOKEN} and not failed.sent and failed.failed
    again = told.step()
    assert not again.decision.send and again.failed is None
    with transaction(engine, read_only=True) as connection:
        row = connection.execute(select(notifications)).mappings().one()
    assert row["outcome"].startswith("not sent: ") and row["stops"] == ""
    assert 1 == len(mail.messages)


def _fresh_worker(now: datetime) -> dict[str, Any]:
    return {
        "worker_id": "shop-2",
        "started_at": now,
        "heartbeat_at": now,
        "breaker_state": "closed",
    }


def test_english_follows_the_report_language_and_times_the_display_zone(
    db_url: str, engine: Engine, inbox: Any
) -> None:
    mail, port = inbox
    clock = clock_now()
    settings = mail_settings(db_url, port, report_lang="en", display_tz="Europe/Moscow")
    told = the_notifier(settings, engine, clock)
    paused_at = datetime(2026, 12, 1, 6, 5, tzinfo=UTC)
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="re-pricing", now=paused_at)
    assert told.step().sent
    assert mail.subject() == "Exchange with 1C: a person is needed: delivery stopped"
    # Times in EXCHANGE_DISPLAY_TZ, the zone named, as the console and the workbench show them.
    assert "operator olga paused delivery (2026-12-01 09:05 MSK)" in mail.text()


def test_a_secret_quoted_in_the_data_is_masked_in_the_message(
    db_url: str, engine: Engine, inbox: Any
) -> None:
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    with transaction(engine) as connection:
        note = f"new token {TOKEN} goes in tonight"
        control.pause(connection, operator="olga", note=note, now=clock.now())
    assert told.step().sent
    assert "new token *** goes in tonight" in mail.text() and TOKEN not in mail.text()


def test_smtp_login_with_the_password_from_its_file(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Any
) -> None:
    secret = tmp_path / "smtp_password"
    secret.write_text(SMTP_PASSWORD + "\n", encoding="utf-8")
    with smtp_server(login=True) as (mail, port):
        settings = mail_settings(
            db_url, port, notify_smtp_user=SMTP_USER, notify_smtp_password_file=secret
        )
        assert SMTP_PASSWORD in settings.secrets()
        [line] = check_notifications(settings)
        assert line.passed and f"signed in as {SMTP_USER}" in line.detail
        quarantine(db_url, engine, site, "SKU-1")
        assert the_notifier(settings, engine, clock_now()).step().sent
        assert [SMTP_USER, SMTP_USER] == mail.logins and 1 == len(mail.messages)
        secret.write_text("wrong", encoding="utf-8")
        [refused] = check_notifications(settings)
        assert not refused.passed and "refused the login of exchange" in refused.detail


def test_an_unreachable_smtp_is_one_log_line_and_the_worker_keeps_delivering(
    db_url: str, engine: Engine, site: SiteSimulator, restore_logging: None
) -> None:
    """The mail server accepts the connection and never answers: the notification waits
    EXCHANGE_HTTP_TIMEOUT in its own thread while every cycle goes on delivering.

    An order, not a bound: the 20 deliveries end before the notification gives up. Deliveries
    held behind the hang could end only after it; the good path has the whole timeout (5 s,
    from the start) for 20 deliveries, which take 0.5-0.7 s alone at a load of 9 on 2 cores.
    (A bound of 2 s against a 2 s hang left no room on the wrong side; a 3 s bound against a
    4 s hang failed once in a full ``make test-fast`` at load 13, the deliveries not done when
    the notification gave up: not reproduced alone.)"""
    stream = io.StringIO()
    with silent_server() as port:
        settings = mail_settings(db_url, port, site, http_timeout=5.0)
        logs.configure(settings, stream=stream)
        quarantine(db_url, engine, site, "SKU-BAD")
        worker = bootstrap.worker(settings, engine)
        told = bootstrap.notifier(settings, engine, worker.clock)
        delivered_at: list[float] = []
        gave_up_at: list[float] = []

        async def scenario(_: Any) -> None:
            running = asyncio.create_task(run_forever(worker, poll_interval=0.02, notifier=told))
            started = time.monotonic()
            # the notification is on its way and hangs by now (if load delays it past the
            # deliveries, the test proves less, and never fails for that)
            await asyncio.sleep(0.3)
            stage(engine, [price_row(f"SKU-{n}", 1) for n in range(20)])
            while time.monotonic() - started < 30:  # a hang guard: the timeout is 5 s
                with transaction(engine, read_only=True) as connection:
                    done = connection.execute(
                        select(messages.c.id).where(messages.c.state == "delivered")
                    ).all()
                if len(done) == 20 and not delivered_at:
                    delivered_at.append(time.monotonic() - started)
                if "notification not sent" in stream.getvalue() and not gave_up_at:
                    gave_up_at.append(time.monotonic() - started)
                if delivered_at and gave_up_at:
                    break
                await asyncio.sleep(0.05)
            # fifteen more ticks (0.02 s): no second attempt within the period; load means
            # fewer ticks, a weaker check, never a false failure
            await asyncio.sleep(0.3)
            os.kill(os.getpid(), signal.SIGTERM)  # the service's own stop
            assert 0 == await running

        run_worker(worker, scenario)
    lines = [line for line in stream.getvalue().splitlines() if "notification" in line]
    assert delivered_at and gave_up_at, (delivered_at, gave_up_at, lines)
    assert delivered_at[0] < gave_up_at[0], (delivered_at, gave_up_at, lines)
    assert 1 == len(lines), lines
    assert f"SMTP 127.0.0.1:{port}" in lines[0] and "no answer within 5 s" in lines[0]
    assert "Traceback" not in stream.getvalue()
    with transaction(engine, read_only=True) as connection:
        row = connection.execute(select(notifications)).mappings().one()
    assert row["quarantine_mark"] is None  # not told: still news for the next period
    assert "no answer" in row["outcome"]


def test_a_refused_connection_is_one_line_and_stays_news(
    db_url: str, engine: Engine, site: SiteSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    settings = mail_settings(db_url, free_port())
    quarantine(db_url, engine, site, "SKU-1")
    clock = clock_now()
    told = the_notifier(settings, engine, clock)
    caplog.set_level(logging.INFO, logger="exchange")
    first = told.step()
    assert not first.sent and first.failed and "connection refused" in first.failed[0]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert 1 == len(errors) and errors[0].exc_info is None
    assert not told.step().failed  # within the period: not tried again
    with smtp_server() as (mail, port):
        told.messengers[0].port = port  # type: ignore[attr-defined]
        clock.advance(EVERY)
        assert told.step().sent and 1 == len(mail.messages)  # still news after the period


def test_within_the_period_a_step_is_one_read_by_primary_key(
    db_url: str, engine: Engine, inbox: Any
) -> None:
    """The worker asks every cycle: after a message, until the period ends, that costs one
    SELECT of the notifications row and nothing else."""
    _, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    stage(engine, [price_row("SKU-1", 1)])
    _worker_row(engine, paused_reason="HTTP 401")
    assert told.step().sent
    with transaction(engine) as connection:
        connection.execute(workers.delete())  # the cause has gone: forgotten at the next step
    assert not told.step().sent
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        clock.advance(EVERY / 2)
        assert not told.step().sent
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    selects = [s for s in statements if s.upper().startswith("SELECT")]
    assert 1 == len(selects) and "FROM notifications" in selects[0], statements


def test_nothing_configured_sends_nothing_and_never_touches_the_table(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    settings = fast_settings(db_url, site.url)
    assert bootstrap.notifier(settings, engine) is None
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        quarantine(db_url, engine, site, "SKU-1")
        run_worker(bootstrap.worker(settings, engine), lambda w: run_briefly(w, None))
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert statements and not [s for s in statements if "notifications" in s]
    with transaction(engine, read_only=True) as connection:
        assert connection.execute(select(notifications)).all() == []


async def run_briefly(
    worker: Any, told: Notifier | None, until: Callable[[], bool] | None = None
) -> None:
    """``run_forever`` for 0.3 s (fifteen poll intervals), and then until ``until()`` holds
    (10 s at most, a hang guard): a check that something happens waits for it, however
    loaded the machine; one that nothing happens has fifteen ticks (fewer under load: a
    weaker check, never a false failure)."""
    running = asyncio.create_task(run_forever(worker, poll_interval=0.02, notifier=told))
    await asyncio.sleep(0.3)
    deadline = time.monotonic() + 10
    while until is not None and not until() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)  # the service's own stop
    assert 0 == await running


def test_the_worker_loop_tells_by_itself(
    db_url: str, engine: Engine, site: SiteSimulator, inbox: Any
) -> None:
    mail, port = inbox
    settings = mail_settings(db_url, port, site)
    quarantine(db_url, engine, site, "SKU-1")
    worker = bootstrap.worker(settings, engine)
    run_worker(
        worker,
        lambda w: run_briefly(
            w, bootstrap.notifier(settings, engine, w.clock), until=lambda: bool(mail.messages)
        ),
    )
    assert 1 == len(mail.messages) and "http-422" in mail.text()


# -- Telegram ------------------------------------------------------------------------------


def bot_settings(db_url: str, api: BotApi, **more: Any) -> Settings:
    return fast_settings(
        db_url,
        notify_telegram_token=BOT_TOKEN,
        notify_telegram_chat_id="-1001234567890",
        notify_telegram_api_url=api.url,
        notify_every=EVERY,
        **more,
    )


def test_telegram_gets_the_message_and_check_asks_getme(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    with bot_api() as api:
        settings = bot_settings(db_url, api)
        [line] = check_notifications(settings)
        assert line.passed and "@shop_bot" in line.detail and api.sent == []
        quarantine(db_url, engine, site, "SKU-1")
        assert the_notifier(settings, engine, clock_now()).step().sent
    [sent] = api.sent
    assert sent["chat_id"] == "-1001234567890"
    assert sent["text"].startswith("Обмен с 1С: нужен человек") and "http-422" in sent["text"]


def test_telegram_flood_control_is_waited_once_as_told(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    with bot_api(BotApi(answers=["flood"])) as api:
        told = the_notifier(bot_settings(db_url, api), engine, clock_now())
        waits: list[float] = []
        told.messengers[0].sleep = waits.append  # type: ignore[attr-defined]
        quarantine(db_url, engine, site, "SKU-1")
        assert told.step().sent
    assert [1.0] == waits and 1 == len(api.sent) and ["sendMessage"] * 2 == api.calls


def test_the_bot_token_never_reaches_a_log_line_or_an_error(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    caplog: pytest.LogCaptureFixture,
    restore_logging: None,
    tmp_path: Any,
) -> None:
    """The token sits in the URL's path: no logger (at DEBUG, any library) and no error shows
    it, whether the Bot API refuses the chat, the token, or cannot be reached."""
    token_file = tmp_path / "bot_token"
    token_file.write_text(BOT_TOKEN + "\r\n", encoding="utf-8")
    stream = io.StringIO()
    caplog.set_level(logging.DEBUG)
    with bot_api(BotApi(answers=["chat-not-found"])) as api:
        settings = fast_settings(
            db_url,
            notify_telegram_token_file=token_file,
            notify_telegram_chat_id="-100",
            notify_telegram_api_url=api.url,
            log_level="DEBUG",
        )
        assert BOT_TOKEN in settings.secrets()
        logs.configure(settings, stream=stream)
        quarantine(db_url, engine, site, "SKU-1")
        clock = clock_now()
        told = the_notifier(settings, engine, clock)
        refused = told.step()
        assert not refused.sent and refused.failed
        assert "HTTP 400 Bad Request: chat not found" in refused.failed[0]
        api.token = "another"  # the token is refused now
        [check] = check_notifications(settings)
        assert not check.passed and "HTTP 401" in check.detail and "token is wrong" in check.detail
        outputs = [*refused.failed, check.detail]
    unreachable = fast_settings(
        db_url,
        notify_telegram_token_file=token_file,
        notify_telegram_chat_id="-100",
        notify_telegram_api_url=f"http://127.0.0.1:{free_port()}",
    )
    [gone] = check_notifications(unreachable)
    assert not gone.passed and "unreachable" in gone.detail
    outputs.append(gone.detail)
    with transaction(engine, read_only=True) as connection:
        outputs.append(
            json.dumps(
                [dict(r) for r in connection.execute(select(notifications)).mappings()], default=str
            )
        )
    texts = [*outputs, stream.getvalue(), *(r.getMessage() for r in caplog.records)]
    assert any("chat not found" in t for t in texts)
    for text in texts:
        assert BOT_TOKEN not in text and "bot-s3cret" not in text, text


@pytest.mark.parametrize("security", ["starttls", "tls"])
def test_smtp_over_tls_verifies_the_servers_certificate(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Any, security: str
) -> None:
    pki = make_pki(tmp_path)
    context = server_context(pki.site_cert, pki.site_key)
    quarantine(db_url, engine, site, "SKU-1")
    with smtp_server(login=True, tls=context, implicit_tls=security == "tls") as (mail, port):
        trusted = mail_settings(
            db_url,
            port,
            notify_smtp_security=security,
            notify_smtp_ca_bundle=pki.ca,
            notify_smtp_user=SMTP_USER,
            notify_smtp_password=SMTP_PASSWORD,
        )
        [line] = check_notifications(trusted)
        assert line.passed and f"({security}), signed in as {SMTP_USER}" in line.detail
        assert the_notifier(trusted, engine, clock_now()).step().sent
        assert 1 == len(mail.messages) and [SMTP_USER, SMTP_USER] == mail.logins
        # The default CAs do not know the test CA: refused, never sent in clear instead.
        [untrusted] = check_notifications(
            mail_settings(
                db_url,
                port,
                notify_smtp_security=security,
                notify_smtp_user=SMTP_USER,
                notify_smtp_password=SMTP_PASSWORD,
            )
        )
    assert not untrusted.passed and "CERTIFICATE_VERIFY_FAILED" in untrusted.detail
    assert SMTP_PASSWORD not in untrusted.detail and 2 == len(mail.logins)


def test_starttls_is_required_when_chosen(db_url: str, inbox: Any) -> None:
    _, port = inbox  # a server that offers no STARTTLS
    [line] = check_notifications(mail_settings(db_url, port, notify_smtp_security="starttls"))
    assert not line.passed and "does not offer STARTTLS" in line.detail


def test_no_worker_counts_the_rows_waiting_in_a_separate_staging_database(
    engine: Engine, db_url: str, inbox: Any, tmp_path: Any
) -> None:
    mail, port = inbox
    staging_url = sqlite_copy(tmp_path / "staging.db")
    staging = make_engine(staging_url)
    try:
        stage(staging, [price_row(f"SKU-{n}", 1) for n in range(3)])
        settings = mail_settings(db_url, port, staging_url=staging_url, notify_stalled_after=60)
        clock = clock_now()
        told = notifier(settings, engine, clock, staging_engine=staging)
        assert told is not None
        clock.advance(61)
        assert told.step().sent
    finally:
        staging.dispose()
    assert "ни один обработчик не отчитывался ни разу, а работа ждёт: строк 1С 3" in mail.text()


def test_a_message_that_could_not_be_composed_stays_news(
    db_url: str, engine: Engine, site: SiteSimulator, inbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mail, port = inbox
    clock = clock_now()
    told = the_notifier(mail_settings(db_url, port), engine, clock)
    quarantine(db_url, engine, site, "SKU-1")

    def broken(*args: Any) -> None:
        raise RuntimeError("the details query failed")

    monkeypatch.setattr("exchange.ops.notify.add_details", broken)
    with pytest.raises(RuntimeError):
        told.step()
    monkeypatch.undo()
    assert not told.step().sent  # the attempt still counts: once a period
    clock.advance(EVERY)
    assert told.step().sent and 1 == len(mail.messages)  # and the entry is still news
