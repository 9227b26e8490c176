"""A worker's CPU per delivered single-request message (issue 13, item 7), for comparing trees.

``python -m bench.single_cost --tree /work/main --tree . --rounds 3`` stages ``--messages``
prices in a fresh SQLite database per run, resets one ``bench/fastsite.py``, and runs
``exchange run --until-idle`` with each tree's own ``.venv`` (so a worktree of another commit
is measured against this one), the trees alternating round by round. The worker's CPU
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
from bench.harness import TOKEN, SiteProcess, fresh_database, stage_prices, state_counts, wait_child


def one_run(
    tree: Path,
    site: SiteProcess,
    scratch: Path,
    count: int,
    profile: Path | None,
    tag: str,
    callgrind: Path | None = None,
) -> dict[str, Any]:
    python = str(tree / ".venv" / "bin" / "python")
    with fresh_database("sqlite", scratch) as url:
        stage_prices(url, count)
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
        argv = [python, "-m", "exchange", "run", "--until-idle", "--max-seconds", "600"]
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
            code, _, cpu = wait_child(proc, 900)
            sampler.stop()
            sampler.finish(proc.pid, time.time(), cpu)
        stats = site.stats()
        states = state_counts(url)
    first, last = stats["first_effect"], stats["last_effect"]
    window_cpu = cpu_between(sampler.samples[proc.pid], first, last)
    if window_cpu is None:
        raise RuntimeError(f"{tag}: the CPU samples do not cover the site's effects")
    ok = code == 0 and states == {"delivered": count} and stats["effects"] == count
    return {
        "tree": str(tree),
        "ok": ok,
        "window_us": window_cpu / count * 1e6,
        "whole_us": cpu / count * 1e6,
        "site_rate": count / (last - first),
        "on_cpu": window_cpu / (last - first),
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
                        big = one_run(tree, site, scratch, args.messages, None, tag, args.callgrind)
                        small = one_run(tree, site, scratch, args.small, None, tag, args.callgrind)
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
                    run = one_run(tree, site, scratch, args.messages, args.profile, tag)
                    run["round"] = n
                    runs.append(run)
                    print(
                        f"{tag:24} ok={run['ok']} window {run['window_us']:6.1f} us/msg  "
                        f"whole {run['whole_us']:6.1f} us/msg  at site {run['site_rate']:7.0f}/s "
                        f"on cpu {run['on_cpu']:.2f}  load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
        finally:
            site.stop()
    medians = {}
    if args.callgrind is not None:
        return
    for tree in trees:
        mine = [r for r in runs if r["tree"] == str(tree)]
        w = [r["window_us"] for r in mine]
        h = [r["whole_us"] for r in mine]
        medians[str(tree)] = statistics.median(w)
        print(
            f"{tree}: window median {statistics.median(w):.1f} ({min(w):.1f}-{max(w):.1f}) "
            f"whole median {statistics.median(h):.1f} ({min(h):.1f}-{max(h):.1f}) us/msg"
        )
    if len(trees) == 2:
        a, b = (medians[str(t)] for t in trees)
        pairs = [
            r2["window_us"] / r1["window_us"]
            for r1, r2 in zip(
                [r for r in runs if r["tree"] == str(trees[0])],
                [r for r in runs if r["tree"] == str(trees[1])],
                strict=True,
            )
        ]
        print(
            f"ratio of medians (second / first tree), window: {b / a:.3f}; per round: "
            + ", ".join(f"{p:.3f}" for p in pairs)
        )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
