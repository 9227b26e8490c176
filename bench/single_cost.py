"""A worker's CPU per delivered message (issue 13, item 7; issue 31, item 9), for comparing trees.

``python -m bench.single_cost --tree /work/main --tree . --rounds 3`` stages ``--messages``
prices in a fresh SQLite database per run, resets one ``bench/fastsite.py``, and runs
``exchange run --until-idle`` with each tree's own ``.venv`` (so a worktree of another commit
is measured against this one), the trees alternating round by round. Each tree's own code
migrates the database and stages the prices (``exchange.dev.dbkit.migrate_sqlite`` and
``exchange.intake.stage.stage_many`` in that tree's ``.venv``, its own migrations) and reads
the states at the end, so a tree from before the channels schema (issue 31) runs on its own
schema. ``--versions 10 --site-batch-size 100`` makes the run a reload (every SKU staged in
10 versions, the latest delivered through the batch API, the others cancelled). The worker's CPU
(utime + stime from ``/proc/PID/stat``) is sampled every few milliseconds and read at the
site's first and last effect: *window* is the worker's CPU per message between them (delivery
alone), *whole* the whole process's (start-up, intake and coalescing included, from wait4).
Prints one line per run and, per tree, the median and the range; ``--profile DIR`` wraps each
worker in ``py-spy record -r 200 -f raw`` (its figures then include py-spy's overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cpu import CpuSampler, cpu_between
from bench.harness import TOKEN, SiteProcess, wait_child

# Run by the measured tree's own Python (only its ``exchange`` package is imported): migrate a
# fresh SQLite file, stage COUNT SKUs x VERSIONS versions as bench.harness.stage_prices does.
_PREPARE = """
import json, sys
from pathlib import Path
from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import migrate_sqlite
from exchange.intake.stage import stage_many
path, count, versions = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
url = migrate_sqlite(path)
engine = make_engine(url)
with transaction(engine) as connection:
    rows = []
    for version in range(1, versions + 1):
        for n in range(count):
            sku = f"SKU-{n:07d}"
            price = f"{(n + version) % 10_000}.{n % 100:02d}"
            payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": "retail"}
            source = f"Установка цен номенклатуры {version:02d}-{n:06d}"
            rows.append(("price", sku, version, json.dumps(payload), "1", source, None))
            if len(rows) >= 50_000:
                stage_many(connection, rows)
                rows.clear()
    stage_many(connection, rows)
engine.dispose()
print(url)
"""

# The states of the messages as the one-target service kept them, by the tree's own code.
_STATES = """
import json, sys
from sqlalchemy import func, select
from exchange.db.engine import make_engine, transaction
try:
    from exchange.dev.testing import one_channel_messages
    m = one_channel_messages()
except ImportError:  # before the channels schema: the message holds its state
    from exchange.db.schema import messages as m
engine = make_engine(sys.argv[1])
with transaction(engine, read_only=True) as connection:
    rows = connection.execute(select(m.c.state, func.count()).group_by(m.c.state)).all()
