"""The quarantine list with 10,000 entries (issue 24, item 6: "10,000 entries load in under a
second") and the search over them: the time of each page as a browser gets it over HTTP from
a running ``exchange serve`` (``bootstrap.http_server``), signed in, on a fresh SQLite file (and
PostgreSQL with ``--pg URL``, a database of its own that this script creates and drops).

    .venv/bin/python -m bench.quarantine_page [--entries 10000] [--pg postgresql://…/postgres]

Prints one line per page: the median and the slowest of five loads, in milliseconds."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import migrate_sqlite, pg_database
from exchange.dev.testing import fill_quarantine
from exchange.ops import operators
from exchange.settings import load_settings

PASSWORD = "bench password 1"
PAGES = (
    "/quarantine",
    "/quarantine?sort=attempts&dir=desc&page=50",
    "/quarantine?reason=http-422&per=500",
    "/quarantine?q=Q-0999",
    "/find?q=offers.xml",
    "/find?q=Q-01",
)


@contextmanager
def serving(url: str, folder: Path) -> Iterator[str]:
    settings = load_settings(database_url=url, http_port=0, **{"1c_dir": str(folder)})
    engine = make_engine(url)
    box: dict[str, Any] = {}
    ready = threading.Event()

    def main() -> None:
        async def go() -> None:
            box["stop"], box["loop"] = asyncio.Event(), asyncio.get_running_loop()

            def started(port: int) -> None:
                box["port"] = port
                ready.set()

            await bootstrap.http_server(settings, engine, started=started, stop=box["stop"])

        asyncio.run(go())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    if not ready.wait(30):
        raise SystemExit("serve did not start")
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)
        engine.dispose()


def measure(url: str, entries: int, folder: Path) -> None:
    engine = make_engine(url)
    started = time.perf_counter()
    fill_quarantine(engine, entries)
    with transaction(engine) as connection:
        operators.add(connection, "bench", "operator", PASSWORD, datetime.now(UTC))
    engine.dispose()
    print(
        f"{url.split(':')[0]}: {entries} entries written in {time.perf_counter() - started:.1f} s"
    )
    with serving(url, folder) as base, httpx.Client(base_url=base) as client:
        client.post("/login", data={"name": "bench", "password": PASSWORD})
        for page in PAGES:
            times = []
            for _ in range(5):
                t = time.perf_counter()
                answer = client.get(page)
                times.append((time.perf_counter() - t) * 1000)
                assert answer.status_code == 200, (page, answer.status_code)
            print(
                f"  {page:50} median {statistics.median(times):6.0f} ms, max {max(times):6.0f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--pg", help="a PostgreSQL server's URL: measured there too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        measure(migrate_sqlite(Path(folder) / "bench.db"), args.entries, Path(folder))
        if args.pg:
            with pg_database(args.pg) as url:
                measure(url, args.entries, Path(folder))


if __name__ == "__main__":
    main()
