"""``exchange demo``: the whole pipeline on the embedded default, with nothing to configure.

A fresh SQLite file, the project's site simulator on loopback with realistic faults (a few
5xx, answers dropped after the effect, one poison price, one rejected price and one rejected
posting document), a few thousand staged rows with several versions per price (every SKU in
retail, many in wholesale too: one aggregate per price, named ``<sku>/<price_type>``),
financial postings written out of order and one with a gap, a few bad rows; then a run to idle
with a progress bar, a summary, and the quarantine report written to disk.

The simulated site keeps only the idempotency promise (``check_versions=False``): it applies
whatever version arrives, so the summary's checks (no effect applied twice, no old price
applied over a newer one, the site shows the latest delivered price) are computed from what the
site applied and fail if the service sends what it must not.

The shop owner's rehearsal (``--catalogue FILE``, contract 15): the simulated site holds the SKUs
of her catalogue (a list, or WooCommerce's product CSV export: ``exchange.dev.catalogue``) and no
others; the demo's 1C sends prices for her SKUs (up to ``--skus``) and for ``LACKING`` more that
her shop lacks, and the summary lists every SKU sent that the shop lacks (quarantined: the
shop API's 404 is ``http-404``, contract 5) instead of the site inventing a product for it.

The simulated shop takes ``SHOP_RATE`` requests/s and answers 429 with ``Retry-After: 1``
beyond (contract 5c): the worker starts with up to 32 requests in flight, finds the shop's
pace, and the summary shows it (refusals are never charged to a message).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import func, select

from exchange import app as bootstrap
from exchange.config_doc import effective, env_name
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import messages
from exchange.dev.catalogue import LACKING, Catalogue, rehearsal_names, renamed
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.domain.clock import SystemClock
from exchange.domain.states import State
from exchange.errors import ExchangeError
from exchange.intake.stage import stage
from exchange.ops.quarantine import Filters
from exchange.ops.verify import latest_delivered
from exchange.report import collect as report
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings

POISON_SKU = "SKU-0013/retail"  # aggregates: one price of one SKU
REJECTED_SKU = "SKU-0042/retail"
PRICE_TYPES = ("retail", "wholesale")
REJECTED_DOCUMENT = "DOC-0007"
GAP_DOCUMENT = "DOC-GAP"
SHOP_RATE = 150.0  # requests/s the demo's shop takes
TOKEN = "demo-token"  # the simulator's; a real token never appears in code or output


def staged_rows(skus: int, rng: random.Random) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in range(skus):
        sku = f"SKU-{n:04d}"
        for price_type in PRICE_TYPES[: rng.randint(1, 2)]:  # a wholesale price for about half
            price = rng.randint(100, 99_999)
            for version in range(1, rng.randint(1, 4) + 1):
                price += rng.randint(-500, 500)
                rows.append(_price(sku, version, f"{max(price, 1) / 100:.2f}", price_type))
    postings = []
    for n in range(1, 51):
        document = f"DOC-{n:04d}"
        for version in range(1, rng.randint(1, 5) + 1):
            postings.append(_posting(document, version, rng))
    postings += [_posting(GAP_DOCUMENT, v, rng) for v in (1, 2, 4)]
    rng.shuffle(postings)  # 1C sessions commit out of order; order is the service's job
    rows += postings
    rows += [
        _price("SKU-0001", 1, "0"),  # the same row twice: recorded as a duplicate
        _price("SKU-0001", 1, "0.00"),  # equal as a decimal: a duplicate too
        {**_price("SKU-0002", 1, "1.00"), "payload": '{"sku": "SKU-0002", "price": "7.77"}'},
        # A store with one price type may name the aggregate after the SKU alone; its first
        # version fixes the price type, and a wholesale price written there is refused (one
        # aggregate is one price), never superseding the retail one.
        {**_price("SKU-PLAIN", 1, "10.00"), "aggregate": "SKU-PLAIN"},
        {**_price("SKU-PLAIN", 2, "8.00", "wholesale"), "aggregate": "SKU-PLAIN"},
        {**_price("SKU-BAD1", 1, "1"), "payload": "{not json"},
        {**_price("SKU-BAD2", 1, "1"), "payload": '{"sku": "SKU-BAD2", "price": 8.4e2}'},
        {**_price("SKU-BAD3", 1, "1"), "payload": '{"sku": "SKU-BAD3", "price": "-5"}'},
        {**_price("SKU-BAD4", 1, "1"), "payload": '{"sku": "SKU-OTHER", "price": "5"}'},
        {**_price("SKU-BAD5", 1, "1"), "schema_version": "2"},
        {**_price("SKU-BAD6", 0, "1")},
        {
            "kind": "stock_level",
            "aggregate": "SKU-0003",
            "aggregate_version": 1,
            "payload": '{"qty": 5}',
            "source_ref": "Остатки 000001",
        },
    ]
    rows[0:0] = [_price("SKU-0001", 1, "0")]
    # One INSERT for all rows: every row must name the same columns.
    return [{"schema_version": "1", "source_ref": None, **row} for row in rows]


def _price(sku: str, version: int, price: str, price_type: str = "retail") -> dict[str, Any]:
    return {
        "kind": "price",
        "aggregate": f"{sku}/{price_type}",
        "aggregate_version": version,
        "payload": _payload(sku, price, price_type),
        "source_ref": f"Установка цен номенклатуры {version:06d}",
    }


def _payload(sku: str, price: str, price_type: str) -> str:
    return json.dumps({"sku": sku, "price": price, "currency": "RUB", "price_type": price_type})


def _posting(document: str, version: int, rng: random.Random) -> dict[str, Any]:
    amount = f"{rng.randint(1, 10_000_000) / 100:.2f}"
    return {
        "kind": "financial_posting",
        "aggregate": document,
        "aggregate_version": version,
        "payload": json.dumps(
            {"document": document, "line": version, "amount": amount, "account": "62.01"}
        ),
        "source_ref": f"Реализация товаров и услуг {document}",
    }


def used(settings: Settings, overrides: dict[str, Any]) -> list[str]:
    """``EXCHANGE_X=value`` for each setting the demo chose, as ``exchange config`` shows it
    (secrets and URL passwords masked): what to set to run the same against a real shop."""
    shown = dict(effective(settings))
    names = [n for n in overrides if n not in ("staging_url", "site_token_file", "channels")]
    return [f"{env_name(name)}={shown[env_name(name)]}" for name in names]


def lacking_skus(engine: Any) -> list[str]:
    """The SKUs sent that the shop lacks, as the service quarantined them: ``unknown-sku``
    (WooCommerce, the marketplaces), or the shop API's 404 naming ``unknown-sku`` (contract 5
    quarantines a 404 as ``http-404``)."""
    lacks = (messages.c.reason == "unknown-sku") | (
        (messages.c.reason == "http-404") & messages.c.last_error.contains("unknown-sku")
    )
    with transaction(engine, read_only=True) as connection:
        payloads = connection.execute(
            select(messages.c.payload)
            .where(messages.c.state == State.QUARANTINED.value, lacks)
            .order_by(messages.c.id)
        ).scalars()
        return list(dict.fromkeys(str(json.loads(p).get("sku")) for p in payloads))


def print_lacking(console: Console, lacking: list[str], shown: int = 20) -> None:
    """The rehearsal's answer: the SKUs 1C sent that the shop lacks (all of them are in the
    quarantine report)."""
    console.print(f"  SKUs 1C sent that the shop lacks (quarantined) {len(lacking)}", markup=False)
    for sku in lacking[:shown]:
        console.print(f"      {sku}", markup=False, highlight=False)
    if len(lacking) > shown:
        console.print(
            f"      … and {len(lacking) - shown} more: the quarantine report lists them all",
            markup=False,
        )


def run_demo(
    directory: Path,
    *,
    skus: int = 1000,
    console: Console | None = None,
    catalogue: Catalogue | None = None,
) -> int:
    """``catalogue``: the shop owner's rehearsal (the module's docstring)."""
    console = console or Console()
    # The progress bar and the summary tell the story; per-message log lines would tear
    # through the bar (without a handler, Python prints warnings to stderr by itself).
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    rng = random.Random(20261130)
    database = directory / "demo.db"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("demo.db*"):
            stale.unlink()
    except OSError as exc:
        raise ExchangeError(
            f"cannot prepare the demo directory {directory}: {exc.strerror or exc}"
        ) from None
    names: dict[str, str] = {}
    if catalogue is not None:
        held = min(skus, len(catalogue.skus))
        skus = held + LACKING
        names = rehearsal_names([f"SKU-{n:04d}" for n in range(skus)], catalogue, held=held)

    def named(aggregate: str) -> str:
        sku, slash, rest = aggregate.partition("/")
        return names.get(sku, sku) + slash + rest

    faults = Faults(
        fail_rate=0.03,
        drop_after_effect_rate=0.01,
        slow_rate=0.005,
        slow_seconds=0.2,
        poison={named(POISON_SKU)},
        reject={named(REJECTED_SKU), REJECTED_DOCUMENT},
        seed=7,
        rate_limit=SHOP_RATE,
        rate_retry_after="1",
    )
    shop = None if catalogue is None else catalogue.skus  # None: the site takes every SKU
    with SiteSimulator(token=TOKEN, faults=faults, check_versions=False, catalog=shop) as site:
        overrides: dict[str, Any] = dict(
            database_url=f"sqlite:///{database}",
            staging_url=None,
            channels=None,  # the demo's own shop, whatever EXCHANGE_CHANNELS says
            site_url=site.url,
            site_token=TOKEN,
            site_token_file=None,
            worker_id="demo-worker",
            poll_interval=0.05,
            batch_size=200,
            concurrency=32,
            lease_seconds=30,
            max_attempts=5,
            retry_base_delay=0.01,
            retry_max_delay=0.2,
            http_timeout=2.0,
            gap_timeout=1.0,
            breaker_threshold=5,
            site_batch_size=1,
        )
        settings = load_settings(**overrides)
        console.print("the demo's settings (set the same, for a real site, to run it):")
        for line in used(settings, overrides):
            console.print(f"  {line}", markup=False, highlight=False)
        engine = make_engine(settings.database_url)
        upgrade(engine)
        rows = renamed(staged_rows(skus, rng), names)
        if catalogue is not None:
            console.print(
                f"the site holds the {len(catalogue.skus)} SKUs of the catalogue and no others",
                markup=False,
            )
        with transaction(engine) as connection:
            stage(connection, rows)
        console.print(
            f"staged {len(rows)} rows into {database} (site simulator at {site.url})", markup=False
        )
        worker = bootstrap.worker(settings, engine, rng=random.Random(1))
        started = time.monotonic()

        async def go() -> int:
            with Progress(
                TextColumn("delivering"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[states]}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            ) as progress:
                task = progress.add_task("run", total=len(rows), states="")

                def on_cycle(_: object) -> None:
                    counts = _counts(engine)
                    done = sum(counts.get(s, 0) for s in ("delivered", "cancelled", "quarantined"))
                    duplicates = len(rows) - sum(counts.values())
                    progress.update(
                        task,
                        completed=done + duplicates,
                        states=" ".join(f"{k}={v}" for k, v in sorted(counts.items())),
                    )

                try:
                    return await run_until_idle(
                        worker,
                        max_seconds=120,
                        poll_interval=settings.poll_interval,
                        on_cycle=on_cycle,
                    )
                finally:
                    await worker.target.aclose()

        try:
            code = asyncio.run(go())
        finally:
            # It ends as `exchange run --until-idle` and a SIGTERM'd worker do: its row marked
            # stopped, with when (never «молчит» for a day after the demo).
            worker.retire()
        elapsed = time.monotonic() - started
        summary = _summary(engine, site, elapsed)
        summary["pace"] = worker.pace_figures(time.monotonic())
        summary["refused_429"] = site.requests_by_status()[429]
        summary["lacking"] = lacking_skus(engine) if catalogue is not None else None
        report_path = directory / "quarantine.html"
        with transaction(engine, read_only=True) as connection:
            data = report.collect(
                connection, Filters(), SystemClock().now(), zone=settings.display_tz
            )
        report.export(data, "html", "ru", report_path)
        report.export(data, "json", "ru", directory / "quarantine.json")
    _print_summary(console, summary, report_path)
    if code == 0 and not summary["ok"]:
        return 1
    return code


def _counts(engine: Any) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        query = select(messages.c.state, func.count()).group_by(messages.c.state)
        return {state: count for state, count in connection.execute(query)}


def _summary(engine: Any, site: SiteSimulator, elapsed: float) -> dict[str, Any]:
    with transaction(engine, read_only=True) as connection:
        by = Counter(
            {
                (state, reason): n
                for state, reason, n in connection.execute(
                    select(messages.c.state, messages.c.reason, func.count()).group_by(
                        messages.c.state, messages.c.reason
                    )
                )
            }
        )
        stale = set(
            connection.execute(
                select(messages.c.message_id).where(
                    messages.c.state == State.CANCELLED.value, messages.c.reason == "stale"
                )
            ).scalars()
        )
    # What exchange verify compares: the highest delivered version of each price aggregate.
    latest = {d.message.aggregate: d.message.version for d in latest_delivered(engine)}
    # What the site applied (it applies any version: see the module docstring), not what the
    # service believes: these figures fail when the service sends what it must not.
    held = {agg: v for (kind, agg), v in site.held_versions().items() if kind == "price"}
    received = site.received_keys()
    double_effects = sum(1 for n in site.effect_counts().values() if n > 1)
    stale_writes = len(site.stale_writes())
    return {
        "delivered": by[("delivered", None)],
        "superseded": by[("cancelled", "superseded")],
        "stale": len(stale - received),
        "stale_tried_before": len(stale & received),
        "stale_at_site": by[("cancelled", "stale-at-site")],
        "quarantined": {
            reason: n
            for (state, reason), n in sorted(by.items(), key=lambda kv: str(kv[0]))
            if state == "quarantined"
        },
        "pending": sum(
            n for (state, _), n in by.items() if state in ("new", "delayed", "in_progress")
        ),
        "requests": site.request_count,
        "double_effects": double_effects,
        "stale_writes": stale_writes,
        "site_matches": held == latest,
        "ok": double_effects == 0 and stale_writes == 0 and held == latest,
        "seconds": elapsed,
    }


def _rate(rate: float | None) -> str:
    return "unpaced" if rate is None else f"{rate:.0f} requests/s"


def _print_summary(console: Console, s: dict[str, Any], report_path: Path) -> None:
    console.print(f"done in {s['seconds']:.1f} s", markup=False)
    console.print(f"  delivered            {s['delivered']}", markup=False)
    console.print(f"  superseded (coalesced) {s['superseded']}", markup=False)
    console.print(f"  stale, never sent    {s['stale']}", markup=False)
    if s["stale_tried_before"]:
        console.print(
            f"  stale, tried before a newer version was delivered {s['stale_tried_before']}",
            markup=False,
        )
    if s["stale_at_site"]:
        console.print(f"  stale at the site (409) {s['stale_at_site']}", markup=False)
    total_q = sum(s["quarantined"].values())
    console.print(f"  quarantined          {total_q}", markup=False)
    for reason, n in s["quarantined"].items():
        console.print(f"      {reason:<20} {n}", markup=False)
    if s.get("lacking") is not None:
        print_lacking(console, s["lacking"])
    console.print(f"  held behind a quarantined posting {s['pending']}", markup=False)
    console.print(f"  requests sent to the site        {s['requests']}", markup=False)
    console.print(f"  effects applied twice at the site {s['double_effects']}", markup=False)
    pace = s["pace"]
    share = s["refused_429"] / s["requests"] if s["requests"] else 0.0
    console.print(
        f"  the shop takes {SHOP_RATE:.0f} requests/s: refused with 429 {s['refused_429']} "
        f"({share:.1%} of requests, none charged to a message); the worker's pace at the end: "
        f"{_rate(pace['paced_rate'])}, limit {pace['limit']} of "
        f"{pace['max_limit']} in flight",
        markup=False,
    )
    console.print(
        f"  old prices applied over newer ones at the site {s['stale_writes']}", markup=False
    )
    console.print(
        "  site holds the latest delivered price of every SKU and price type: "
        f"{'yes' if s['site_matches'] else 'NO'}",
        markup=False,
    )
    console.print(f"quarantine report: {report_path.resolve()}", markup=False)
