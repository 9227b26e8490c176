"""Benchmark: one price to several channels (issue 31 item 9, the ``fanout`` section).

    python -m bench.fanout [--prices 100000] [--channels 1 2 4] [--database sqlite postgresql]

For each database and each count of channels: a fresh database, ``prices`` staged prices (one
version per SKU), one fast site simulator (bench/fastsite.py) per channel in a process of its
own on a loopback port, and ``exchange run --until-idle`` as a real process with
``EXCHANGE_CHANNELS`` naming that many channels of target ``api`` (the first named ``api``,
the channel a fresh database registers). The worker's CPU (wait4: user + system) and the wall
from its start to its exit, each divided by prices × channels: the cost of one delivery. The
sites' own CPU is counted apart (it is not the service's cost).

"Each extra channel's cost over the first channel's": (CPU of n channels − CPU of one) ÷ (n −
1) ÷ CPU of one, the same on the wall. The promise of issue 31 item 9: at most 1 (an extra
channel costs at most what the first channel's delivery costs); the first channel's figure
holds start-up, intake and coalescing, which are paid once, so an extra channel usually costs
less. Afterwards each run checks that the worker exited 0, every delivery on every channel is
``delivered`` and each site saw exactly one effect per price.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.harness import (
    PY,
    ROOT,
    TOKEN,
    SiteProcess,
    fresh_database,
    log,
    stage_prices,
    wait_child,
)
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import channels, deliveries

CHANNELS = (1, 2, 4)
PRICES = 100_000
DATABASES = ("sqlite", "postgresql")
GOAL = 1.0  # an extra channel costs at most what the first one does (issue 31 item 9)


def channel_names(count: int) -> list[str]:
    """``api`` (the channel a fresh database registers), then ``shop2``, ``shop3``, …"""
    return ["api", *(f"shop{n}" for n in range(2, count + 1))]


def channels_setting(names: list[str], sites: list[SiteProcess], token_file: Path) -> str:
    """``EXCHANGE_CHANNELS``: each channel its own site, the token from a file (contract 13:
    a channel's secrets only as ``*_file``)."""
    return json.dumps(
        {
            name: {"target": "api", "site_url": site.url, "site_token_file": str(token_file)}
            for name, site in zip(names, sites, strict=True)
        }
    )


def delivered_per_channel(url: str) -> dict[str, dict[str, int]]:
    engine = make_engine(url)
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(channels.c.name, deliveries.c.state, func.count())
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .group_by(channels.c.name, deliveries.c.state)
            ).all()
    finally:
        engine.dispose()
    found: dict[str, dict[str, int]] = {}
    for name, state, count in rows:
        found.setdefault(name, {})[state] = int(count)
    return found


