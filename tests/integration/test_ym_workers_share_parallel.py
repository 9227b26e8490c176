"""Yandex Market's cap on requests at once is the business's (research §3.3: a 420 "Hit rate
limit of 'N' parallel requests"), whichever worker sends them. Review ym34: four workers,
``ym_parallel`` 2 (Yandex's cap 2): each kept at least one place of its own, four at once, 38
such 420s in a minute. Now every request takes one of the business's ``ym_parallel`` places in
the database (``DbSlots``: ``target_locks`` rows), so the workers together never exceed it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from marketsims import secret, ym_sim
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries
from exchange.dev.testing import price_row, stage
from exchange.dev.ymsim import ApiError, YmFaults, _YmHandler, channel_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timing,
    pytest.mark.subprocess,
    pytest.mark.timeout(240),
]

WORKERS = 4
PRICES = 3_000


def test_four_workers_never_send_more_requests_at_once_than_ym_parallel(
    db_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Yandex's cap 2, ``ym_parallel`` 2, each request held in flight a while (§3.3: the cap
    counts requests in flight), four workers: no 420 for parallel requests; every price lands
    (SQLite and PostgreSQL)."""
    refused: list[str] = []
    lock = threading.Lock()
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420 and "parallel" in str(error):
            with lock:
                refused.append(str(error))
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    with ym_sim() as sim:
        sim.switches.parallel = 2
        sim.faults = YmFaults(hold=0.2)
        channel = channel_settings(sim, secret(tmp_path, "ym-key", "ym-key-1234"))
        assert channel["ym_parallel"] == 2
        stage(engine, [price_row(f"SKU-{n:04d}", 1, f"{900 + n}.00") for n in range(PRICES)])
        procs = []
        for name in (f"w{n}" for n in range(WORKERS)):
            env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
            env.update(
                {
                    "EXCHANGE_DATABASE_URL": db_url,
                    "EXCHANGE_CHANNELS": json.dumps({"mp": channel}),
                    "EXCHANGE_WORKER_ID": name,
                    "EXCHANGE_POLL_INTERVAL": "0.05",
                    "EXCHANGE_BATCH_SIZE": "250",
                    "EXCHANGE_LOG_LEVEL": "WARNING",
                }
            )
            command = ["run", "--until-idle", "--max-seconds", "150"]
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "exchange", *command],
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outputs = [p.communicate(timeout=200)[0] for p in procs]
    assert [0] * WORKERS == [p.returncode for p in procs], outputs
    with transaction(engine, read_only=True) as connection:
        states = set(
            connection.execute(
                select(deliveries.c.state)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .where(channels.c.name == "mp")
            ).scalars()
        )
    assert {"delivered"} == states, outputs
    assert [] == refused, f"{len(refused)} 420(s) for parallel requests"
