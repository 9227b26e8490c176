"""A full reload of prices against each target's simulator, in one run (contract 10, issue 15
item 7): ``python -m bench.targets [--messages 20000] [--database sqlite|postgresql]``.

For each target (api with single requests, bitrix, woocommerce) a fresh
database holding --messages price rows (one per SKU), a fresh simulator, and the real worker run
in this process until idle (``runner.run_until_idle``, as ``exchange run --until-idle``). Printed
and written to --out as JSON: delivered messages/s, the HTTP requests the shop received, and a
check that every message was delivered and the shop holds every price. The simulators are
threaded Python servers in the same process as the worker: the figures compare the targets'
request patterns on one machine, not any real shop's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import deliveries
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.dbkit import pg_database
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.woosim import WooSimulator
from exchange.intake.stage import stage
from exchange.runner import run_until_idle
from exchange.settings import load_settings

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
COMMON: dict[str, Any] = dict(
    staging_url=None,
    site_token_file=None,
    worker_id="bench-targets",
    poll_interval=0.01,
    batch_size=1000,
    concurrency=8,
    lease_seconds=120,
    max_attempts=5,
    retry_base_delay=0.01,
    retry_max_delay=0.5,
    http_timeout=30.0,
)


def rows(count: int) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        sku = f"SKU-{n:06d}"
        payload = {"sku": sku, "price": f"{100 + n % 9000}.{n % 100:02d}", "currency": "RUB"}
        payload["price_type"] = "retail"
        out.append(
            {
                "kind": "price",
                "aggregate": sku,
                "aggregate_version": 1,
                "payload": json.dumps(payload),
                "schema_version": "1",
                "source_ref": "bench",
            }
        )
    return out


class Database(AbstractContextManager[str]):
    """An empty database (``one`` migrates it); a PostgreSQL one is dropped afterwards."""

    def __init__(self, kind: str, scratch: Path) -> None:
        self.kind, self.scratch = kind, scratch
        self.name = f"bench_targets_{uuid.uuid4().hex[:8]}"
        self._pg = pg_database(PG_ADMIN, migrated=False)

    def __enter__(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.scratch / (self.name + '.db')}"
        return self._pg.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.kind == "postgresql":
            self._pg.__exit__(None, None, None)


def one(
    label: str,
    url: str,
    count: int,
    site: Any,
    settings_for: Callable[[str], dict[str, Any]],
    requests: Callable[[], int],
    held: Callable[[str], str | None],
) -> dict[str, Any]:
    engine = make_engine(url)
    upgrade(engine)
    with transaction(engine) as connection:
        stage(connection, rows(count))
    settings = load_settings(database_url=url, **COMMON, **settings_for(site.url))
    worker = bootstrap.worker(settings, engine, rng=random.Random(1))

    async def go() -> int:
        try:
            return await run_until_idle(worker, max_seconds=900, poll_interval=0.01)
        finally:
            await worker.target.aclose()

    before = requests()
    started = time.perf_counter()
    code = asyncio.run(go())
    elapsed = time.perf_counter() - started
    with transaction(engine, read_only=True) as connection:
        delivered = connection.execute(
            select(func.count()).where(deliveries.c.state == "delivered")
        ).scalar_one()
    engine.dispose()
    expected = {r["aggregate"]: json.loads(r["payload"])["price"] for r in rows(count)}
    wrong = sum(1 for sku, price in expected.items() if held(sku) != price)
    result = {
        "target": label,
        "messages": count,
        "delivered": delivered,
        "seconds": round(elapsed, 2),
        "messages_per_s": round(delivered / elapsed, 1) if elapsed else None,
        "requests": requests() - before,
        "shop_holds_every_price": wrong == 0,
        "exit": code,
    }
    print(json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    logging.getLogger("exchange").propagate = False
    results = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)

        def api(batch: int) -> dict[str, Any]:
            site = SiteSimulator(
                token="bench-token", faults=Faults(), batch_enabled=batch > 1, keep_requests=True
            )
            prices: dict[str, str] = {}

            def held(sku: str) -> str | None:
                if not prices:
                    prices.update({e.aggregate: str(e.payload["price"]) for e in site.effects()})
                return prices.get(sku)

            with site, Database(args.database, scratch) as url:
                return one(
                    f"api (site_batch_size={batch})",
                    url,
                    args.messages,
                    site,
                    lambda u: dict(site_url=u, site_token="bench-token", site_batch_size=batch),
                    lambda: len(site.received()),
                    held,
                )

        # The batch API is left out: its client streams a large batch with chunked encoding,
        # which the threaded sitesim refuses (411); bench/run.py measures it on bench/fastsite.
        results.append(api(1))
        bitrix = BitrixSimulator("exchange", "secret", zip=True, step_size=1000)
        with bitrix, Database(args.database, scratch) as url:
            results.append(
                one(
                    "bitrix",
                    url,
                    args.messages,
                    bitrix,
                    lambda u: dict(
                        target="bitrix",
                        bitrix_url=u + PATH,
                        bitrix_user="exchange",
                        bitrix_password="secret",
                        bitrix_catalog_id="cat",
                        bitrix_price_types={"retail": "Розничная"},
                    ),
                    lambda: sum(bitrix.requests.values()),
                    bitrix.price,
                )
            )
        woo = WooSimulator("ck", "cs")
        with woo, Database(args.database, scratch) as url:
            results.append(
                one(
                    "woocommerce",
                    url,
                    args.messages,
                    woo,
                    lambda u: dict(target="woocommerce", woo_url=u, woo_key="ck", woo_secret="cs"),
                    lambda: sum(woo.requests.values()),
                    woo.price,
                )
            )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    failed = [r["target"] for r in results if not r["shop_holds_every_price"]]
    if failed:
        print(f"FAILED: {failed}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
