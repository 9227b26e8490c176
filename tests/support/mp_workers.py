"""``exchange run --until-idle`` worker processes of one marketplace channel ``mp``, started at
once on one database, and the states of that channel's deliveries. What
tests/integration/test_marketplace_workers_start_together.py,
tests/integration/test_ym_workers_share_parallel.py and
tests/integration/test_ym_workers_share_spent_budget.py share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries


def run_workers(
    db_url: str,
    channel: dict[str, Any],
    directory: Path,
    *,
    workers: int,
    batch_size: int,
    max_seconds: int,
    timeout: float,
) -> list[str]:
    """``workers`` processes ``w0``, ``w1``, … of channel ``mp`` (``channel``: its settings) on
    ``db_url``, each ``exchange run --until-idle --max-seconds max_seconds`` in ``directory``,
    nothing inherited from ``EXCHANGE_*``; their output once all ended, each waited for at most
    ``timeout`` seconds (exit 0 asserted)."""
    procs = []
    for name in (f"w{n}" for n in range(workers)):
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
        env.update(
            {
                "EXCHANGE_DATABASE_URL": db_url,
                "EXCHANGE_CHANNELS": json.dumps({"mp": channel}),
                "EXCHANGE_WORKER_ID": name,
                "EXCHANGE_POLL_INTERVAL": "0.05",
                "EXCHANGE_BATCH_SIZE": str(batch_size),
                "EXCHANGE_LOG_LEVEL": "WARNING",
            }
        )
        command = ["run", "--until-idle", "--max-seconds", str(max_seconds)]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "exchange", *command],
                env=env,
                cwd=directory,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    assert [0] * workers == [p.returncode for p in procs], outputs
    return outputs


def mp_states(engine: Engine) -> set[str]:
    """The states of channel ``mp``'s deliveries."""
    with transaction(engine, read_only=True) as connection:
        return set(
            connection.execute(
                select(deliveries.c.state)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .where(channels.c.name == "mp")
            ).scalars()
        )
