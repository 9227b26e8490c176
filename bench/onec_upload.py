"""The 1C exchange under load (issue 14, item 8): a generated offers file of N offers with 3
price types (all mapped: 3·N intents), uploaded to a real ``exchange serve`` process by the 1C
client emulator in 1C's chunks (file_limit from init), imported until ``success``; against a
plain ``xml.etree.ElementTree.iterparse`` of the same file in the same run.

Reported: seconds (upload; import = parse + map + spool + one publishing transaction; whole
exchange) and peak resident memory (VmHWM) of the serve process and of its reading process
(``EXCHANGE_1C_READER_PROCESSES``), before the upload and at the end, next to the bare
iterparse's seconds and peak RSS, each in a process of its own. Run at two sizes, memory shows
whether it grows with the file. ``--repeat`` runs each case again (the bare parse too, just
before) and prints the median ratio: the machine is shared, single runs are noise. Also the
CPU seconds (user + system, serve and its reading process) the import used, against the bare
parse's: less sensitive to what else runs, but blind to overlap (two processes' CPU adds up).

    python -m bench.onec_upload --offers 100000 --offers 10000 --repeat 3 \
        --database sqlite --database postgresql [--reader-processes 0]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exchange.dev.cml_gen import BENCH_TYPES, write_big_offers
from exchange.dev.onec_client import OneCClient

USER, PASSWORD = "bench", "bench-password"
BARE = r"""
import resource, sys, time, xml.etree.ElementTree as ET
t = time.perf_counter(); c = time.process_time(); n = 0
for _, element in ET.iterparse(sys.argv[1], events=("end",)):
    if element.tag.endswith("Предложение"):
        n += 1
        element.clear()
print(time.perf_counter() - t, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      time.process_time() - c)
"""


def bare_parse(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", BARE, str(path)], check=True, capture_output=True, text=True
    ).stdout.split()
    return {
        "seconds": round(float(out[0]), 2),
        "offers": int(out[1]),
        "peak_mb": round(float(out[2])),
        "cpu_seconds": round(float(out[3]), 2),
    }


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


PG_ADMIN = os.environ.get("EXCHANGE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def fresh_database(kind: str, scratch: Path) -> Iterator[str]:
    """A migrated, empty database URL (as bench.harness's, without its imports of the load
    generator); a PostgreSQL one (admin URL from EXCHANGE_BENCH_PG) is dropped afterwards."""
    from exchange.dev.dbkit import migrate_sqlite, pg_database

    scratch.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        yield migrate_sqlite(scratch / f"bench-{uuid.uuid4().hex[:8]}.db")
        return
    with pg_database(PG_ADMIN) as url:
        yield url


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by ``pid`` and its live children: what an import
    costs whatever else the shared machine runs (its wall-clock time is not)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(child) for child in (task / "children").read_text().split()]
    total = 0
    for one in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _children_hwm_mb(pid: int) -> float:
    """The largest VmHWM among ``pid``'s child processes (its reading process)."""
    peak = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):  # gone meanwhile
                peak = max(peak, _vm_hwm_mb(int(child)))
    return peak


def _staged(url: str) -> int:
    from sqlalchemy import func, select

    from exchange.db.engine import make_engine, transaction
    from exchange.db.schema import staging

    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            return int(connection.execute(select(func.count()).select_from(staging)).scalar_one())
    finally:
        engine.dispose()


