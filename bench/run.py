"""The benchmark suite in one run: ``python -m bench`` (or ``make bench``).

    python -m bench                      # the full run: --messages 20000, 1,000,000 intake rows
    python -m bench --quick              # a smoke run of about a minute, results in a temp dir
    python -m bench --messages 50000 --repeats 3 --sections ceiling,service

Sections (all by default, in this order):

    ceiling   the best rate of Python HTTP clients (httpx, httpx over httpx-aiohttp, aiohttp, and
              the service's own SiteClient) POSTing contract bodies to the fast site simulator
              (bench/fastsite.py), and httpx and aiohttp against the threaded exchange.dev.sitesim,
              with EXCHANGE_CONCURRENCY requests in flight; the median of --ceiling-repeats runs
    service   ``exchange run --until-idle`` as a real process on SQLite and on PostgreSQL, single
              requests; delivered messages/s and the ratio to the ceiling
    batch     the same with EXCHANGE_SITE_BATCH_SIZE=--site-batch-size; "not available" when the
              service sent no batch request
    workers   PostgreSQL with 1, 2 and 4 worker processes; no aggregate in flight twice
    intake    intake + coalescing alone (bench/intake_coalesce.py), --intake-rows staging rows
              (SKUs x 10 versions), on SQLite and on PostgreSQL
    budget    what each part of a delivered message costs alone, in microseconds of CPU
              (bench/budget.py): claim + record, the outcome line, judging the answer
    pace      the service at each simulated shop's pace (bench/pace.py)
    brokers   intents per second taken from RabbitMQ and Redis Streams against the JSON intake
              (bench/brokers.py), --broker-intents (10,000) one per body, on SQLite and on
              PostgreSQL; needs the real brokers on 127.0.0.1
    wake      one price committed by another process into an idle ``exchange run`` (default
              poll): p50 / worst of 30, and the idle worker's share of a core over 60 s
              (bench/wake.py), on SQLite and on PostgreSQL
    peer      issue 35's job, 50,000 staged rows (--peer-skus 5,000 x --peer-versions 10) -> one
              delivery per SKU, end to end on SQLite and PostgreSQL, and procrastinate
              (bench/peer.py, pinned in the bench extra) delivering the same 5,000 prices, a
              lock per SKU, httpx, --concurrency at a time, on a PostgreSQL database of its
              own; the service's PostgreSQL rate / the peer's (issue 35's goal: 5x)
    scale     PostgreSQL with 1, 2 and 4 workers against the fast site answering after
              --scale-latency-ms (20), --scale-messages (20,000) prices: the rates against one
              worker's (goals: 1.8x and 3.2x), every run checked as the service rows are
    reload    issue 35 item 3: --reload-skus SKUs (100,000) x 10 versions staged, the batch API
              (--site-batch-size), one worker, end to end on SQLite and PostgreSQL, in rounds
              (--repeats): SKU/s against the goals (1,700 and 1,500), the worker's CPU seconds
              and its PostgreSQL backends'
    growth    claim + record per message with --growth-sizes messages done already in the table
              (10,000, 100,000, 1,000,000; bench/growth.py), on both databases: the curve and
              the ratio of the largest to the smallest (goal: at most 1.25x)
    marketplace-pace
              issue 32 item 6: Ozon, Wildberries and Yandex Market, each its simulator with its
              limits lowered (a reload of --marketplace-prices, 5,000, spans about 25 limit
              windows), on SQLite and PostgreSQL, and Ozon's hour (bench/marketplace_pace.py):
              accepted prices/s over the allowed rate (goal 0.85), refused requests (goal 5 %)

Every service run starts from a fresh database (SQLite file or a PostgreSQL database created and
dropped here; admin URL from EXCHANGE_BENCH_PG, default postgresql://postgres@127.0.0.1:5432/
postgres) holding --messages staged price rows, one per SKU, and a reset site; afterwards it checks
that every message is delivered, that the site saw exactly one effect per message and that no
aggregate was in flight twice. Peak RSS and CPU seconds of each child come from wait4(2); the
whole machine's busy CPU seconds during the run come from /proc/stat (what the workers, the site,
PostgreSQL and anything else together kept busy). Each worker's CPU is also sampled every 20 ms
(bench/cpu.py), which gives its CPU from the site's first effect to its last: delivery alone,
without start-up, intake and coalescing.

The report sets the figures against issue 13 item 7's goals (bench/report.py, ``goals``): the
worker's CPU per single-request message on SQLite at most 1.25 x the floor (the ceiling's best
request + claim and record alone, from the budget section), and the batch API on SQLite at
12,000 messages/s or more. ``--sections ceiling,service,batch,budget`` measures all of them.

Output in --out (default docs/benchmarks, or a fresh temp dir with --quick): results.json (every
raw figure), throughput.png, and the tables between the markers in README.md (created if missing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench import ceiling, cpu, report
from bench import pace as pace_bench
from bench.harness import (
    PG_ADMIN,
    PY,
    ROOT,
    TOKEN,
    ConnectionSampler,
    SiteProcess,
    fresh_database,
    in_flight_overlaps,
    log,
    machine_busy_seconds,
    pg_tables,
    stage_prices,
    state_counts,
    wait_child,
    worker_paces,
)
from exchange.settings import Settings

SECTIONS = (
    "ceiling",
    "service",
    "batch",
    "workers",
    "intake",
    "budget",
    "pace",
    "latency",
    "brokers",
    "wake",
    "peer",
    "scale",
    "growth",
    "reload",
    "fanout",
    "marketplace-pace",
)
CEILING_CLIENTS = ceiling.CLIENTS
THREADED_CLIENTS = ("httpx", "aiohttp")


# -- sections --------------------------------------------------------------------------------


def ceiling_run(
    site: SiteProcess, client: str, count: int, concurrency: int, tag: str
) -> tuple[float, float]:
    """(requests/s, the client process's CPU µs per request) of one ceiling run."""
    site.reset()
    out = subprocess.run(
        [
            PY,
            str(ROOT / "bench" / "ceiling.py"),
            "--client",
            client,
            "--url",
            site.url,
            "--messages",
            str(count),
            "--concurrency",
            str(concurrency),
            "--token",
            TOKEN,
            "--tag",
            tag,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{client}: {out.stderr.strip().splitlines()[-1:]}")
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    if figures["statuses"] != {"200": count}:
        raise RuntimeError(f"{client}: answers {figures['statuses']}, expected {count} x 200")
    return float(figures["rate"]), float(figures["cpu_s"]) / count * 1e6


def ceiling_section(args: argparse.Namespace, fast: SiteProcess, scratch: Path) -> dict[str, Any]:
    rows = []
    threaded = SiteProcess("threaded", scratch)
    try:
        plan = [("fast", c) for c in CEILING_CLIENTS] + [("threaded", c) for c in THREADED_CLIENTS]
        rates: dict[tuple[str, str], list[float]] = defaultdict(list)
        cpus: dict[tuple[str, str], list[float]] = defaultdict(list)
        # Rounds, not blocks: each client is measured once per round, so that noise from the
        # shared machine spreads over all of them instead of hitting one.
        for repeat in range(args.ceiling_repeats):
            for site_kind, client in plan:
                site = fast if site_kind == "fast" else threaded
                tag = f"{site_kind}{repeat}"
                rate, cpu_us = ceiling_run(
                    site, client, args.ceiling_messages, args.concurrency, tag
                )
                rates[(site_kind, client)].append(rate)
                cpus[(site_kind, client)].append(cpu_us)
                log(f"ceiling {client} -> {site_kind} site: {rates[(site_kind, client)][-1]:.0f}/s")
        for site_kind, client in plan:
            runs = rates[(site_kind, client)]
            rows.append(
                {
                    "client": client,
                    "site": site_kind,
                    "rate": statistics.median(runs),
                    "runs": runs,
                    # the client process's CPU per request, median of the runs
                    "cpu_us": statistics.median(cpus[(site_kind, client)]),
                }
            )
    finally:
        threaded.stop()
    best = max((r for r in rows if r["site"] == "fast"), key=lambda r: r["rate"])
    httpx_row = next(r for r in rows if r["site"] == "fast" and r["client"] == "httpx")
    return {
        "messages": args.ceiling_messages,
        "repeats": args.ceiling_repeats,
        "rows": rows,
        "best": {"client": best["client"], "rate": best["rate"], "cpu_us": best["cpu_us"]},
        "httpx": httpx_row["rate"],
    }


def worker_env(
    url: str, site: SiteProcess, worker_id: str, args: argparse.Namespace, site_batch_size: int
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": url,
            "EXCHANGE_SITE_URL": site.url,
            "EXCHANGE_SITE_TOKEN": TOKEN,
            "EXCHANGE_WORKER_ID": worker_id,
            "EXCHANGE_CONCURRENCY": str(args.concurrency),
            "EXCHANGE_LOG_LEVEL": args.log_level,
        }
    )
    if site_batch_size > 1:
        env["EXCHANGE_SITE_BATCH_SIZE"] = str(site_batch_size)
    return env


def service_run(
    args: argparse.Namespace,
    site: SiteProcess,
    scratch: Path,
    *,
    database: str,
    workers: int,
    site_batch_size: int = 1,
    messages: int | None = None,
    versions: int = 1,
) -> dict[str, Any]:
    """One end-to-end run: stage, start the workers together, wait until all are idle, check.

    ``messages`` SKUs (``args.messages`` unless given), each staged in ``versions`` versions:
    ``messages`` deliveries (the latest of each), the other versions cancelled (superseded).
    """
    count = args.messages if messages is None else messages
    with fresh_database(database, scratch) as url:
        stage_prices(url, count, versions)
        site.reset()
        site_cpu = site.cpu_seconds()
        max_seconds = 120 + count * versions / 20
        procs = []
        logs = []
        sampler = ConnectionSampler(url) if database == "postgresql" else None
        if sampler:
            sampler.start()
        started = time.perf_counter()
        busy_before = machine_busy_seconds()
        cpu_sampler = cpu.CpuSampler()
        for n in range(workers):
            log_path = scratch / f"{database}-{workers}w-b{site_batch_size}-{n}.log"
            logs.append(log_path)
            spawned = time.time()
            with log_path.open("w") as out:
                procs.append(
                    subprocess.Popen(
                        [
                            PY,
                            "-m",
                            "exchange",
                            "run",
                            "--until-idle",
                            "--max-seconds",
                            str(max_seconds),
                        ],
                        env=worker_env(url, site, f"bench-w{n}", args, site_batch_size),
                        cwd=scratch,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
            cpu_sampler.watch(procs[-1].pid, spawned)
        cpu_sampler.start()
        try:
            children, reaped = [], []
            for proc in procs:
                children.append(wait_child(proc, max_seconds + 60))
                reaped.append((proc.pid, time.time(), children[-1][2]))
        except BaseException:  # interrupted: leave no worker behind
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
            cpu_sampler.stop()
            raise
        wall = time.perf_counter() - started
        busy_after = machine_busy_seconds()
        cpu_sampler.stop()
        for pid, moment, seconds in reaped:
            cpu_sampler.finish(pid, moment, seconds)
        peak_connections = sampler.stop() if sampler else None
        backend_cpu = sampler.backend_cpu_seconds() if sampler else None
        tables = pg_tables(url) if database == "postgresql" else None
        site_cpu = site.cpu_seconds() - site_cpu
        stats = site.stats()
        states = state_counts(url)
        overlaps = in_flight_overlaps(url)
        paces = worker_paces(url)
    codes = [c[0] for c in children]
    window = (stats["last_effect"] or 0) - (stats["first_effect"] or 0)
    window_cpu = worker_cpu_in_window(cpu_sampler, stats["first_effect"], stats["last_effect"])
    expected = {"delivered": count}
    if versions > 1:
        expected["cancelled"] = count * (versions - 1)
    checks = {
        "exit_codes_zero": codes == [0] * workers,
        "all_delivered": states == expected,
        "one_effect_per_message": stats["effects"] == count
        and stats["distinct_effect_keys"] == count
        and stats["max_effects_per_key"] == 1,
        "no_aggregate_in_flight_twice": overlaps == [],
    }
    result = {
        "database": database,
        "workers": workers,
        "site_batch_size": site_batch_size,
        "batch_requests": stats["batch_requests"],
        "messages": count,
        "versions": versions,
        "staged_rows": count * versions,
        "wall_s": wall,
        "rate": count / wall,
        "site_window_s": window,
        "site_rate": count / window if window > 0 else None,
        "peak_rss_mb": max(c[1] for c in children),
        "peak_rss_mb_each": [c[1] for c in children],
        "worker_cpu_s": sum(c[2] for c in children),
        "worker_cpu_us": sum(c[2] for c in children) / count * 1e6,
        # the workers' CPU from the site's first effect to its last (bench/cpu.py)
        "worker_cpu_window_s": window_cpu,
        "worker_cpu_window_us": None if window_cpu is None else window_cpu / count * 1e6,
        "worker_cpu_window_share": (
            window_cpu / (window * workers) if window_cpu is not None and window > 0 else None
        ),
        "cpu_samples": [len(s) for s in cpu_sampler.samples.values()],
        "site_cpu_s": site_cpu,
        "machine_cpu_s": (
            busy_after - busy_before if busy_after is not None and busy_before is not None else None
        ),
        "cores": os.cpu_count(),
        "exit_codes": codes,
        "peak_pg_connections": peak_connections,
        "pg_backend_cpu_s": backend_cpu,
        "pg_tables": tables,
        "states": states,
        "site_requests": stats["requests"],
        "site_statuses": stats["by_status"],
        "overlaps": overlaps[:5],
        # each worker's concurrency limit and accepted rate as it last wrote them (contract 5c)
        "worker_paces": paces,
        "checks": checks,
        "ok": all(checks.values()),
    }
    if not result["ok"]:
        lines = logs[0].read_text(errors="replace").strip().splitlines()
        errors = [line[:300] for line in lines if re.search(r"Error|Exception|Traceback", line)]
        result["log_errors"] = list(dict.fromkeys(errors))[:5]
        result["log_tail"] = [line[:300] for line in lines[-5:]]
    return result


def worker_cpu_in_window(
    sampler: cpu.CpuSampler, first: float | None, last: float | None
) -> float | None:
    """All workers' CPU seconds between the site's first and last effect (both time.time(),
    as the samples are), or None without effects or with a worker's samples not covering it."""
    if first is None or last is None:
        return None
    spent = [cpu.cpu_between(samples, first, last) for samples in sampler.samples.values()]
    return None if any(s is None for s in spent) else sum(s for s in spent if s is not None)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate (the lower middle one for an even count), with all rates."""
    ordered = sorted(runs, key=lambda r: r["rate"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["runs"] = [r["rate"] for r in runs]
    chosen["ok"] = all(r["ok"] for r in runs)
    return chosen


def log_run(label: str, n: int, total: int, run: dict[str, Any]) -> None:
    flag = "ok" if run["ok"] else f"FAILED {run['checks']}"
    window_us = run["worker_cpu_window_us"]
    log(
        f"{label} [{n + 1}/{total}]: {run['rate']:.0f} msg/s, {run['wall_s']:.1f} s, "
        f"worker CPU {run['worker_cpu_us']:.0f} µs/msg "
        f"({'–' if window_us is None else f'{window_us:.0f}'} in the delivery window), "
        f"peak RSS {run['peak_rss_mb']:.0f} MB, {flag}"
    )


def repeated(args: argparse.Namespace, label: str, **kwargs: Any) -> dict[str, Any]:
    runs = []
    for n in range(args.repeats):
        run = service_run(args, **kwargs)
        runs.append(run)
        log_run(label, n, args.repeats, run)
    return {"label": label, **median_run(runs)}


def interleaved(
    args: argparse.Namespace, plans: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Each plan (a label, ``service_run``'s keywords) ``--repeats`` times in rounds, every plan
    once a round, so that the shared machine's noise falls on all of them alike; the median
    run of each, in the plans' order."""
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in plans}
    for n in range(args.repeats):
        for label, kwargs in plans:
            runs[label].append(service_run(args, **kwargs))
            log_run(label, n, args.repeats, runs[label][-1])
    return [{"label": label, **median_run(runs[label])} for label, _ in plans]


# -- issue 35: the peer, growth, scale ---------------------------------------------------------


def peer_run(args: argparse.Namespace, site: SiteProcess, scratch: Path) -> dict[str, Any]:
    """procrastinate on the issue's job (bench/peer.py, its own process and PostgreSQL
    database), against ``site``; checked: every job succeeded, one effect per job."""
    jobs = args.peer_skus
    with fresh_database("postgresql", scratch) as url:
        site.reset()
        out = subprocess.run(
            [
                PY,
                "-m",
                "bench.peer",
                "--database-url",
                url,
                "--site-url",
                site.url,
                "--token",
                TOKEN,
                "--jobs",
                str(jobs),
                "--versions",
                str(args.peer_versions),
                "--concurrency",
                str(args.concurrency),
            ],
            capture_output=True,
            text=True,
            timeout=600 + jobs / 5,
            check=False,
            cwd=ROOT,
        )
    if out.returncode != 0:
        raise RuntimeError(f"bench.peer: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    stats = site.stats()
    window = (stats["last_effect"] or 0) - (stats["first_effect"] or 0)
    checks = {
        "all_succeeded": figures["statuses"] == {"succeeded": jobs},
        "one_effect_per_job": stats["effects"] == jobs
        and stats["distinct_effect_keys"] == jobs
        and stats["max_effects_per_key"] == 1,
    }
    return {
        **figures,
        "site_window_s": window,
        "site_rate": jobs / window if window > 0 else None,
        "checks": checks,
        "ok": all(checks.values()),
    }


def peer_section(args: argparse.Namespace, site: SiteProcess, scratch: Path) -> dict[str, Any]:
    """Issue 35, item 7: the service's whole job (``--peer-skus`` SKUs × ``--peer-versions``
    staged rows, one delivery per SKU, end to end) on SQLite and PostgreSQL, and procrastinate
    delivering the same SKUs' latest prices, in rounds (``--repeats``); the ratio of the
    service's PostgreSQL rate to the peer's."""
    skus, versions = args.peer_skus, args.peer_versions
    plans = [
        (
            f"{db}, {skus * versions:,} rows → {skus:,}",
            {
                "site": site,
                "scratch": scratch,
                "database": db,
                "workers": 1,
                "messages": skus,
                "versions": versions,
            },
        )
        for db in ("sqlite", "postgresql")
    ]
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in plans}
    peers: list[dict[str, Any]] = []
    for n in range(args.repeats):
        for label, kwargs in plans:
            runs[label].append(service_run(args, **kwargs))
            log_run(label, n, args.repeats, runs[label][-1])
        peers.append(peer_run(args, site, scratch))
        flag = "ok" if peers[-1]["ok"] else f"FAILED {peers[-1]['checks']}"
        log(f"peer [{n + 1}/{args.repeats}]: {peers[-1]['rate']:.0f} jobs/s, {flag}")
    service = [{"label": label, **median_run(runs[label])} for label, _ in plans]
    ordered = sorted(peers, key=lambda r: r["rate"])
    peer = {**ordered[(len(ordered) - 1) // 2], "runs": [r["rate"] for r in peers]}
    peer["ok"] = all(r["ok"] for r in peers)
    sqlite, pg = service
    return {
        "skus": skus,
        "versions": versions,
        "service": service,
        "peer": peer,
        "ratio": pg["rate"] / peer["rate"],
        "ratio_at_site": (
            pg["site_rate"] / peer["site_rate"] if pg["site_rate"] and peer["site_rate"] else None
        ),
        "postgresql_time_over_sqlite": pg["wall_s"] / sqlite["wall_s"],
        "load": [round(x, 2) for x in os.getloadavg()],
    }


RELOAD_GOALS = {"sqlite": 1_700, "postgresql": 1_500}


def reload_section(args: argparse.Namespace, site: SiteProcess, scratch: Path) -> dict[str, Any]:
    """Issue 35, item 3: a reload, ``--reload-skus`` SKUs × 10 versions, through the batch API,
    end to end, on both databases in rounds; each median against its goal."""
    plans = [
        (
            f"{db}, reload {args.reload_skus:,} × 10, batch {args.site_batch_size}",
            {
                "site": site,
                "scratch": scratch,
                "database": db,
                "workers": 1,
                "site_batch_size": args.site_batch_size,
                "messages": args.reload_skus,
                "versions": 10,
            },
        )
        for db in ("sqlite", "postgresql")
    ]
    rows = interleaved(args, plans)
    for row in rows:
        row["goal"] = RELOAD_GOALS[row["database"]]
        row["of_goal"] = row["rate"] / row["goal"]
    return {"rows": rows, "load": [round(x, 2) for x in os.getloadavg()]}


def scale_section(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Issue 35, item 5: 1, 2 and 4 workers on PostgreSQL against a site that takes
    ``--scale-latency-ms`` per request (the shop, not the cores, the limit), ``--scale-messages``
    prices, in rounds; the rates against one worker's, contract 4's checks after each run."""
    site = SiteProcess("fast", scratch, latency_ms=args.scale_latency_ms)
    try:
        plans = [
            (
                f"postgresql, {n} worker{'s' if n > 1 else ''}, {args.scale_latency_ms:g} ms site",
                {
                    "site": site,
                    "scratch": scratch,
                    "database": "postgresql",
                    "workers": n,
                    "messages": args.scale_messages,
                },
            )
            for n in (1, 2, 4)
        ]
        rows = interleaved(args, plans)
    finally:
        site.stop()
    one = rows[0]
    for row in rows:
        row["ratio"] = row["rate"] / one["rate"]
        row["ratio_at_site"] = (
            row["site_rate"] / one["site_rate"] if row["site_rate"] and one["site_rate"] else None
        )
    return {
        "latency_ms": args.scale_latency_ms,
        "messages": args.scale_messages,
        "rows": rows,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def growth_section(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Issue 35, item 6: bench/growth.py in its own process, on both databases."""
    out = subprocess.run(
        [
            PY,
            "-m",
            "bench.growth",
            "--sizes",
            ",".join(str(size) for size in args.growth_sizes),
            "--messages",
            str(args.growth_messages),
            "--rounds",
            str(args.growth_rounds),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=4 * 3600,
        check=False,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.growth: {out.stderr.strip().splitlines()[-1:]}")
    rows: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    from bench.growth import table

    log("\n" + table(rows))
    return rows


def intake_section(args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    rows = []
    for database in ("sqlite", "postgresql"):
        with fresh_database(database, scratch) as url:
            proc = subprocess.Popen(
                [
                    PY,
                    str(ROOT / "bench" / "intake_coalesce.py"),
                    "--skus",
                    str(max(1, args.intake_rows // 10)),
                    "--versions",
                    "10",
                    "--database-url",
                    url,
                    "--json",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=scratch,
            )
            assert proc.stdout is not None and proc.stderr is not None
            out, err = proc.stdout.read(), proc.stderr.read()
            code, peak, cpu = wait_child(proc, 7200)
        if code != 0:
            raise RuntimeError(f"intake on {database}: exit {code}: {err.strip()[-300:]}")
        figures = json.loads(out.strip().splitlines()[-1])
        figures.update(peak_rss_mb=peak, cpu_s=cpu, database=database)
        rows.append(figures)
        log(
            f"intake {database}: {figures['rows']} rows, intake {figures['intake_s']:.1f} s "
            f"({figures['intake_ratio']:.2f}x the staging INSERT, CPU "
            f"{figures.get('intake_cpu_ratio')}x), coalesce {figures['coalesce_s']:.1f} s, "
            f"peak RSS {peak:.0f} MB, load {figures['load_average']}"
        )
    return rows


# -- the machine -----------------------------------------------------------------------------


def budget_section(args: argparse.Namespace) -> dict[str, Any]:
    """bench/budget.py in its own process: each part of a message's cost alone."""
    out = subprocess.run(
        [PY, "-m", "bench.budget", "--messages", str(args.messages), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.budget: {out.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    log(f"budget: {result}")
    return result


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=10) as admin:
            row = admin.execute("SHOW server_version").fetchone()
            pg_version = str(row[0]) if row else "unknown"
    except psycopg.Error as exc:
        pg_version = f"unreachable ({type(exc).__name__})"
    commit = "unknown"
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if dirty:
            commit += " (with uncommitted changes)"
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "postgresql": pg_version,
        "sqlite": sqlite3.sqlite_version,
        "commit": commit,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# -- main ------------------------------------------------------------------------------------


def pace_section(args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    """The service at each simulated shop's pace (bench/pace.py), with 32 in flight; the
    plot of pace and limit over time goes to pace.png beside results.json."""
    runs = []
    for shop in pace_bench.SHOPS.values():
        log(f"pace: {shop.name} (capacity {shop.capacity:.0f}/s, {shop.skus} SKUs)")
        runs.append(pace_bench.run_shop(shop, scratch, concurrency=32))
    args.out.mkdir(parents=True, exist_ok=True)
    pace_bench.plot(runs, args.out / "pace.png")
    log("\n" + pace_bench.table(runs))
    return [{k: v for k, v in r.items() if k != "series"} for r in runs]


def latency_section(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """bench/latency.py: a correction's delay during a reload (6,000 and 60,000 prices; 600
    with --quick) and a row's at idle, on both databases."""
    from bench import latency

    sizes = (600,) if args.quick else (6_000, 60_000)
    figures: dict[str, Any] = {"during_reload": [], "at_idle": []}
    for db in ("sqlite", "postgresql"):
        for size in sizes:
            with fresh_database(db, scratch) as url:
                row = {"database": db, **latency.during_reload(url, size)}
            log(f"latency during a reload: {row}")
            figures["during_reload"].append(row)
        with fresh_database(db, scratch) as url:
            row = {"database": db, **latency.at_idle(url)}
        log(f"latency at idle: {row}")
        figures["at_idle"].append(row)
    return figures


def wake_section(args: argparse.Namespace) -> list[dict[str, Any]]:
    """bench/wake.py: one price committed by another process into an idle ``exchange run``
    (default poll), p50 / worst of 30, and the idle worker's CPU over 60 s (10 rows, 10 s with
    --quick), on both databases."""
    from bench import wake

    rows, idle = (10, 10.0) if args.quick else (wake.ROWS, wake.IDLE_SECONDS)
    found = wake.measure(["sqlite", "postgresql"], rows, idle)
    log("\n" + wake.table(found))
    return found


def brokers_section(args: argparse.Namespace) -> list[dict[str, Any]]:
    from bench import brokers

    rows = brokers.measure(args.broker_intents, 1, ["sqlite", "postgresql"])
    log("\n" + brokers.table(rows))
    if not all(row["ok"] for row in rows):
        raise RuntimeError("brokers: not every intent was staged once")
    return rows


def marketplace_pace_section(args: argparse.Namespace) -> dict[str, Any]:
    """bench/marketplace_pace.py (issue 32 item 6): each marketplace's simulator with its limits
    lowered, ``--marketplace-prices`` prices a reload, on both databases, and Ozon's hour; the
    table also goes to docs/benchmarks/marketplaces.md."""
    from bench import marketplace_pace

    found = marketplace_pace.measure(
        args.marketplace_prices,
        databases=("sqlite", "postgresql"),
        limit_skus=2 if args.quick else 10,
    )
    log("\n" + marketplace_pace.table(found))
    marketplace_pace.write(found, args.out)
    if not all(r["ok"] for r in found["rows"] + found["ozon_hour"]):
        raise RuntimeError("marketplace-pace: not every price delivered, or Ozon's hour failed")
    return found


def fanout_section(args: argparse.Namespace) -> dict[str, Any]:
    """bench/fanout.py (issue 31 item 9): ``--fanout-prices`` prices to 1, 2 and 4 channels of
    loopback site simulators, CPU and wall per price per channel, each extra channel's cost
    over the first's, on both databases; the table also goes to docs/benchmarks/fanout.md."""
    from bench import fanout

    found = fanout.measure(args.fanout_prices)
    log("\n" + fanout.table(found))
    fanout.write(found, args.out)
    if not all(row["ok"] for row in found["rows"]):
        raise RuntimeError("fanout: not every price was delivered once on every channel")
    return found


def arguments(argv: list[str] | None) -> argparse.Namespace:
    default_concurrency = Settings.model_fields["concurrency"].default
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--messages", type=int, default=None, help="per service run (20000)")
    parser.add_argument("--ceiling-messages", type=int, default=None, help="per client (10000)")
    parser.add_argument("--ceiling-repeats", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="runs per service row (median)")
    parser.add_argument("--intake-rows", type=int, default=None, help="(1000000)")
    parser.add_argument("--broker-intents", type=int, default=None, help="(10000)")
    parser.add_argument("--site-batch-size", type=int, default=100)
    parser.add_argument("--peer-skus", type=int, default=None, help="peer: SKUs (5000)")
    parser.add_argument("--peer-versions", type=int, default=10, help="peer: versions a SKU")
    parser.add_argument("--reload-skus", type=int, default=None, help="reload: SKUs (100000)")
    parser.add_argument(
        "--fanout-prices", type=int, default=None, help="fanout: prices per run (100000)"
    )
    parser.add_argument(
        "--marketplace-prices", type=int, default=None, help="marketplace-pace: prices (5000)"
    )
    parser.add_argument("--scale-messages", type=int, default=None, help="scale: prices (20000)")
    parser.add_argument("--scale-latency-ms", type=float, default=20.0, help="scale: the site's")
    parser.add_argument(
        "--growth-sizes",
        type=growth_sizes,
        default=None,
        help="growth: messages already in the table (10000,100000,1000000)",
    )
    parser.add_argument("--growth-messages", type=int, default=None, help="growth: (10000)")
    parser.add_argument("--growth-rounds", type=int, default=None, help="growth: (3)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=int(os.environ.get("EXCHANGE_CONCURRENCY") or default_concurrency),
        help="requests in flight, the same for clients and service "
        "(EXCHANGE_CONCURRENCY, else the service's default)",
    )
    parser.add_argument("--log-level", default="INFO", help="the workers' EXCHANGE_LOG_LEVEL")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    parser.add_argument("--out", type=Path, default=None, help="where results go")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="RESULTS_JSON",
        help="measure nothing: write README.md tables and throughput.png in --out from a "
        "results.json of an earlier run",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {"messages": (1_000, 20_000), "ceiling_messages": (1_000, 10_000)}
    defaults["intake_rows"] = (20_000, 1_000_000)
    defaults["broker_intents"] = (1_000, 10_000)
    defaults["peer_skus"] = (300, 5_000)
    defaults["scale_messages"] = (1_000, 20_000)
    defaults["reload_skus"] = (1_000, 100_000)
    defaults["fanout_prices"] = (1_000, 100_000)
    defaults["marketplace_prices"] = (200, 5_000)
    defaults["growth_sizes"] = ([10_000, 20_000], [10_000, 100_000, 1_000_000])
    defaults["growth_messages"] = (1_000, 10_000)
    defaults["growth_rounds"] = (1, 3)
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    if quick:
        args.ceiling_repeats = 1
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    problems = [f"unknown section(s) {', '.join(unknown)}"] if unknown else []
    for name in (
        "messages",
        "ceiling_messages",
        "ceiling_repeats",
        "repeats",
        "intake_rows",
        "broker_intents",
        "concurrency",
        "site_batch_size",
        "peer_skus",
        "peer_versions",
        "reload_skus",
        "fanout_prices",
        "marketplace_prices",
        "scale_messages",
        "growth_messages",
        "growth_rounds",
    ):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be 1 or more")
    if args.scale_latency_ms < 0:
        problems.append("--scale-latency-ms must be 0 or more")
    if problems:
        parser.exit(2, f"python -m bench: {'; '.join(problems)}\n")
    args.sections = sections
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="bench-")) if quick else ROOT / "docs/benchmarks"
    return args


def growth_sizes(text: str) -> list[int]:
    """``10000,100000`` -> [10000, 100000]: counts of at least the growth seed's 10,000."""
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 10_000:
        raise argparse.ArgumentTypeError("comma-separated counts of 10000 or more")
    return sizes


def section(results: dict[str, Any], name: str, thunk: Any) -> None:
    """Run a section; a failure is recorded in the results and the run goes on."""
    try:
        results[name] = thunk()
    except Exception as exc:
        log(f"{name} FAILED: {type(exc).__name__}: {exc}")
        results.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.render is not None:
        try:
            results = json.loads(args.render.read_text())
        except (OSError, ValueError) as exc:
            sys.exit(f"python -m bench: cannot read {args.render}: {exc}")
        args.out.mkdir(parents=True, exist_ok=True)
        report.plot(results, args.out / "throughput.png")
        report.update_readme(results, args.out / "README.md")
        print(report.tables(results))
        return
    # SIGTERM unwinds like Ctrl-C: the site process stops and the databases are dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": machine(),
        "parameters": {
            "messages": args.messages,
            "ceiling_messages": args.ceiling_messages,
            "ceiling_repeats": args.ceiling_repeats,
            "repeats": args.repeats,
            "intake_rows": args.intake_rows,
            "concurrency": args.concurrency,
            "site_batch_size": args.site_batch_size,
            "log_level": args.log_level,
            "peer_skus": args.peer_skus,
            "peer_versions": args.peer_versions,
            "reload_skus": args.reload_skus,
            "fanout_prices": args.fanout_prices,
            "marketplace_prices": args.marketplace_prices,
            "scale_messages": args.scale_messages,
            "scale_latency_ms": args.scale_latency_ms,
            "growth_sizes": args.growth_sizes,
            "growth_messages": args.growth_messages,
            "growth_rounds": args.growth_rounds,
            "quick": args.quick,
            "sections": args.sections,
        },
    }
    log(f"bench: {results['parameters']}")
    with tempfile.TemporaryDirectory(prefix="bench-scratch-") as tmp:
        scratch = Path(tmp)
        fast = SiteProcess("fast", scratch)
        try:
            if "ceiling" in args.sections:
                section(results, "ceiling", lambda: ceiling_section(args, fast, scratch))
            common = {"site": fast, "scratch": scratch}
            service: list[dict[str, Any]] = []
            results["service"] = service
            if "service" in args.sections:
                for db in ("sqlite", "postgresql"):
                    section(
                        results,
                        f"_service_{db}",
                        lambda db=db: service.append(
                            repeated(args, f"{db}, single", database=db, workers=1, **common)
                        ),
                    )
            if "batch" in args.sections:
                for db in ("sqlite", "postgresql"):
                    label = f"{db}, batch {args.site_batch_size}"
                    section(
                        results,
                        f"_batch_{db}",
                        lambda db=db, label=label: service.append(
                            repeated(
                                args,
                                label,
                                database=db,
                                workers=1,
                                site_batch_size=args.site_batch_size,
                                **common,
                            )
                        ),
                    )
            if "workers" in args.sections:
                scaling: list[dict[str, Any]] = []
                results["workers"] = scaling
                for n in (1, 2, 4):
                    section(
                        results,
                        f"_workers_{n}",
                        lambda n=n: scaling.append(
                            repeated(
                                args,
                                f"postgresql, {n} worker{'s' if n > 1 else ''}",
                                database="postgresql",
                                workers=n,
                                **common,
                            )
                        ),
                    )
            if "peer" in args.sections:
                section(results, "peer", lambda: peer_section(args, fast, scratch))
            if "reload" in args.sections:
                section(results, "reload", lambda: reload_section(args, fast, scratch))
        finally:
            fast.stop()
        if "scale" in args.sections:
            section(results, "scale", lambda: scale_section(args, scratch))
        if "growth" in args.sections:
            section(results, "growth", lambda: growth_section(args))
        if "intake" in args.sections:
            section(results, "intake", lambda: intake_section(args, scratch))
        if "budget" in args.sections:
            section(results, "budget", lambda: budget_section(args))
        if "pace" in args.sections:
            section(results, "pace", lambda: pace_section(args, scratch))
        if "latency" in args.sections:
            section(results, "latency", lambda: latency_section(args, scratch))
        if "brokers" in args.sections:
            section(results, "brokers", lambda: brokers_section(args))
        if "wake" in args.sections:
            section(results, "wake", lambda: wake_section(args))
        if "fanout" in args.sections:
            section(results, "fanout", lambda: fanout_section(args))
        if "marketplace-pace" in args.sections:
            section(results, "marketplace-pace", lambda: marketplace_pace_section(args))
    for key in [k for k in results if k.startswith("_")]:
        results.pop(key)  # the appenders' return values (None)
    results["goals"] = report.goals(
        results.get("ceiling"), results.get("budget"), results["service"]
    )
    results["machine"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["machine"]["bench_seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    report.plot(results, args.out / "throughput.png")
    report.update_readme(results, args.out / "README.md")
    print(report.tables(results))
    log(f"results in {args.out} ({results['machine']['bench_seconds']:.0f} s)")
    peer = results.get("peer") or {}
    checked = [*peer.get("service", []), peer["peer"]] if peer else []
    checked += (results.get("scale") or {}).get("rows", [])
    checked += (results.get("reload") or {}).get("rows", [])
    failed = (
        results.get("errors")
        or any(
            not row["ok"]
            for row in results["service"] + results.get("workers", [])
            if row["batch_requests"] or row["site_batch_size"] == 1
        )
        or any(not row["ok"] for row in checked)
    )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
