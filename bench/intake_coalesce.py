"""Benchmark: intake and coalescing alone, on SQLite or PostgreSQL.

    python bench/intake_coalesce.py --skus 10000 --versions 10 [--postings 5000]
                                    [--channels N] [--database-url URL] [--json]

Stages ``skus x versions`` price rows plus ``postings`` financial_posting rows (documents of
up to 5 lines, strictly ordered versions), interleaved the way 1C writes them, then times:
staging (the baseline: the plain INSERT of the same rows), intake (``intake.take``) and
coalescing (``coalesce.coalesce``), with their ratio to the staging time measured in the same
run, the CPU seconds this process spent, and the peak resident memory of the process.
``--channels N``: intake gives each message a delivery on N registered channels taking its
kind (contract 13; the default channel as ``exchange migrate`` registers it, and N-1 more).

Without ``--database-url`` a fresh SQLite file in a temporary directory is used. A PostgreSQL
URL must name an empty, migratable database that the benchmark may fill (it is not dropped).

Entry point for other scripts: ``run(url, rows) -> dict`` (see ``run``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from exchange.db.channels import register
from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import migrate
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies, Policy
from exchange.intake import staging_table as intake
from exchange.intake.stage import stage
from exchange.queue import coalesce

BATCH = 10_000
LINES_PER_DOCUMENT = 5


def staging_rows(skus: int, versions: int, postings: int) -> Iterator[dict[str, Any]]:
    """Price versions round by round (every SKU's v1, then v2, ...), a posting every so often."""
    prices = skus * versions
    every = prices // postings + 1 if postings else 0
    posted = 0
    count = 0
    for v in range(1, versions + 1):
        for n in range(skus):
            sku = f"SKU-{n:07d}"
            yield {
                "kind": "price",
                "aggregate": sku,
                "aggregate_version": v,
                "schema_version": "1",
                "source_ref": None,
                "payload": json.dumps({"sku": sku, "price": f"{n % 1000}.{v:02d}"}),
            }
            count += 1
            if every and count % every == 0 and posted < postings:
                yield _posting(posted)
                posted += 1
    while posted < postings:
        yield _posting(posted)
        posted += 1


def _posting(n: int) -> dict[str, Any]:
    document = f"DOC-{n // LINES_PER_DOCUMENT:07d}"
    line = n % LINES_PER_DOCUMENT + 1
    payload = {"document": document, "line": line, "amount": f"{n % 9973}.{n % 100:02d}"}
    return {
        "kind": "financial_posting",
        "aggregate": document,
        "aggregate_version": line,
        "schema_version": "1",
        "source_ref": f"Реализация {document}",
        "payload": json.dumps(payload),
    }


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ServerCpu:
    """CPU seconds of the PostgreSQL backends serving ``engine`` (same machine only).

    On a busy machine wall time says little; this process's CPU plus its backends' CPU is
    what the work costs. None when the backends cannot be read (another host, SQLite).
    """

    def __init__(self, engine: Engine) -> None:
        self.pids: set[int] = set()
        if engine.dialect.name != "postgresql":
            return

        @event.listens_for(engine, "connect")
        def _backend(dbapi_connection: Any, _record: Any) -> None:
            self.pids.add(int(dbapi_connection.info.backend_pid))

    def seconds(self) -> float | None:
        if not self.pids:
            return None
        total = 0.0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(
    url: str | None,
    rows: int,
    *,
    versions: int = 10,
    posting_share: float = 0.05,
    chunk: int = intake.CHUNK,
    channels: int = 1,
) -> dict[str, Any]:
    """Stage ``rows`` rows (a ``posting_share`` of them postings), take and coalesce them.

    ``url`` None: a fresh SQLite file. Returns seconds (wall and this process's CPU) for
    staging, intake and coalescing, the counts, and the peak RSS in MB (``ru_maxrss``: the
    whole process so far, so run one benchmark per process for a clean figure).
    """
    postings = int(rows * posting_share)
    skus = (rows - postings) // versions
    return _run(url, skus, versions, rows - skus * versions, chunk, channels)


class _Channel:
    def __init__(self, n: int) -> None:
        self.name, self.target, self.takes = f"bench-{n}", "api", tuple(DEFAULT_KINDS)


def _run(
    url: str | None, skus: int, versions: int, postings: int, chunk: int, channels: int = 1
) -> dict[str, Any]:
    url = url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    engine = make_engine(url)
    server = ServerCpu(engine)
    migrate(engine)
    register(engine, [_Channel(n) for n in range(2, channels + 1)], datetime.now(UTC))
    server_staging = server.seconds()
    started, cpu = time.perf_counter(), _cpu()
    batch: list[dict[str, Any]] = []
    with transaction(engine) as connection:
        for row in staging_rows(skus, versions, postings):
            batch.append(row)
            if len(batch) >= BATCH:
                stage(connection, batch)
                batch.clear()
        if batch:
            stage(connection, batch)
    staged, staged_cpu = time.perf_counter() - started, _cpu() - cpu
    staged_server = _difference(server.seconds(), server_staging)
    rss_before = _rss_mb()
    now = datetime.now(UTC)
    server_start = server.seconds()
    started, cpu = time.perf_counter(), _cpu()
    report = intake.take(engine, None, dict(DEFAULT_KINDS), now, chunk=chunk)
    took, took_cpu = time.perf_counter() - started, _cpu() - cpu
    server_intake = server.seconds()
    rss_after_intake = _rss_mb()
    started, cpu = time.perf_counter(), _cpu()
    with transaction(engine) as connection:
        cancelled = coalesce.coalesce(
            connection, KindPolicies.of({"price": Policy.LATEST_WINS}), now
        )
    coalesced, coalesced_cpu = time.perf_counter() - started, _cpu() - cpu
    server_end = server.seconds()
    engine.dispose()
    return {
        "database": engine.dialect.name,
        "rows": skus * versions + postings,
        "price_rows": skus * versions,
        "posting_rows": postings,
        "chunk": chunk,
        "channels": channels,
        "staging_s": round(staged, 3),
        "staging_cpu_s": round(staged_cpu, 3),
        "intake_s": round(took, 3),
        "intake_cpu_s": round(took_cpu, 3),
        "intake_ratio": round(took / staged, 2),
        "intake_server_cpu_s": _difference(server_intake, server_start),
        "staging_server_cpu_s": staged_server,
        # On a machine others share, wall time says little; the CPU both sides spent does.
        "intake_cpu_ratio": _cpu_ratio(
            took_cpu, _difference(server_intake, server_start), staged_cpu, staged_server
        ),
        "coalesce_s": round(coalesced, 3),
        "coalesce_cpu_s": round(coalesced_cpu, 3),
        "coalesce_ratio": round(coalesced / staged, 2),
        "coalesce_server_cpu_s": _difference(server_end, server_intake),
        "total_s": round(took + coalesced, 3),
        "messages": report.messages,
        "duplicates": report.duplicates,
        "rejected": report.rejected,
        "cancelled": cancelled,
        "rss_before_intake_mb": round(rss_before),
        "rss_after_intake_mb": round(rss_after_intake),
        "peak_rss_mb": round(_peak_mb()),
        "load_average": round(os.getloadavg()[0], 1),
    }


def _difference(end: float | None, start: float | None) -> float | None:
    return None if end is None or start is None else round(end - start, 3)


def _cpu_ratio(
    intake: float, intake_server: float | None, staging: float, staging_server: float | None
) -> float | None:
    """Intake's CPU seconds (this process and its database backends) over the staging
    INSERT's, counted alike; None where a side could not be read."""
    if (intake_server is None) != (staging_server is None):
        return None
    total = staging + (staging_server or 0.0)
    return round((intake + (intake_server or 0.0)) / total, 2) if total > 0 else None


def _server(seconds: float | None) -> str:
    return "" if seconds is None else f", database server cpu {seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--skus", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--postings", type=int, default=0, help="financial_posting rows")
    parser.add_argument("--chunk", type=int, default=intake.CHUNK, help="intake chunk size")
    parser.add_argument("--channels", type=int, default=1, help="channels taking every kind")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if min(args.skus, args.versions, args.chunk, args.channels) < 1 or args.postings < 0:
        parser.error(
            "--skus, --versions, --chunk and --channels must be 1 or more, --postings 0 or more"
        )
    try:
        result = _run(
            args.database_url, args.skus, args.versions, args.postings, args.chunk, args.channels
        )
    except Exception as exc:  # a benchmark's bad URL is a one-line error, not a traceback
        print(f"intake_coalesce: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.json:
        print(json.dumps(result))
        return
    r = result
    print(
        f"rows {r['rows']} ({r['price_rows']} price, {r['posting_rows']} posting)  "
        f"database {r['database']}  chunk {r['chunk']}  channels {r['channels']}  "
        f"load {r['load_average']}"
    )
    print(
        f"staging INSERT (baseline) {r['staging_s']:.2f} s  "
        f"(cpu {r['staging_cpu_s']:.2f} s{_server(r['staging_server_cpu_s'])})"
    )
    print(
        f"intake   {r['intake_s']:.2f} s  ({r['intake_ratio']:.2f}x baseline, "
        f"cpu {r['intake_cpu_s']:.2f} s{_server(r['intake_server_cpu_s'])}; "
        f"cpu {r['intake_cpu_ratio']}x baseline's)  messages {r['messages']}"
    )
    print(
        f"coalesce {r['coalesce_s']:.2f} s  ({r['coalesce_ratio']:.2f}x baseline, "
        f"cpu {r['coalesce_cpu_s']:.2f} s{_server(r['coalesce_server_cpu_s'])})  "
        f"cancelled {r['cancelled']}"
    )
    print(f"intake + coalesce {r['total_s']:.2f} s")
    print(
        f"RSS {r['rss_before_intake_mb']} MB before intake, {r['rss_after_intake_mb']} MB after; "
        f"peak RSS {r['peak_rss_mb']} MB"
    )


if __name__ == "__main__":
    main()
