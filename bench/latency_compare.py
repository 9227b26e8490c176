"""The latency section's reload case against an earlier commit, in one run:

    python -m bench.latency_compare --before REF [--sizes 6000,60000]
                                    [--databases sqlite,postgresql] [--out FILE]

``REF`` is exported (``git archive``) to a temporary directory. For each database and size,
the earlier code and this checkout's each run ``bench.latency.during_reload`` (a correction's
delay during a reload, the backlog's share of the shop's capacity) in their own process on a
fresh database, one right after the other, so that both meet the same machine (this machine is
shared: its load moves within minutes). Each also measures its worker's take-in with nothing
new staged, ``pending`` messages waiting (the median of 5, ``take_in_s``): what a cycle kept
going by a backlog does every poll interval.

Prints and writes (``--out``) every figure of both, and the ratio of this checkout's to the
earlier one's: below 1 is faster for the delays and the take-in, above 1 is more of the shop's
capacity used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Run inside the tree under test (its own exchange and bench packages): one reload and the
# take-in probe, each on a fresh database; prints one JSON line.
CHILD = r"""
import json, random, statistics, sys, tempfile, time
from pathlib import Path
from bench import latency
from bench.onec_upload import fresh_database
from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.intake import staging_table as intake
from exchange.worker import CycleReport

database, size = sys.argv[1], int(sys.argv[2])


def take_in_probe(url):
    engine = make_engine(url)
    stage(engine, [price_row(f"SKU-{n:06d}", 1) for n in range(size)])
    settings = fast_settings(url, "http://127.0.0.1:9", poll_interval=latency.POLL)
    worker = bootstrap.worker(settings, engine, clock=FakeClock(), rng=random.Random(1))
    intake.take(engine, None, settings.kinds, worker.clock.now())
    worker._take_in(CycleReport())  # the cycle's first take-in (a sweep, in either version)
    seconds = []
    for _ in range(5):
        time.sleep(latency.POLL)  # the next take-in of a cycle comes a poll interval later
        started = time.perf_counter()
        worker._take_in(CycleReport())
        seconds.append(time.perf_counter() - started)
    engine.dispose()
    return round(statistics.median(seconds), 4)


with tempfile.TemporaryDirectory(prefix="latency-compare-") as scratch:
    with fresh_database(database, Path(scratch)) as url:
        probe = take_in_probe(url)
    with fresh_database(database, Path(scratch)) as url:
        row = latency.during_reload(url, size)
print(json.dumps({**row, "take_in_s": probe}))
"""

RATIOS = ("median_s", "worst_s", "share_of_capacity", "take_in_s")


def export(ref: str, into: Path) -> str:
    """``ref``'s tree in ``into``; returns its short commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def measure(tree: Path, database: str, size: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, database, str(size)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree} {database} {size}: {done.stderr.strip()[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def ratio(after: Any, before: Any) -> float | None:
    if not before or after is None:
        return None
    return round(float(after) / float(before), 3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_compare")
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--sizes", default="6000,60000")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    databases = args.databases.split(",")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "after": head,
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="latency-before-") as tmp:
        before_tree = Path(tmp)
        results["before"] = export(args.before, before_tree)
        for database in databases:
            for size in sizes:
                before = measure(before_tree, database, size)
                print(f"{database} {size} before: {json.dumps(before)}", flush=True)
                after = measure(ROOT, database, size)
                print(f"{database} {size} after:  {json.dumps(after)}", flush=True)
                results["rows"].append(
                    {
                        "database": database,
                        "reload": size,
                        "before": before,
                        "after": after,
                        "after_to_before": {k: ratio(after.get(k), before.get(k)) for k in RATIOS},
                    }
                )
    results["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