print(json.dumps({state: count for state, count in rows}))
"""


def _tree_python(tree: Path, script: str, *argv: str) -> str:
    python = str(tree / ".venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    done = subprocess.run(
        [python, "-c", script, *argv], env=env, cwd=tree, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def one_run(
    tree: Path,
    site: SiteProcess,
    scratch: Path,
    count: int,
    profile: Path | None,
    tag: str,
    callgrind: Path | None = None,
    versions: int = 1,
    site_batch_size: int = 1,
) -> dict[str, Any]:
    python = str(tree / ".venv" / "bin" / "python")
    path = scratch / f"{tag}.db"
    for old in scratch.glob(f"{tag}.db*"):
        old.unlink()
    url = _tree_python(tree, _PREPARE, str(path), str(count), str(versions))
    try:
        site.reset()
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
        env.update(
            {
                "EXCHANGE_DATABASE_URL": url,
                "EXCHANGE_SITE_URL": site.url,
                "EXCHANGE_SITE_TOKEN": TOKEN,
                "EXCHANGE_WORKER_ID": "bench-w0",
                "EXCHANGE_LOG_LEVEL": "INFO",
            }
        )
        if site_batch_size > 1:
            env["EXCHANGE_SITE_BATCH_SIZE"] = str(site_batch_size)
        limit = 600 + count * versions // 100 if callgrind is None else 20_000
        argv = [python, "-m", "exchange", "run", "--until-idle", "--max-seconds", str(limit)]
        if profile is not None:
            where = f"{Path(python).parent}{os.pathsep}{Path(sys.executable).parent}"
            spy = shutil.which("py-spy", path=where) or "py-spy"
            out = profile / f"{tag}.txt"
            argv = [spy, "record", "-r", "200", "-f", "raw", "-o", str(out), "--", *argv]
        if callgrind is not None:
            out = callgrind / f"{tag}.{count}.callgrind"
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv]
        with (scratch / f"{tag}.log").open("w") as log:
            started = time.time()
            proc = subprocess.Popen(argv, env=env, cwd=scratch, stdout=log, stderr=log)
            sampler = CpuSampler(interval=0.004)
            sampler.watch(proc.pid, started)
            sampler.start()
            code, _, cpu = wait_child(proc, limit + 300)
            sampler.stop()
            sampler.finish(proc.pid, time.time(), cpu)
        wall = time.time() - started
        stats = site.stats()
        states = json.loads(_tree_python(tree, _STATES, url))
    finally:
        for old in scratch.glob(f"{tag}.db*"):
            old.unlink()
    first, last = stats["first_effect"], stats["last_effect"]
    window_cpu = cpu_between(sampler.samples[proc.pid], first, last)
    if window_cpu is None:
        raise RuntimeError(f"{tag}: the CPU samples do not cover the site's effects")
    expected = {"delivered": count}
    if versions > 1:
        expected["cancelled"] = count * (versions - 1)
    ok = code == 0 and states == expected and stats["effects"] == count
    return {
        "tree": str(tree),
        "ok": ok,
        "states": states,
        "worker_cpu_s": cpu,
        "wall_s": wall,
        "batch_requests": stats.get("batch_requests"),
        "load": [round(x, 2) for x in os.getloadavg()],
        "window_us": window_cpu / count * 1e6,
        "whole_us": cpu / count * 1e6,
        # one batch request: its effects share one moment, and the window has no length
        "site_rate": count / (last - first) if last > first else None,
        "on_cpu": window_cpu / (last - first) if last > first else None,
        "requests": stats["requests"],
        "instructions": _instructions(out) if callgrind is not None else None,
    }


def _instructions(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--profile", type=Path, help="py-spy raw profiles go here")
    parser.add_argument("--json", type=Path, help="every run's figures")
    parser.add_argument(
        "--callgrind",
        type=Path,
        help="run each worker under valgrind's callgrind (slow) and count its instructions: "
        "with two --messages counts given as --small, the difference per message (start-up "
        "left out) is a figure the machine's load does not move",
    )
    parser.add_argument("--small", type=int, help="with --callgrind: the smaller run's messages")
    parser.add_argument(
        "--versions", type=int, default=1, help="versions staged per SKU (10: a reload)"
    )
    parser.add_argument(
        "--site-batch-size", type=int, default=1, help="EXCHANGE_SITE_BATCH_SIZE (100: batches)"
    )
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree]
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="single-cost-") as tmp:
        scratch = Path(tmp)
        site = SiteProcess("fast", scratch)
        try:
            for n in range(args.rounds):
                for i, tree in enumerate(trees):
                    tag = f"r{n}-t{i}-{tree.name}"
                    if args.callgrind is not None:
                        args.callgrind.mkdir(parents=True, exist_ok=True)
                        shape = {"versions": args.versions, "site_batch_size": args.site_batch_size}
                        big = one_run(
                            tree, site, scratch, args.messages, None, tag, args.callgrind, **shape
                        )
                        small = one_run(
                            tree, site, scratch, args.small, None, tag, args.callgrind, **shape
                        )
                        per = (big["instructions"] - small["instructions"]) / (
                            args.messages - args.small
                        )
                        print(
                            f"{tag:24} ok={big['ok'] and small['ok']} instructions per message "
                            f"{per:,.0f} ({small['instructions']:,} at {args.small}, "
                            f"{big['instructions']:,} at {args.messages})",
                            flush=True,
                        )
                        continue
                    run = one_run(
                        tree,
                        site,
                        scratch,
                        args.messages,
                        args.profile,
                        tag,
                        versions=args.versions,
                        site_batch_size=args.site_batch_size,
                    )
                    run["round"] = n
                    runs.append(run)
                    print(
                        f"{tag:24} ok={run['ok']} window {run['window_us']:6.1f} us/msg  "
                        f"whole {run['whole_us']:6.1f} us/msg  "
                        f"at site {run['site_rate'] or 0:7.0f}/s on cpu {run['on_cpu'] or 0:.2f}  "
                        f"wall {run['wall_s']:.1f} s  "
                        f"load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
        finally:
            site.stop()
    medians: dict[str, tuple[float, float]] = {}
    if args.callgrind is not None:
        return
    for tree in trees:
        mine = [r for r in runs if r["tree"] == str(tree)]
        w = [r["window_us"] for r in mine]
        h = [r["whole_us"] for r in mine]
        medians[str(tree)] = (statistics.median(w), statistics.median(h))
        print(
            f"{tree}: window median {statistics.median(w):.1f} ({min(w):.1f}-{max(w):.1f}) "
            f"whole median {statistics.median(h):.1f} ({min(h):.1f}-{max(h):.1f}) us/msg"
        )
    if len(trees) == 2:
        for i, figure in enumerate(("window", "whole")):
            a, b = (medians[str(t)][i] for t in trees)
            pairs = [
                r2[f"{figure}_us"] / r1[f"{figure}_us"]
                for r1, r2 in zip(
                    [r for r in runs if r["tree"] == str(trees[0])],
                    [r for r in runs if r["tree"] == str(trees[1])],
                    strict=True,
                )
            ]
            print(
                f"ratio of medians (second / first tree), {figure}: {b / a:.3f}; per round: "
                + ", ".join(f"{p:.3f}" for p in pairs)
            )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
