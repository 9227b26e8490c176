"""Benchmark: intake and coalescing alone, N SKUs x V versions, on SQLite or PostgreSQL.

    python bench/intake_coalesce.py --skus 10000 --versions 10 [--database-url URL]

Reports seconds for staging (the baseline: the plain INSERT of the same rows), intake and
coalescing, their ratio to the staging time measured in the same run, and the peak resident
memory of the process.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert

from exchange import coalesce, intake
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import staging
from exchange.settings import DEFAULT_KINDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skus", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    engine = make_engine(url)
    upgrade(engine)
    started = time.perf_counter()
    batch = []
    with transaction(engine) as connection:
        for n in range(args.skus):
            sku = f"SKU-{n:07d}"
            for v in range(1, args.versions + 1):
                batch.append(
                    {
                        "kind": "price",
                        "aggregate": sku,
                        "aggregate_version": v,
                        "schema_version": "1",
                        "source_ref": None,
                        "payload": json.dumps({"sku": sku, "price": f"{v}.00"}),
                    }
                )
                if len(batch) >= 10_000:
                    connection.execute(insert(staging), batch)
                    batch.clear()
        if batch:
            connection.execute(insert(staging), batch)
    staged = time.perf_counter() - started
    now = datetime.now(UTC)
    started = time.perf_counter()
    report = intake.take(engine, None, dict(DEFAULT_KINDS), now)
    took = time.perf_counter() - started
    started = time.perf_counter()
    with transaction(engine) as connection:
        cancelled = coalesce.coalesce(connection, ["price"], now)
    coalesced = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = args.skus * args.versions
    print(f"rows {rows}  database {engine.dialect.name}")
    print(f"staging INSERT (baseline) {staged:.2f} s")
    print(f"intake   {took:.2f} s  ({took / staged:.2f}x baseline)  messages {report.messages}")
    print(
        f"coalesce {coalesced:.2f} s  ({coalesced / staged:.2f}x baseline)  cancelled {cancelled}"
    )
    print(f"peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
