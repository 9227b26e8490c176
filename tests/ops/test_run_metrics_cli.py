"""``exchange run --metrics-port N`` end to end: scraped while it runs, then SIGTERM.

The service runs in the test's process (tests/support/clitools.py: ``until_stopped`` sends the
SIGTERM its own handler takes); a real ``python -m exchange`` only for the refused port, whose
point is what a service manager sees of a service that cannot start: exit 2 and one line.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from clitools import Cli, describe, until_stopped
from opstools import TOKEN, Samples, get

from exchange.db.engine import make_engine
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def migrated_sqlite(tmp_path: Path) -> str:
    return sqlite_copy(tmp_path / "run.db")


def test_run_serves_metrics_and_healthz_logs_json_and_exits_0_on_sigterm(
    cli: Cli, tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = migrated_sqlite(tmp_path)
    engine = make_engine(db_url)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    engine.dispose()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    seen: dict[str, Any] = {}

    def delivered_all() -> bool:
        try:
            text = get(f"{url}/metrics").text
        except httpx.TransportError:  # not listening yet
            return False
        samples = Samples(text)
        # The counter counts as each batch is recorded; the state gauge is read from the
        # database when the cycle ends: wait for both, or a loaded machine reads between.
        if (3, 3) != (
            samples("exchange_deliveries_total"),
            samples("exchange_messages", state="delivered"),
        ):
            return False
        seen["samples"] = Samples(get(f"{url}/metrics").text)
        seen["health"] = get(f"{url}/healthz")
        return True

    # Three deliveries take a fraction of a second on an idle machine; 30 s (times the load)
    # is the margin.
    result = until_stopped(
        cli,
        "run",
        "--metrics-port",
        str(port),
        stop_when=delivered_all,
        seconds=30,
        what="three deliveries counted on /metrics",
        db=db_url,
        site=site.url,
        env={"EXCHANGE_LOG_FORMAT": "json", "EXCHANGE_METRICS_HOST": "127.0.0.1"},
    )

    assert 0 == result.returncode, describe(result)
    samples, health = seen["samples"], seen["health"]
    assert 3 == samples("exchange_messages", state="delivered")
    assert 0 == samples("exchange_breaker_state")
    assert (200, "ok", True) == (
        health.status_code,
        health.json()["status"],
        health.json()["database"],
    )
    lines: list[dict[str, Any]] = [json.loads(line) for line in result.stderr.splitlines()]
    # one line per batch for deliveries (issue 13, item 7): their counts add up
    assert 3 == sum(line["count"] for line in lines if line["event"] == "deliveries")
    assert any(line["event"].startswith("metrics on http://127.0.0.1:") for line in lines)
    assert "stopped" == lines[-1]["event"]
    assert TOKEN not in result.stderr
    with pytest.raises(httpx.ConnectError):  # the server stopped with the command
        get(f"{url}/healthz")


def test_run_refuses_a_metrics_port_already_in_use_with_one_line(
    tmp_path: Path, site: SiteSimulator
) -> None:
    """A real process: a service manager sees the exit code and stderr, nothing else."""
    db_url = migrated_sqlite(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = Cli(tmp_path, process=True)(
            "run",
            "--once",
            "--metrics-port",
            str(port),
            db=db_url,
            site=site.url,
            env={"EXCHANGE_METRICS_HOST": "127.0.0.1"},
        )
    assert 2 == result.returncode, describe(result)
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: cannot serve metrics on 127.0.0.1:{port}: ")
