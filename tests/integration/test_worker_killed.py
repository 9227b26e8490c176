"""A real ``exchange run`` process as status shows it (issue 34 items 1 and 13; contract 15):
it reports at least every 10 s even when no cycle ends (a poll of 60 s here), its start
clears the stop of an earlier run under the same id, and killed with SIGKILL its row stays:
silent once it has been quiet for 30 s, then not live, never gone."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from procs import start, wait_for
from sqlalchemy import Engine, insert, select

from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.domain.policy import KindPolicies
from exchange.ops.status import status

pytestmark = [pytest.mark.slow, pytest.mark.timing]


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as simulator:
        yield simulator


def _row(engine: Engine) -> dict[str, object] | None:
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(select(workers)).mappings().first()
        return dict(found) if found else None


def test_a_killed_worker_is_shown_silent_then_not_live_and_never_vanishes(
    db_url: str, engine: Engine, tmp_path: Path, site: SiteSimulator
) -> None:
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    with transaction(engine) as connection:  # an earlier run under the same id stopped
        connection.execute(
            insert(workers).values(
                worker_id="vm-1", started_at=long_ago, heartbeat_at=long_ago, stopped_at=long_ago
            )
        )
    proc = start(db_url, site, "vm-1", tmp_path, EXCHANGE_POLL_INTERVAL="60")
    try:
        wait_for(lambda: (_row(engine) or {}).get("stopped_at") is None, 60, "the start")
        first = _row(engine)
        assert first is not None
        time.sleep(10.5)  # no cycle ends in this time: only the report can move the heartbeat
        later = _row(engine)
        assert later is not None and later["heartbeat_at"] > first["heartbeat_at"], later
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    last = _row(engine)
    assert last is not None
    seen = last["heartbeat_at"]
    assert isinstance(seen, datetime)
    kinds = KindPolicies.of({})
    with transaction(engine, read_only=True) as connection:
        states = [
            [(w["state"], w["live"]) for w in status(connection, seen + after, kinds).workers]
            for after in (timedelta(seconds=5), timedelta(seconds=31), timedelta(hours=3))
        ]
    assert states == [[("live", True)], [("silent", True)], [("not-live", False)]]
