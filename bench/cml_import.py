"""A 1C import without serve's HTTP (issue 14, item 8): ``import_file`` of a generated offers
file with a started ``ReaderPool`` (a reading process, as serve has) into a fresh, migrated
SQLite database, against a bare ``iterparse`` of the same file (``bench.onec_upload``'s), each
in a process of its own, alternating, ``--repeat`` times; the median of the per-round ratios.
``--tree DIR`` (repeatable) also runs another checkout's import (its own ``.venv``) in the
same rounds, and the median of its seconds over this checkout's, round by round.

    python -m bench.cml_import --offers 100000 --repeat 8 [--tree ../wt-sqlite-base]
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

IMPORT = r"""
import sys, tempfile, time
from pathlib import Path
from exchange.db.engine import make_engine
from exchange.db.migrate import upgrade
from exchange.dev.cml_gen import BENCH_TYPES
from exchange.intake.commerceml.publish import import_file
from exchange.intake.commerceml.reading import ReaderPool
if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="bench-cml-import-") as folder:
        path = Path(folder) / "offers.xml"
        path.symlink_to(sys.argv[1])
        engine = make_engine(migrate_sqlite(Path(folder) / "exchange.db"))
        pool = ReaderPool(1)
        pool.start()
        time.sleep(1)  # the reading process started, as serve's is before 1C's import
        types = {t.name: f"type{i}" for i, t in enumerate(BENCH_TYPES)}
        t = time.perf_counter()
        out = import_file(engine, path, name="offers.xml", price_types=types, sku_mode="id",
                          pool=pool, progress=lambda read, offers: None)
        seconds = time.perf_counter() - t
        pool.close()
        engine.dispose()
    assert out.outcome == "staged", out
    print(seconds, out.intents, 0, 0)
"""


def _run(python: str, code: str, path: Path, cwd: Path) -> tuple[float, int]:
    out = subprocess.run(
        [python, "-c", code, str(path)], check=True, capture_output=True, text=True, cwd=cwd
    ).stdout.split()
    return float(out[0]), int(out[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    trees = {"this": (sys.executable, here)} | {
        str(tree): (str(tree.resolve() / ".venv/bin/python"), tree.resolve()) for tree in args.tree
    }
    runs: dict[str, list[float]] = {"bare": []} | {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "offers.xml"
        write_big_offers(path, args.offers)
        for _ in range(args.repeat):
            runs["bare"].append(round(_run(sys.executable, BARE, path, here)[0], 3))
            for name, (python, cwd) in trees.items():
                seconds, intents = _run(python, IMPORT, path, cwd)
                assert intents == 3 * args.offers, intents
                runs[name].append(round(seconds, 3))
    report: dict[str, object] = {"offers": args.offers, "runs": runs}
    for name in trees:
        pairs = zip(runs[name], runs["bare"], strict=True)
        report[f"{name}_vs_bare"] = round(statistics.median(s / b for s, b in pairs), 2)
        if name != "this":
            pairs = zip(runs["this"], runs[name], strict=True)
            report[f"this_vs_{name}"] = round(statistics.median(s / o for s, o in pairs), 2)
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