def served(
    path: Path, scratch: Path, offers: int, url: str, reader_processes: int
) -> dict[str, Any]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": url,
        "EXCHANGE_1C_READER_PROCESSES": str(reader_processes),
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_1C_USER": USER,
        "EXCHANGE_1C_PASSWORD": PASSWORD,
        "EXCHANGE_1C_DIR": str(scratch / "1c"),
        "EXCHANGE_1C_PRICE_TYPES": json.dumps(
            {t.name: f"type{i}" for i, t in enumerate(BENCH_TYPES)}
        ),
        "EXCHANGE_LOG_LEVEL": "WARNING",
    }
    command = [sys.executable, "-m", "exchange"]
    env["EXCHANGE_LOG_LEVEL"] = "INFO"
    server = subprocess.Popen(
        [*command, "serve"], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        port = None
        while port is None:
            line = server.stderr.readline() if server.stderr else ""
            if not line:
                raise RuntimeError("serve did not start")
            if "serving on" in line:
                port = int(line.rsplit(":", 1)[1].split()[0])
        client = OneCClient(f"http://127.0.0.1:{port}", USER, PASSWORD, use_zip=False)
        started = time.perf_counter()
        client.checkauth()
        client.init()
        idle_peak = _vm_hwm_mb(server.pid)  # serve started, nothing uploaded yet
        data = path.read_bytes()
        uploaded_at = time.perf_counter()
        answer = client.upload("offers.xml", data)
        assert answer.status == "success", answer
        del data
        cpu_before = _cpu_seconds(server.pid)
        imported_at = time.perf_counter()
        answer, rounds = client.import_file("offers.xml", timeout=3600)
        done = time.perf_counter()
        cpu = _cpu_seconds(server.pid) - cpu_before
        assert answer.status == "success", answer
        client.deactivate()
        client.complete()
        requests = client.requests
        client.close()
        peak = _vm_hwm_mb(server.pid)
        reader_peak = _children_hwm_mb(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    staged = _staged(url)
    assert staged == 3 * offers, staged
    return {
        "upload_seconds": round(imported_at - uploaded_at, 2),
        "import_seconds": round(done - imported_at, 2),
        "import_cpu_seconds": round(cpu, 2),
        "exchange_seconds": round(done - started, 2),
        "progress_answers": rounds,
        "requests": requests,
        "file_limit": client.file_limit,
        "staged": staged,
        "serve_peak_mb": round(peak),
        "serve_peak_before_upload_mb": round(idle_peak),
        "reader_peak_mb": round(reader_peak),
    }


def run(offers: int, database: str, repeat: int, reader_processes: int) -> dict[str, Any]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-1c-") as folder:
        scratch = Path(folder)
        path = scratch / "offers.xml"
        size = write_big_offers(path, offers)
        for n in range(repeat):
            bare = bare_parse(path)
            with fresh_database(database, scratch) as url:
                result = served(path, scratch / f"run{n}", offers, url, reader_processes)
            runs.append(
                {
                    "bare_iterparse": bare,
                    "serve": result,
                    "import_vs_bare": round(result["import_seconds"] / bare["seconds"], 2),
                    "import_cpu_vs_bare_cpu": round(
                        result["import_cpu_seconds"] / bare["cpu_seconds"], 2
                    ),
                }
            )
    return {
        "offers": offers,
        "database": database,
        "reader_processes": reader_processes,
        "file_mb": round(size / 2**20, 1),
        "median_import_vs_bare": round(statistics.median(r["import_vs_bare"] for r in runs), 2),
        "median_cpu_vs_bare_cpu": round(
            statistics.median(r["import_cpu_vs_bare_cpu"] for r in runs), 2
        ),
        "median_bare_seconds": round(
            statistics.median(r["bare_iterparse"]["seconds"] for r in runs), 2
        ),
        "median_import_seconds": round(
            statistics.median(r["serve"]["import_seconds"] for r in runs), 2
        ),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, action="append", help="repeatable (100000)")
    parser.add_argument(
        "--database", choices=["sqlite", "postgresql"], action="append", help="repeatable"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case (median)")
    parser.add_argument(
        "--reader-processes", type=int, default=1, help="EXCHANGE_1C_READER_PROCESSES (1)"
    )
    args = parser.parse_args(argv)
    for database in args.database or ["sqlite"]:
        for offers in args.offers or [100_000]:
            result = run(offers, database, args.repeat, args.reader_processes)
            print(json.dumps(result, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
