"""The parts of a 1C import on SQLite timed apart in one process (issue 14, item 8), each
against a bare ``iterparse`` of the same file run just before (``bench.onec_upload``'s):
``read_into_spool`` (parse, mapping, the pickled spool); ``_into_scratch`` from the finished
spool (what serve does while the reader reads); the publishing transaction from the spool by
``executemany`` (the way before the scratch file) and from the scratch file by
``INSERT ... SELECT``. Each ``publish`` into a fresh, migrated SQLite database.

    python -m bench.cml_parts --offers 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.onec_upload import bare_parse
from exchange.db.engine import make_engine
from exchange.dev.cml_gen import BENCH_TYPES, write_big_offers
from exchange.dev.dbkit import migrate_sqlite
from exchange.intake.commerceml import publish
from exchange.intake.commerceml.reading import read_into_spool


def run(offers: int, repeat: int) -> dict[str, Any]:
    ratios: dict[str, list[float]] = {
        "read_into_spool": [],
        "into_scratch": [],
        "publish_from_spool": [],
        "publish_from_scratch": [],
    }
    bares: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-cml-parts-") as folder:
        scratch_dir = Path(folder)
        path = scratch_dir / "offers.xml"
        write_big_offers(path, offers)
        types = {t.name: f"type{i}" for i, t in enumerate(BENCH_TYPES)}
        for n in range(repeat):
            bare = bare_parse(path)["seconds"]
            bares.append(bare)
            spool = scratch_dir / f"offers{n}.spool"
            started = time.perf_counter()
            read = read_into_spool(path, spool, types, "id", {}, {}, {})
            ratios["read_into_spool"].append((time.perf_counter() - started) / bare)
            rows = scratch_dir / f"offers{n}.rows.db"
            started = time.perf_counter()
            publish._into_scratch(spool, rows, lambda: True, None)
            ratios["into_scratch"].append((time.perf_counter() - started) / bare)
            for key, scratch in (("publish_from_spool", None), ("publish_from_scratch", rows)):
                engine = make_engine(migrate_sqlite(scratch_dir / f"{key}{n}.db"))
                started = time.perf_counter()
                result = publish.publish(
                    engine,
                    spool,
                    f"digest{n}",
                    "offers.xml",
                    read=lambda r=read: r,
                    scratch=scratch,
                )
                ratios[key].append((time.perf_counter() - started) / bare)
                engine.dispose()
                assert isinstance(result, publish.Published) and result.fresh, result
    return {
        "offers": offers,
        "bare_seconds": [round(b, 2) for b in bares],
        **{f"median_{k}_vs_bare": round(statistics.median(v), 3) for k, v in ratios.items()},
        "runs": {k: [round(x, 3) for x in v] for k, v in ratios.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.offers, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
