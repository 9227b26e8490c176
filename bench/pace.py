"""Benchmark: the service at the shop's pace (issue 13, contract 5c).

    python -m bench.pace [--shops rate-limit,worker-pool,halving] [--out DIR] [--json]

Against each simulated shop (``exchange.dev.sitesim``: a rate limit of 120 requests/s with
429 + ``Retry-After: 1``; a pool of 4 PHP workers at 25 ms with a queue of 8, 160 requests/s;
the rate limit whose capacity halves 10 s into the run and recovers at 20 s), one worker with
``EXCHANGE_CONCURRENCY=32`` and otherwise default settings (attempts, backoff, batch size)
delivers one price per SKU on a fresh SQLite database, and a sampler records every 0.1 s the
worker's limit, its paced rate, the requests in flight, and what the site answered.

The goals (issue 13, item 6), each measured here:

- ``capacity_share``: delivered messages / what the shop could take over the same time (its
  capacity integrated from the first request to the last effect) >= 0.85;
- ``refused_share``: refused requests (429, 503) / all requests <= 0.05;
- ``to_90_s``: seconds from the first request until a 1-s window delivered >= 0.9 x capacity,
  <= 5;
- ``halved_settle_s`` (the halving shop): seconds from the halving until every 1-s window of
  the next ``SETTLED_FOR`` seconds (or up to the recovery) has refused < 5 % of its requests,
  <= 5 (a later probe past the new ceiling is the pace at work, not the halving's aftermath;
  it shows in ``refused_share`` and in the plot).

And, in every run: nothing quarantined, every message delivered once.

The site runs in this process (threads) and the worker on its own event loop: the shops'
capacities (120-160 requests/s) are far below what either costs, so they do not disturb each
other (the ``fast`` benchmarks measure the service's own speed). ``--out`` writes
``pace.json`` and ``pace.png`` (per shop: limit, paced rate, delivered/s, refused/s over time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import migrate_sqlite
from exchange.dev.sitesim import Faults, SiteSimulator, halving_shop, pool_shop, rate_limited_shop
from exchange.dev.testing import one_channel_messages, price_row, stage
from exchange.runner import run_until_idle
from exchange.settings import load_settings

SAMPLE = 0.1  # seconds between samples
SETTLED_FOR = 5.0  # seconds the refusals must stay under 5 % to count as settled
GOALS = {"capacity_share": 0.85, "refused_share": 0.05, "to_90_s": 5.0, "halved_settle_s": 5.0}


@dataclass(frozen=True)
class Shop:
    name: str
    faults: Callable[[], Faults]
    capacity: float  # requests/s at full capacity
    skus: int
    halve_at: float | None = None
    recover_at: float | None = None

    def capacity_at(self, t: float) -> float:
        halved = self.halve_at is not None and self.recover_at is not None
        if halved and self.halve_at <= t < self.recover_at:  # type: ignore[operator]
            return self.capacity / 2
        return self.capacity


SHOPS = {
    "rate-limit": Shop("rate-limit", lambda: rate_limited_shop(120.0), 120.0, 1800),
    "worker-pool": Shop(
        "worker-pool",
        lambda: pool_shop(workers=4, service_seconds=0.025, queue=8),
        160.0,
        2400,
    ),
    "halving": Shop(
        "halving",
        lambda: halving_shop(120.0, halve_at=10.0, recover_at=20.0),
        120.0,
        3000,
        halve_at=10.0,
        recover_at=20.0,
    ),
}


# Not in the default run: a full reload at a pool's capacity, a minute long (six RTT_PERIODs),
# where a pace that learned its no-load RTT from the busy pool would fill its queue.
LONG_SHOPS = {
    "worker-pool-long": Shop(
        "worker-pool-long",
        lambda: pool_shop(workers=4, service_seconds=0.025, queue=8),
        160.0,
        9600,
    ),
}


def run_shop(shop: Shop, directory: Path, concurrency: int = 32) -> dict[str, Any]:
    url = migrate_sqlite(directory / f"pace-{shop.name}.db")
    engine = make_engine(url)
    stage(engine, [price_row(f"SKU-{n:05d}", 1, f"{n}.00") for n in range(shop.skus)])
    samples: list[dict[str, Any]] = []
    with SiteSimulator(token="bench-token", faults=shop.faults()) as site:
        settings = load_settings(
            database_url=url,
            staging_url=None,
            site_url=site.url,
            site_token="bench-token",
            site_token_file=None,
            worker_id=f"pace-{shop.name}",
            concurrency=concurrency,
            poll_interval=0.05,
            log_level="WARNING",
        )
        worker = bootstrap.worker(settings, engine)

        async def go() -> int:
            async def sample() -> None:
                started: float | None = None
                while True:
                    now = time.monotonic()
                    by_status = site.requests_by_status()
                    if started is None and sum(by_status.values()):
                        started = now
                    figures = worker.pace_figures(now)
                    samples.append(
                        {
                            "t": None if started is None else round(now - started, 3),
                            "limit": figures["limit"],
                            "in_flight": figures["in_flight"],
                            "paced_rate": figures["paced_rate"],
                            "hold_s": figures["hold_s"],
                            "ok": by_status[200],
                            "refused": by_status[429] + by_status[503],
                            "requests": sum(by_status.values()),
                        }
                    )
                    await asyncio.sleep(SAMPLE)

            sampler = asyncio.create_task(sample())
            try:
                return await run_until_idle(
                    worker, max_seconds=180, poll_interval=settings.poll_interval
                )
            finally:
                sampler.cancel()
                await worker.target.aclose()

        code = asyncio.run(go())
        by_status = site.requests_by_status()
        effects = site.effect_counts()
    m = one_channel_messages()
    with transaction(engine, read_only=True) as connection:
        states = dict(connection.execute(select(m.c.state, func.count()).group_by(m.c.state)).all())
    engine.dispose()
    series = [s for s in samples if s["t"] is not None]
    return {
        "shop": shop.name,
        "capacity": shop.capacity,
        "skus": shop.skus,
        "concurrency": concurrency,
        "exit_code": code,
        "states": states,
        "double_effects": sum(1 for n in effects.values() if n > 1),
        "requests_by_status": {str(k): v for k, v in sorted(by_status.items())},
        **figures_of(shop, series),
        "series": series,
    }


def run_shop_workers(
    shop: Shop, directory: Path, workers: int, concurrency: int = 32
) -> dict[str, Any]:
    """The same shop, with ``workers`` ``exchange run --until-idle`` processes sharing one
    PostgreSQL database and the site (no rate cap set: each runs its own pace). Only the
    site's side is sampled (the workers' paces live in their processes)."""
    import os
    import subprocess

    from bench.harness import PY, fresh_database

    with fresh_database("postgresql", directory) as url:
        engine = make_engine(url)
        stage(engine, [price_row(f"SKU-{n:05d}", 1, f"{n}.00") for n in range(shop.skus)])
        series: list[dict[str, Any]] = []
        with SiteSimulator(token="bench-token", faults=shop.faults()) as site:
            env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
            env.update(
                EXCHANGE_DATABASE_URL=url,
                EXCHANGE_SITE_URL=site.url,
                EXCHANGE_SITE_TOKEN="bench-token",
                EXCHANGE_CONCURRENCY=str(concurrency),
                EXCHANGE_POLL_INTERVAL="0.05",
                EXCHANGE_LOG_LEVEL="WARNING",
            )
            procs = [
                subprocess.Popen(
                    [PY, "-m", "exchange", "run", "--until-idle", "--max-seconds", "180"],
                    env={**env, "EXCHANGE_WORKER_ID": f"pace-{i}"},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for i in range(workers)
            ]
            started: float | None = None
            while any(p.poll() is None for p in procs):
                now = time.monotonic()
                by_status = site.requests_by_status()
                if started is None and sum(by_status.values()):
                    started = now
                if started is not None:
                    series.append(
                        {
                            "t": round(now - started, 3),
                            "limit": None,
                            "in_flight": None,
                            "paced_rate": None,
                            "hold_s": None,
                            "ok": by_status[200],
                            "refused": by_status[429] + by_status[503],
                            "requests": sum(by_status.values()),
                        }
                    )
                time.sleep(SAMPLE)
            codes = [p.wait() for p in procs]
            by_status = site.requests_by_status()
            effects = site.effect_counts()
        m = one_channel_messages()
        with transaction(engine, read_only=True) as connection:
            states = dict(
                connection.execute(select(m.c.state, func.count()).group_by(m.c.state)).all()
            )
        engine.dispose()
    return {
        "shop": f"{shop.name}, {workers} workers (PostgreSQL)",
        "capacity": shop.capacity,
        "skus": shop.skus,
        "concurrency": concurrency,
        "exit_code": max(codes),
        "states": states,
        "double_effects": sum(1 for n in effects.values() if n > 1),
        "requests_by_status": {str(k): v for k, v in sorted(by_status.items())},
        **figures_of(shop, series),
        "series": series,
    }


def figures_of(shop: Shop, series: list[dict[str, Any]]) -> dict[str, Any]:
    """The goals' figures from the samples (see the module docstring)."""
    if len(series) < 2:
        return {}
    last = series[-1]
    done = next((s for s in series if s["ok"] >= last["ok"]), last)
    duration = max(done["t"], SAMPLE)
    steps = int(duration / SAMPLE)
    could = sum(shop.capacity_at(i * SAMPLE) * SAMPLE for i in range(steps)) or 1.0
    windows = _windows(series, 1.0)
    to_90 = next(
        (t for t, ok, _, _ in windows if ok >= 0.9 * shop.capacity_at(t - 0.5)),
        None,
    )
    result: dict[str, Any] = {
        "delivery_s": round(duration, 2),
        "delivered_per_s": round(last["ok"] / duration, 1),
        "capacity_share": round(last["ok"] / could, 3),
        "refused_share": round(last["refused"] / max(1, last["requests"]), 4),
        "to_90_s": None if to_90 is None else round(to_90, 2),
    }
    if shop.halve_at is not None and shop.recover_at is not None:
        halve_at, recover_at = shop.halve_at, shop.recover_at
        after = [(t, share) for t, _, _, share in windows if halve_at + 1.0 <= t <= recover_at]
        settle = None
        for i, (t, _) in enumerate(after):
            calm = [share for u, share in after[i:] if u <= t + SETTLED_FOR]
            if all(share < 0.05 for share in calm):
                settle = t - halve_at
                break
        result["halved_settle_s"] = None if settle is None else round(settle, 2)
    result["goals_met"] = {
        "capacity_share": result["capacity_share"] >= GOALS["capacity_share"],
        "refused_share": result["refused_share"] <= GOALS["refused_share"],
        "to_90_s": to_90 is not None and to_90 <= GOALS["to_90_s"],
        **(
            {"halved_settle_s": settle is not None and settle <= GOALS["halved_settle_s"]}
            if "halved_settle_s" in result
            else {}
        ),
    }
    return result


