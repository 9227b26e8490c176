"""The CommerceML reader alone (issue 14, item 8): ``parse`` + ``Mapper`` of a generated
offers file (``--offers`` offers, 3 price types, all mapped: 3 rows per offer, written to a
counter) against a bare ``xml.etree.ElementTree.iterparse`` of the same file (C parser,
``clear()`` per offer), each in a process of its own, alternating, ``--repeat`` times; the
median of each and of the per-round ratios (wall and CPU), and each one's peak RSS.

``--tree DIR`` (repeatable) also runs the reader of another checkout (its own ``.venv``) in
the same rounds: the figures of two versions of the reader from one run.

    python -m bench.cml_read --offers 100000 --repeat 5 [--tree ../wt-cml-base]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.onec_upload import BARE
from exchange.dev.cml_gen import write_big_offers

READER = r"""
import resource, sys, time
from exchange.dev.cml_gen import BENCH_TYPES
from exchange.intake.commerceml.mapping import Mapper
from exchange.intake.commerceml.parse import parse
rows = 0
def out(aggregate, payload, name):
    global rows
    rows += 1
mapper = Mapper(price_types={t.name: f"type{i}" for i, t in enumerate(BENCH_TYPES)},
                sku_mode="id", known_types={}, articles={}, out=out)
t = time.perf_counter(); c = time.process_time()
with open(sys.argv[1], "rb") as stream:
    parse(stream, mapper)
print(time.perf_counter() - t, rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      time.process_time() - c)
"""


def _run(python: str, code: str, path: Path, cwd: Path) -> dict[str, float]:
    out = subprocess.run(
        [python, "-c", code, str(path)], check=True, capture_output=True, text=True, cwd=cwd
    ).stdout.split()
    return {
        "seconds": float(out[0]),
        "count": int(out[1]),
        "peak_mb": float(out[2]),
        "cpu": float(out[3]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    readers = {"this": (sys.executable, here)} | {
        str(tree): (str(tree.resolve() / ".venv/bin/python"), tree.resolve()) for tree in args.tree
    }
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "offers.xml"
        size = write_big_offers(path, args.offers)
        runs: dict[str, list[dict[str, float]]] = {"bare": []} | {name: [] for name in readers}
        for _ in range(args.repeat):
            runs["bare"].append(_run(sys.executable, BARE, path, here))
            for name, (python, cwd) in readers.items():
                runs[name].append(_run(python, READER, path, cwd))
    report: dict[str, object] = {"offers": args.offers, "mb": round(size / 2**20, 1)}
    for name, series in runs.items():
        entry = {
            "seconds": round(statistics.median(r["seconds"] for r in series), 2),
            "cpu": round(statistics.median(r["cpu"] for r in series), 2),
            "peak_mb": round(max(r["peak_mb"] for r in series)),
            "count": series[0]["count"],
        }
        if name != "bare":
            entry["wall_ratio"] = round(
                statistics.median(
                    r["seconds"] / b["seconds"] for r, b in zip(series, runs["bare"], strict=True)
                ),
                2,
            )
            entry["cpu_ratio"] = round(
                statistics.median(
                    r["cpu"] / b["cpu"] for r, b in zip(series, runs["bare"], strict=True)
                ),
                2,
            )
        report[name] = entry
    print(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