def one_run(database: str, prices: int, count: int, scratch: Path) -> dict[str, Any]:
    """One end-to-end run of ``count`` channels on a fresh database and fresh sites."""
    names = channel_names(count)
    token_file = scratch / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    sites = [SiteProcess("fast", scratch) for _ in names]
    try:
        with fresh_database(database, scratch) as url:
            stage_prices(url, prices)
            sites_cpu = [site.cpu_seconds() for site in sites]
            env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
            env.update(
                {
                    "EXCHANGE_DATABASE_URL": url,
                    "EXCHANGE_CHANNELS": channels_setting(names, sites, token_file),
                    "EXCHANGE_WORKER_ID": f"fanout-{count}",
                    "EXCHANGE_LOG_LEVEL": "INFO",
                }
            )
            max_seconds = 120 + prices * count / 20
            log_path = scratch / f"fanout-{database}-{count}.log"
            load_before = os.getloadavg()
            started = time.perf_counter()
            with log_path.open("w") as out:
                proc = subprocess.Popen(
                    [
                        PY,
                        "-m",
                        "exchange",
                        "run",
                        "--until-idle",
                        "--max-seconds",
                        str(max_seconds),
                    ],
                    env=env,
                    cwd=scratch,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
                code, rss_mb, cpu = wait_child(proc, max_seconds + 60)
            wall = time.perf_counter() - started
            sites_cpu = [
                s.cpu_seconds() - before for s, before in zip(sites, sites_cpu, strict=True)
            ]
            stats = [site.stats() for site in sites]
            states = delivered_per_channel(url)
    finally:
        for site in sites:
            site.stop()
    deliveries_ = prices * count
    checks = {
        "exit_code_zero": code == 0,
        "all_delivered": all(states.get(name) == {"delivered": prices} for name in names),
        "one_effect_per_price_per_site": all(
            s["effects"] == prices and s["max_effects_per_key"] == 1 for s in stats
        ),
    }
    if not all(checks.values()):
        tail = log_path.read_text(errors="replace").splitlines()[-20:]
        log(f"fanout {database} {count}: checks failed {checks} {states}\n" + "\n".join(tail))
    return {
        "database": database,
        "channels": count,
        "prices": prices,
        "deliveries": deliveries_,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_mb": round(rss_mb, 1),
        "sites_cpu_s": round(sum(sites_cpu), 3),
        "wall_us_per_delivery": round(wall / deliveries_ * 1e6, 2),
        "cpu_us_per_delivery": round(cpu / deliveries_ * 1e6, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "checks": checks,
        "ok": all(checks.values()),
    }


def extra_channel_cost(rows: list[dict[str, Any]]) -> None:
    """Each row of more than one channel gets ``extra_cpu_ratio`` and ``extra_wall_ratio``: what
    each channel beyond the first cost, over what the one-channel run cost (same database)."""
    first = {row["database"]: row for row in rows if row["channels"] == 1}
    for row in rows:
        one = first.get(row["database"])
        if one is None or row["channels"] == 1:
            continue
        extra = row["channels"] - 1
        row["extra_cpu_ratio"] = round((row["cpu_s"] - one["cpu_s"]) / extra / one["cpu_s"], 3)
        row["extra_wall_ratio"] = round((row["wall_s"] - one["wall_s"]) / extra / one["wall_s"], 3)
        row["meets_goal"] = row["extra_cpu_ratio"] <= GOAL


def measure(
    prices: int = PRICES,
    counts: tuple[int, ...] = CHANNELS,
    databases: tuple[str, ...] = DATABASES,
    scratch: Path | None = None,
) -> dict[str, Any]:
    """Every (database, channels) run, one each; the figures and the ratios."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        where = scratch or Path(tmp)
        for database in databases:
            for count in counts:
                log(f"fanout: {database}, {count} channel(s), {prices:,} prices")
                rows.append(one_run(database, prices, count, where))
                row = rows[-1]
                log(
                    f"fanout: {database} {count}: wall {row['wall_s']} s, cpu {row['cpu_s']} s, "
                    f"{row['cpu_us_per_delivery']} µs cpu per price per channel, ok={row['ok']}"
                )
    extra_channel_cost(rows)
    return {"prices": prices, "rows": rows, "goal_extra_over_first": GOAL}


def table(found: dict[str, Any]) -> str:
    """The section's table in Markdown (docs/benchmarks/fanout.md)."""
    lines = [
        "| database | channels | deliveries | wall s | worker CPU s | wall µs / price / channel "
        "| CPU µs / price / channel | each extra channel ÷ the first (CPU) | (wall) "
        "| sites' CPU s | load before | ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in found["rows"]:
        cpu_ratio = row.get("extra_cpu_ratio")
        wall_ratio = row.get("extra_wall_ratio")
        load = " ".join(f"{x:.2f}" for x in row["load_before"])
        lines.append(
            f"| {row['database']} | {row['channels']} | {row['deliveries']:,} | "
            f"{row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['wall_us_per_delivery']:.0f} | "
            f"{row['cpu_us_per_delivery']:.0f} | "
            f"{'—' if cpu_ratio is None else f'{cpu_ratio:.2f}'} | "
            f"{'—' if wall_ratio is None else f'{wall_ratio:.2f}'} | "
            f"{row['sites_cpu_s']:.1f} | {load} | {'yes' if row['ok'] else 'NO'} |"
        )
    return "\n".join(lines)


def write(found: dict[str, Any], out: Path) -> None:
    """fanout.json (every figure) and the table in fanout.md, between its markers."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "fanout.json").write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    page = out / "fanout.md"
    start, end = "<!-- fanout:start -->", "<!-- fanout:end -->"
    text = page.read_text(encoding="utf-8") if page.exists() else f"{start}\n{end}\n"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    body = f"{start}\n{found['prices']:,} prices per run.\n\n{table(found)}\n{end}"
    page.write_text(head + body + tail, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--prices", type=int, default=PRICES)
    parser.add_argument("--channels", type=int, nargs="+", default=list(CHANNELS))
    parser.add_argument("--database", nargs="+", default=list(DATABASES), choices=DATABASES)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    if args.prices < 1 or not args.channels or min(args.channels) < 1:
        parser.exit(2, "python -m bench.fanout: --prices and --channels must be 1 or more\n")
    if 1 not in args.channels:
        parser.exit(2, "python -m bench.fanout: --channels must include 1 (the ratios' base)\n")
    found = measure(args.prices, tuple(sorted(set(args.channels))), tuple(args.database))
    write(found, args.out)
    print(table(found))
    return 0 if all(row["ok"] for row in found["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
