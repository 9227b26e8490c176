"""A 1C import whose serve process died is not shown as in progress for ever: every serve
process renews the heartbeat of the imports it runs, and closes as ``interrupted`` the
unfinished entries whose heartbeat stopped (``cml_exchanges.heartbeat_at``, migration 0011);
1C's next exchange sends the file again and it is staged once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert, select, update
from web_helpers import PASSWORD, USER, web_settings

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.intake.commerceml.publish import Outcome, close_interrupted, exchanges_alive
from exchange.web.onec import SILENT_AFTER_S, Job, OneCExchange

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RETAIL = CmlType("t-retail", "Розничная", "руб")


def entry(engine: Engine, *, started: datetime, beat: datetime | None, done: bool = False) -> int:
    values: dict[str, Any] = {
        "exchange": "s",
        "filename": "offers.xml",
        "started_at": started,
        "heartbeat_at": beat,
    }
    if done:
        values.update(finished_at=started, outcome="staged", detail="2 intents staged")
    with transaction(engine) as connection:
        return int(
            connection.execute(
                insert(cml_exchanges).values(**values).returning(cml_exchanges.c.id)
            ).scalar_one()
        )


def outcomes(engine: Engine) -> dict[int, str | None]:
    with transaction(engine, read_only=True) as connection:
        return dict(connection.execute(select(cml_exchanges.c.id, cml_exchanges.c.outcome)).all())


def test_only_unfinished_entries_whose_heartbeat_stopped_are_closed_as_interrupted(
    engine: Engine,
) -> None:
    silent = entry(engine, started=NOW - timedelta(minutes=10), beat=NOW - timedelta(minutes=3))
    alive = entry(engine, started=NOW - timedelta(minutes=10), beat=NOW - timedelta(seconds=30))
    finished = entry(engine, started=NOW - timedelta(hours=1), beat=None, done=True)
    # an entry from before the heartbeat existed: judged by its start
    old = entry(engine, started=NOW - timedelta(minutes=5), beat=None)

    assert 2 == close_interrupted(engine, NOW, silent_for=120)

    assert outcomes(engine) == {
        silent: "interrupted",
        alive: None,
        finished: "staged",
        old: "interrupted",
    }
    with transaction(engine, read_only=True) as connection:
        row = connection.execute(select(cml_exchanges).where(cml_exchanges.c.id == silent)).one()
    assert row.finished_at == NOW
    assert "1C sends the file again" in row.detail
    assert 0 == close_interrupted(engine, NOW, silent_for=120)  # nothing twice


def test_a_heartbeat_keeps_a_long_import_from_being_closed(engine: Engine) -> None:
    running = entry(engine, started=NOW - timedelta(minutes=10), beat=NOW - timedelta(minutes=3))
    finished = entry(engine, started=NOW - timedelta(hours=1), beat=None, done=True)

    exchanges_alive(engine, [running, finished], NOW)

    assert 0 == close_interrupted(engine, NOW + timedelta(seconds=60), silent_for=120)
    assert outcomes(engine) == {running: None, finished: "staged"}
    with transaction(engine, read_only=True) as connection:
        beats = dict(
            connection.execute(select(cml_exchanges.c.id, cml_exchanges.c.heartbeat_at)).all()
        )
    assert beats == {running: NOW, finished: None}  # a finished entry is left as it was


# -- a real serve process, killed ------------------------------------------------------------


def environment(db_url: str, folder: Path, **more: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": db_url,
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_1C_USER": USER,
        "EXCHANGE_1C_PASSWORD": PASSWORD,
        "EXCHANGE_1C_DIR": str(folder),
        "EXCHANGE_1C_PRICE_TYPES": '{"Розничная": "retail"}',
        "EXCHANGE_LOG_LEVEL": "INFO",
        **more,
    }


@contextmanager
def serve(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with log.open("w+") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "exchange", "serve"], env=env, stderr=err, cwd=log.parent
        )
        try:
            deadline = time.monotonic() + 30
            port = None
            while port is None:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                for line in log.read_text().splitlines():
                    if "serving on" in line:
                        port = int(line.rsplit(":", 1)[1].split()[0])
                time.sleep(0.05)
            yield process, f"http://127.0.0.1:{port}"
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def package() -> bytes:
    offers = [CmlOffer(sku, [CmlPrice("t-retail", "10.00", "руб")]) for sku in ("A", "B")]
    return offers_xml(Package(types=[RETAIL], offers=offers))


def test_an_import_whose_serve_was_killed_is_closed_by_the_next_serve_and_staged_on_resend(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    data = package()
    folder = tmp_path / "1c"
    doomed = environment(db_url, folder, EXCHANGE_FAILPOINTS="import-started=kill")
    with serve(doomed, tmp_path / "doomed.log") as (process, base):
        onec = OneCClient(base, USER, PASSWORD, use_zip=False)
        assert "success" == onec.checkauth().status
        onec.init()
        assert "success" == onec.upload("offers.xml", data).status
        with pytest.raises(httpx.TransportError):  # the process dies inside the import
            onec.import_file("offers.xml")
        onec.close()
        assert -signal.SIGKILL == process.wait(10)
    [dead] = list(outcomes(engine).items())
    assert dead[1] is None  # unfinished: the failpoint killed it just after the entry
    with transaction(engine) as connection:  # two minutes pass without a heartbeat
        connection.execute(
            update(cml_exchanges).values(
                heartbeat_at=datetime.now(UTC) - timedelta(minutes=2, seconds=1)
            )
        )

    with serve(environment(db_url, folder), tmp_path / "next.log") as (_, base):
        deadline = time.monotonic() + 15
        while outcomes(engine)[dead[0]] is None:
            assert time.monotonic() < deadline, "the dead import was not closed"
            time.sleep(0.1)
        onec = OneCClient(base, USER, PASSWORD, use_zip=False)
        log = onec.exchange([("offers.xml", data)])  # 1C's next exchange sends it again
        onec.close()

    assert "interrupted" == outcomes(engine)[dead[0]]
    assert "1 1C import(s) left unfinished" in (tmp_path / "next.log").read_text()
    assert ["staged"] == [o for i, o in outcomes(engine).items() if i != dead[0]]
    assert "success" == log.answers["offers.xml"].status, log
    with transaction(engine, read_only=True) as connection:
        assert 2 == len(connection.execute(select(staging.c.id)).all())


def test_serve_beats_for_the_imports_it_runs_and_closes_only_the_silent_ones(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """``OneCExchange.beat``, what serve's watch runs every 30 s: its own import in flight is
    renewed (not closed, however long it runs), another process's silent entry is closed."""
    settings = web_settings(db_url, tmp_path / "1c", readers=1)
    onec = OneCExchange(bootstrap.web_config(settings), engine, "k" * 32)
    mine = entry(engine, started=NOW - timedelta(minutes=30), beat=NOW - timedelta(minutes=5))
    dead = entry(engine, started=NOW - timedelta(minutes=30), beat=NOW - timedelta(minutes=5))

    async def scenario() -> None:
        in_flight: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        job = Job(task=asyncio.ensure_future(in_flight), entry=mine)
        onec.state.jobs[("session", "offers.xml")] = job
        await asyncio.to_thread(onec.beat, NOW, SILENT_AFTER_S)
        job.task.cancel()

    asyncio.run(scenario())

    assert outcomes(engine) == {mine: None, dead: "interrupted"}
