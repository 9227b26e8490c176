"""A worker SIGKILLed between the staging commit and the broker's acknowledgement (failpoint
``source-staged``), for real: the broker delivers the batch again to the next worker, and the
redelivery stages nothing twice; every intent reaches the site once. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import redis
from brokerkit import publish, queue_counts
from procs import start
from sqlalchemy import func, select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import staging
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import price_row

COUNT = 30


def intents() -> list[bytes]:
    bodies = []
    for n in range(COUNT):
        row = price_row(f"SKU-{n}", 1)
        row["payload"] = json.loads(row["payload"])
        bodies.append(json.dumps(row).encode())
    return bodies


def staged(db_url: str) -> int:
    engine = make_engine(db_url)
    try:
        with transaction(engine, read_only=True) as connection:
            return int(connection.execute(select(func.count()).select_from(staging)).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_kill_between_the_commit_and_the_ack_stages_nothing_twice(
    broker: str, db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if broker == "rabbitmq":
        url, queue = request.getfixturevalue("rabbitmq_url"), request.getfixturevalue("queue")
        publish(url, queue, intents())
        env = {"EXCHANGE_RABBITMQ_URL": url, "EXCHANGE_RABBITMQ_QUEUE": queue}
    else:
        url, stream = request.getfixturevalue("redis_url"), request.getfixturevalue("stream")
        with redis.Redis.from_url(url) as r:
            for content in intents():
                r.xadd(stream, {"intent": content})
        # The killed worker's entries are claimed by the next one after this long.
        env = {
            "EXCHANGE_REDIS_URL": url,
            "EXCHANGE_REDIS_STREAM": stream,
            # the rescuer claims what the victim read once it is idle 0.5 s: a lower bound
            # that load only helps (the rescuer starts after the victim's death)
            "EXCHANGE_REDIS_MIN_IDLE": "0.5",
        }
    with SiteSimulator(token="test-token", faults=Faults()) as site:
        victim = start(
            db_url,
            site,
            "victim",
            tmp_path,
            "--until-idle",
            EXCHANGE_SOURCE=broker,
            EXCHANGE_FAILPOINTS="source-staged=kill",
            **env,
        )
        # the process waits are hang guards: each run takes seconds on an idle machine
        assert -signal.SIGKILL == victim.wait(timeout=60), "killed at the failpoint"
        # The first batch (all of RabbitMQ's prefetch; all of these small entries in Redis's
        # first read, which stops only at 4 x EXCHANGE_SOURCE_MAX_BYTES) was committed.
        assert COUNT == staged(db_url), "committed, then killed"

        rescuer = start(
            db_url,
            site,
            "rescuer",
            tmp_path,
            "--until-idle",
            "--max-seconds",
            "60",
            EXCHANGE_SOURCE=broker,
            **env,
        )
        assert 0 == rescuer.wait(timeout=90), (tmp_path / "rescuer.log").read_text()

        assert COUNT == staged(db_url), "the redelivery staged nothing twice"
        for n in range(COUNT):
            assert [1] == site.applied_versions("price", f"SKU-{n}")
    if broker == "rabbitmq":
        assert 0 == queue_counts(url, queue)
    else:
        with redis.Redis.from_url(url) as r:
            assert 0 == r.xpending(stream, "exchange")["pending"]