def _windows(series: list[dict[str, Any]], width: float) -> list[tuple[float, float, int, float]]:
    """(window end, delivered/s, refused, refused share) for each sample, over ``width`` s."""
    out = []
    j = 0
    for s in series:
        while series[j]["t"] < s["t"] - width:
            j += 1
        first = series[j]
        span = max(s["t"] - first["t"], SAMPLE)
        if span < width * 0.9:
            continue
        ok = s["ok"] - first["ok"]
        refused = s["refused"] - first["refused"]
        share = refused / max(1, ok + refused)
        out.append((s["t"], ok / span, refused, share))
    return out


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 3.6 * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        series = result["series"]
        ts = [s["t"] for s in series]
        windows = {round(t, 3): (ok, refused) for t, ok, refused, _ in _windows(series, 1.0)}
        delivered = [windows.get(round(t, 3), (None, None))[0] for t in ts]
        refused = [windows.get(round(t, 3), (None, None))[1] for t in ts]
        ax.plot(ts, delivered, label="delivered/s (1 s window)", color="tab:green")
        ax.plot(ts, refused, label="refused/s (1 s window)", color="tab:red")
        ax.plot(ts, [s["paced_rate"] for s in series], label="paced rate (req/s)", color="tab:blue")
        capacity = [result["capacity"] for _ in ts]
        if result["shop"] == "halving":
            shop = SHOPS["halving"]
            capacity = [shop.capacity_at(t) for t in ts]
        ax.plot(ts, capacity, label="shop capacity", color="grey", linestyle="--")
        ax.set_ylabel("requests/s")
        ax.set_xlabel("s since the first request")
        ax2 = ax.twinx()
        ax2.step(ts, [s["limit"] for s in series], label="limit (in flight)", color="tab:purple")
        ax2.set_ylabel("limit")
        ax2.set_ylim(0, result["concurrency"] + 1)
        ax.set_title(
            f"{result['shop']}: {result['capacity_share']:.0%} of capacity, "
            f"{result['refused_share']:.1%} refused, 90 % within {result['to_90_s']} s"
            + (
                f", settled {result['halved_settle_s']} s after halving"
                if "halved_settle_s" in result
                else ""
            )
        )
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| shop | capacity | delivered/s | share of capacity (>= 0.85) | refused (<= 5 %) | "
        "90 % of capacity after (<= 5 s) | refusals < 5 % after halving (<= 5 s) | quarantined |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        settle = r.get("halved_settle_s", "n/a")
        rows.append(
            f"| {r['shop']} | {r['capacity']:.0f}/s | {r['delivered_per_s']} | "
            f"{r['capacity_share']:.2f} | {r['refused_share']:.1%} | {r['to_90_s']} s | "
            f"{settle}{' s' if settle not in ('n/a', None) else ''} | "
            f"{r['states'].get('quarantined', 0)} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pace", description=__doc__)
    parser.add_argument("--shops", default=",".join(SHOPS))
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", type=Path, default=None, help="writes pace.json and pace.png")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="more than 1: that many worker processes on PostgreSQL (no plot of the pace)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-pace-") as tmp:
        for name in [s.strip() for s in args.shops.split(",") if s.strip()]:
            shop = SHOPS.get(name) or LONG_SHOPS.get(name)
            if shop is None:
                known = ", ".join([*SHOPS, *LONG_SHOPS])
                sys.exit(f"python -m bench.pace: unknown shop {name}; known: {known}")
            print(f"pace: {name} ...", file=sys.stderr, flush=True)
            if args.workers > 1:
                run = run_shop_workers(shop, Path(tmp), args.workers, args.concurrency)
            else:
                run = run_shop(shop, Path(tmp), args.concurrency)
            results.append(run)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        suffix = "" if args.workers == 1 else f"-{args.workers}-workers"
        (args.out / f"pace{suffix}.json").write_text(json.dumps(results, indent=2) + "\n")
        if args.workers == 1:
            plot(results, args.out / "pace.png")
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "series"} for r in results]))
    else:
        print(table(results))


if __name__ == "__main__":
    main()
