"""The operators' notifications through the commands: ``exchange notify --once`` (a scheduled
task), ``exchange run --until-idle`` with a mail server that is down, ``exchange serve``
telling that no worker runs, ``exchange check`` asking the channel.

The commands run in the test's process (tests/support/clitools.py: ``Cli``, a controlled
environment, no traceback and no site token in what they print): each test is about what a
command does and prints, not about the binary.
"""

from __future__ import annotations

import json
from pathlib import Path

from clitools import Cli, describe, until_stopped
from notifytools import BOT_TOKEN, BotApi, bot_api, free_port, smtp_server
from sqlalchemy import select

from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import one_channel_messages, price_row, stage

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# What every command here runs with besides its database; a site only where a test names one.
QUICK = {
    "EXCHANGE_POLL_INTERVAL": "0.05",
    "EXCHANGE_RETRY_BASE_DELAY": "0.001",
    "EXCHANGE_RETRY_MAX_DELAY": "0.01",
    "EXCHANGE_HTTP_TIMEOUT": "2",
}


def mail(port: int) -> dict[str, str]:
    return {
        "EXCHANGE_NOTIFY_SMTP_HOST": "127.0.0.1",
        "EXCHANGE_NOTIFY_SMTP_PORT": str(port),
        "EXCHANGE_NOTIFY_SMTP_SECURITY": "none",
        "EXCHANGE_NOTIFY_SMTP_FROM": "exchange@shop.example",
        "EXCHANGE_NOTIFY_SMTP_TO": '["ops@shop.example"]',
    }


def migrated(tmp_path: Path) -> str:
    return sqlite_copy(tmp_path / "exchange.db")


def test_notify_once_sends_then_waits_for_the_period_and_is_refused_when_off(
    cli: Cli, tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    site.faults.reject = {"SKU-BAD"}
    stage(engine, [price_row("SKU-BAD", 1)])
    ran = cli("run", "--until-idle", db=db_url, site=site.url, env=QUICK)
    assert ran.returncode == 0, describe(ran)
    never = cli("status", "--json", db=db_url, env=QUICK)
    assert json.loads(never.stdout)["notifications"] is None  # never told
    with smtp_server() as (inbox, port):
        env = QUICK | mail(port)
        first = cli("notify", "--once", db=db_url, env=env)
        assert first.returncode == 0, describe(first)
        assert first.stdout.splitlines()[0] == f"database: {db_url}"
        assert "sent: Обмен с 1С: нужен человек: в карантине новые записи" in first.stdout
        second = cli("notify", "--once", db=db_url, env=env)
        assert second.returncode == 0 and "next message goes no sooner than" in second.stdout
        assert 1 == len(inbox.messages) and "http-422" in inbox.text()
    # the engineer on call sees whether the operators were told, and how it went
    told = json.loads(cli("status", "--json", db=db_url, env=QUICK).stdout)
    assert told["notifications"]["outcome"] == "sent", told["notifications"]
    assert told["notifications"]["sent_by"] and told["notifications"]["attempted_at"]
    table = cli("status", db=db_url, env=QUICK).stdout
    assert "operators last notified" in table and ": sent" in table, table
    off = cli("notify", "--once", db=db_url, env=QUICK)
    assert off.returncode == 2 and off.stderr.startswith("error: notifications are off")
    assert 1 == len(off.stderr.splitlines())
    bare = cli("notify", db=db_url, env=QUICK | mail(1))
    assert bare.returncode == 2 and "--once" in bare.stderr
    engine.dispose()


def test_run_until_idle_delivers_with_the_mail_server_down_and_says_so_in_one_line(
    cli: Cli, tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    site.faults.reject = {"SKU-BAD"}
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(10)] + [price_row("SKU-BAD", 1)])
    ran = cli("run", "--until-idle", db=db_url, site=site.url, env=QUICK | mail(free_port()))
    assert ran.returncode == 0, describe(ran)
    with transaction(engine, read_only=True) as connection:
        states = [s for (s,) in connection.execute(select(messages.c.state))]
    assert 10 == states.count("delivered") and 1 == states.count("quarantined")
    lines = [line for line in ran.stderr.splitlines() if "notification" in line]
    assert 1 == len(lines) and "connection refused" in lines[0], describe(ran)
    engine.dispose()


def test_serve_tells_that_work_waits_and_no_worker_runs(cli: Cli, tmp_path: Path) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    stage(engine, [price_row("SKU-1", 1)])
    with smtp_server() as (inbox, port):
        # The row has waited EXCHANGE_NOTIFY_STALLED_AFTER (1 s) about a second after serve
        # starts, and serve asks every EXCHANGE_POLL_INTERVAL (0.05 s): the message comes
        # within 1-2 s on an idle machine; 20 s (times the load) is the margin.
        served = until_stopped(
            cli,
            "serve",
            stop_when=lambda: bool(inbox.messages),
            seconds=20,
            what="a notification from serve",
            db=db_url,
            env=QUICK
            | mail(port)
            | {
                "EXCHANGE_HTTP_PORT": "0",
                "EXCHANGE_NOTIFY_STALLED_AFTER": "1",
                "EXCHANGE_INTAKE_TOKEN": "intake-token",
            },
        )
        assert 1 == len(inbox.messages), describe(served)
        text = inbox.text()
    assert "ни один обработчик не отчитывался ни разу, а работа ждёт: строк 1С 1" in text, text
    assert served.returncode == 0, describe(served)
    engine.dispose()


def test_check_asks_the_bot_and_never_shows_its_token(cli: Cli, tmp_path: Path) -> None:
    db_url = migrated(tmp_path)
    with bot_api(BotApi()) as api:
        env = QUICK | {
            "EXCHANGE_SITE_URL": "http://127.0.0.1:9",
            "EXCHANGE_NOTIFY_TELEGRAM_TOKEN": BOT_TOKEN,
            "EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID": "-100",
            "EXCHANGE_NOTIFY_TELEGRAM_API_URL": api.url,
        }
        good = cli("check", db=db_url, env=env)
        api.token = "another"
        bad = cli("check", db=db_url, env=env)
    [line] = [x for x in good.stdout.splitlines() if "notifications" in x]
    assert line.startswith("OK   notifications by Telegram: bot @shop_bot"), describe(good)
    [line] = [x for x in bad.stdout.splitlines() if "notifications" in x]
    assert line.startswith("FAIL notifications by Telegram") and "HTTP 401" in line
    assert bad.returncode == 1 and api.sent == []
    for output in (good.stdout, good.stderr, bad.stdout, bad.stderr):
        assert BOT_TOKEN not in output and "bot-s3cret" not in output
