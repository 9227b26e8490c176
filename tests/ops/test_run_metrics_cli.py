"""``exchange run --metrics-port N`` end to end: a real process, scraped, then SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from opstools import TOKEN, Samples, get, wait_for

from exchange.db.engine import make_engine
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage

pytestmark = pytest.mark.slow


def environment(db_url: str, site: SiteSimulator, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": db_url,
            "EXCHANGE_SITE_URL": site.url,
            "EXCHANGE_SITE_TOKEN": TOKEN,
            "EXCHANGE_POLL_INTERVAL": "0.05",
            "EXCHANGE_RETRY_BASE_DELAY": "0.001",
            "EXCHANGE_RETRY_MAX_DELAY": "0.01",
            **extra,
        }
    )
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def migrated_sqlite(tmp_path: Path) -> str:
    return sqlite_copy(tmp_path / "run.db")


def test_run_serves_metrics_and_healthz_logs_json_and_exits_0_on_sigterm(
    tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated_sqlite(tmp_path)
    engine = make_engine(db_url)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    engine.dispose()
    port = free_port()
    env = environment(db_url, site, EXCHANGE_LOG_FORMAT="json", EXCHANGE_METRICS_HOST="127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "err.txt").open("w+") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "exchange", "run", "--metrics-port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:

            def delivered_all() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"exchange run exited with {process.returncode}")
                try:
                    text = get(f"{url}/metrics").text
                except httpx.TransportError:  # not listening yet
                    return False
                return 3 == Samples(text)("exchange_deliveries_total")

            wait_for(delivered_all, seconds=30, what="three deliveries counted on /metrics")
            samples = Samples(get(f"{url}/metrics").text)
            health = get(f"{url}/healthz")
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        err.seek(0)
        stderr = err.read()

    assert 0 == code, stderr
    assert 3 == samples("exchange_messages", state="delivered")
    assert 0 == samples("exchange_breaker_state")
    assert (200, "ok", True) == (
        health.status_code,
        health.json()["status"],
        health.json()["database"],
    )
    lines: list[dict[str, Any]] = [json.loads(line) for line in stderr.splitlines()]
    # one line per batch for deliveries (issue 13, item 7): their counts add up
    assert 3 == sum(line["count"] for line in lines if line["event"] == "deliveries")
    assert any(line["event"].startswith("metrics on http://127.0.0.1:") for line in lines)
    assert "stopped" == lines[-1]["event"]
    assert TOKEN not in stderr
    with pytest.raises(httpx.ConnectError):  # the server stopped with the process
        get(f"{url}/healthz")


def test_run_refuses_a_metrics_port_already_in_use_with_one_line(
    tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated_sqlite(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "exchange", "run", "--once", "--metrics-port", str(port)],
            env=environment(db_url, site, EXCHANGE_METRICS_HOST="127.0.0.1"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert 2 == result.returncode, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: cannot serve metrics on 127.0.0.1:{port}: ")
