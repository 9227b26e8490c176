"""The operators' notifications through the commands, as real processes: ``exchange notify
--once`` (a scheduled task), ``exchange run --until-idle`` with a mail server that is down,
``exchange serve`` telling that no worker runs, ``exchange check`` asking the channel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from notifytools import BOT_TOKEN, BotApi, bot_api, free_port, smtp_server
from opstools import TOKEN
from sqlalchemy import select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import messages
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage

pytestmark = pytest.mark.slow


def exchange(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exchange", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def environment(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": db_url,
            "EXCHANGE_POLL_INTERVAL": "0.05",
            "EXCHANGE_RETRY_BASE_DELAY": "0.001",
            "EXCHANGE_RETRY_MAX_DELAY": "0.01",
            "EXCHANGE_HTTP_TIMEOUT": "2",
            **extra,
        }
    )
    return env


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


def site_env(site: SiteSimulator) -> dict[str, str]:
    return {"EXCHANGE_SITE_URL": site.url, "EXCHANGE_SITE_TOKEN": TOKEN}


def test_notify_once_sends_then_waits_for_the_period_and_is_refused_when_off(
    tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    site.faults.reject = {"SKU-BAD"}
    stage(engine, [price_row("SKU-BAD", 1)])
    ran = exchange("run", "--until-idle", env=environment(db_url, **site_env(site)), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    never = exchange("status", "--json", env=environment(db_url), cwd=tmp_path)
    assert json.loads(never.stdout)["notifications"] is None  # never told
    with smtp_server() as (inbox, port):
        env = environment(db_url, **mail(port))
        first = exchange("notify", "--once", env=env, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines()[0] == f"database: {db_url}"
        assert "sent: Обмен с сайтом: нужен человек: в карантине новые записи" in first.stdout
        second = exchange("notify", "--once", env=env, cwd=tmp_path)
        assert second.returncode == 0 and "next message goes no sooner than" in second.stdout
        assert 1 == len(inbox.messages) and "http-422" in inbox.text()
    # the engineer on call sees whether the operators were told, and how it went
    told = json.loads(exchange("status", "--json", env=environment(db_url), cwd=tmp_path).stdout)
    assert told["notifications"]["outcome"] == "sent", told["notifications"]
    assert told["notifications"]["sent_by"] and told["notifications"]["attempted_at"]
    table = exchange("status", env=environment(db_url), cwd=tmp_path).stdout
    assert "operators last notified" in table and ": sent" in table, table
    off = exchange("notify", "--once", env=environment(db_url), cwd=tmp_path)
    assert off.returncode == 2 and off.stderr.startswith("error: notifications are off")
    assert 1 == len(off.stderr.splitlines())
    bare = exchange("notify", env=environment(db_url, **mail(1)), cwd=tmp_path)
    assert bare.returncode == 2 and "--once" in bare.stderr
    engine.dispose()


def test_run_until_idle_delivers_with_the_mail_server_down_and_says_so_in_one_line(
    tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    site.faults.reject = {"SKU-BAD"}
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(10)] + [price_row("SKU-BAD", 1)])
    env = environment(db_url, **site_env(site), **mail(free_port()))
    ran = exchange("run", "--until-idle", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    with transaction(engine, read_only=True) as connection:
        states = [s for (s,) in connection.execute(select(messages.c.state))]
    assert 10 == states.count("delivered") and 1 == states.count("quarantined")
    lines = [line for line in ran.stderr.splitlines() if "notification" in line]
    assert 1 == len(lines) and "connection refused" in lines[0], ran.stderr
    assert "Traceback" not in ran.stderr
    engine.dispose()


def test_serve_tells_that_work_waits_and_no_worker_runs(tmp_path: Path) -> None:
    db_url = migrated(tmp_path)
    engine = make_engine(db_url)
    stage(engine, [price_row("SKU-1", 1)])
    time.sleep(1.1)  # the row has waited longer than EXCHANGE_NOTIFY_STALLED_AFTER below
    with smtp_server() as (inbox, port):
        env = environment(
            db_url,
            EXCHANGE_HTTP_PORT="0",
            EXCHANGE_NOTIFY_STALLED_AFTER="1",
            EXCHANGE_INTAKE_TOKEN="intake-token",
            **mail(port),
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "exchange", "serve"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while not inbox.messages and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=30)
        assert 1 == len(inbox.messages), stderr
        text = inbox.text()
    assert "ни один обработчик не отчитывался ни разу, а работа ждёт: строк 1С 1" in text, text
    assert server.returncode == 0, stderr
    engine.dispose()


def test_check_asks_the_bot_and_never_shows_its_token(tmp_path: Path) -> None:
    db_url = migrated(tmp_path)
    with bot_api(BotApi()) as api:
        env = environment(
            db_url,
            EXCHANGE_SITE_URL="http://127.0.0.1:9",
            EXCHANGE_NOTIFY_TELEGRAM_TOKEN=BOT_TOKEN,
            EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID="-100",
            EXCHANGE_NOTIFY_TELEGRAM_API_URL=api.url,
        )
        good = exchange("check", env=env, cwd=tmp_path)
        api.token = "another"
        bad = exchange("check", env=env, cwd=tmp_path)
    [line] = [x for x in good.stdout.splitlines() if "notifications" in x]
    assert line.startswith("OK   notifications by Telegram: bot @shop_bot"), good.stdout
    [line] = [x for x in bad.stdout.splitlines() if "notifications" in x]
    assert line.startswith("FAIL notifications by Telegram") and "HTTP 401" in line
    assert bad.returncode == 1 and api.sent == []
    for output in (good.stdout, good.stderr, bad.stdout, bad.stderr):
        assert BOT_TOKEN not in output and "bot-s3cret" not in output
