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
her shop lacks, and nothing else (none of the demo's own bad rows, postings, poisoned or
refused prices: everything in her summary and report is about her SKUs; the network's faults
stay); the summary lists exactly those ``LACKING`` (quarantined: the shop API's 404 is
``http-404``, contract 5) instead of the site inventing a product for them.

The console speaks ``lang`` (the CLI's: Russian under a Russian locale, contract 15); reason
codes stay English.

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

from rich.cells import cell_len
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import select

from exchange import app as bootstrap
from exchange.config_doc import effective, env_name
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.on_channels import by_state_and_reason, channel_ids, listed
from exchange.dev.catalogue import LACKING, Catalogue, rehearsal_names, renamed
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.domain.clock import SystemClock
from exchange.domain.states import State
from exchange.errors import ExchangeError
from exchange.i18n import Lang, _, ngettext, number, percent
from exchange.intake.stage import stage
from exchange.ops.quarantine import Filters
from exchange.ops.verify import latest_delivered
from exchange.report import collect as report
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings
from exchange.words import name

POISON_SKU = "SKU-0013/retail"  # aggregates: one price of one SKU
REJECTED_SKU = "SKU-0042/retail"
PRICE_TYPES = ("retail", "wholesale")
REJECTED_DOCUMENT = "DOC-0007"
GAP_DOCUMENT = "DOC-GAP"
SHOP_RATE = 150.0  # requests/s the demo's shop takes
BAR = 20  # cells of the progress bar: it, the count and the time fit a console of 80
TOKEN = "demo-token"  # the simulator's; a real token never appears in code or output


def staged_rows(skus: int, rng: random.Random, *, rehearsal: bool = False) -> list[dict[str, Any]]:
    """Several versions of a price of each of ``skus`` SKUs; then, unless a ``rehearsal``
    (``--catalogue``: the rows stay the owner's SKUs and those she lacks, nothing the demo
    made up), financial postings out of order and with a gap, and the demo's bad rows."""
    rows: list[dict[str, Any]] = []
    for n in range(skus):
        sku = f"SKU-{n:04d}"
        for price_type in PRICE_TYPES[: rng.randint(1, 2)]:  # a wholesale price for about half
            price = rng.randint(100, 99_999)
            for version in range(1, rng.randint(1, 4) + 1):
                price += rng.randint(-500, 500)
                rows.append(_price(sku, version, f"{max(price, 1) / 100:.2f}", price_type))
    if rehearsal:
        return [{"schema_version": "1", **row} for row in rows]
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
    with transaction(engine, read_only=True) as connection:
        m = listed(channel_ids(connection), states=[State.QUARANTINED.value])
        lacks = (m.c.reason == "unknown-sku") | (
            (m.c.reason == "http-404") & m.c.last_error.contains("unknown-sku")
        )
        payloads = connection.execute(
            select(m.c.payload)
            .where(m.c.state == State.QUARANTINED.value, lacks)
            .order_by(m.c.id, m.c.channel_id)
        ).scalars()
        return list(dict.fromkeys(str(json.loads(p).get("sku")) for p in payloads))


def print_lacking(console: Console, lacking: list[str], lang: Lang, shown: int = 20) -> None:
    """The rehearsal's answer: the SKUs 1C sent that the shop lacks (all of them are in the
    quarantine report)."""
    console.print(
        _("  SKUs 1C sent that the shop lacks (quarantined): {count}", lang).format(
            count=len(lacking)
        ),
        markup=False,
    )
    for sku in lacking[:shown]:
        console.print(f"      {sku}", markup=False, highlight=False)
    if len(lacking) > shown:
        console.print(
            _("      … and {count} more: the quarantine report lists them all", lang).format(
                count=len(lacking) - shown
            ),
            markup=False,
        )


def print_catalogue(console: Console, catalogue: Catalogue, lang: Lang) -> None:
    """What the rehearsal read of the owner's catalogue, in one line: the SKUs the simulated
    shop holds (and no others), and for WooCommerce's export the rows without an SKU, skipped
    (a product 1C cannot name)."""
    held = ngettext(
        "the shop holds the {count} SKU read from the catalogue and no others",
        "the shop holds the {count} SKUs read from the catalogue and no others",
        len(catalogue.skus),
        lang,
    ).format(count=len(catalogue.skus))
    if catalogue.without_sku is not None:
        held += ngettext(
            "; {count} row without an SKU skipped",
            "; {count} rows without an SKU skipped",
            catalogue.without_sku,
            lang,
        ).format(count=catalogue.without_sku)
    console.print(held, markup=False, highlight=False)


def fitted(parts: list[str], room: int) -> str:
    """``parts`` joined by ", ", as many as fit in ``room`` cells, «…» for the rest: the
    progress line's tail, so that the bar and its count are never cut (a console of 80)."""
    shown = ""
    for n, part in enumerate(parts):
        more = part if not shown else f"{shown}, {part}"
        rest = 0 if n == len(parts) - 1 else 3  # room for «, …» should a later part not fit
        if cell_len(more) + rest > room:
            return f"{shown}, …" if shown else ("…" if room >= 1 else "")
        shown = more
    return shown


def progress_states(counts: dict[str, int], lang: Lang) -> list[str]:
    """The messages' states for the progress line, in ``lang``, the done ones first."""
    order = ("delivered", "quarantined", "cancelled", "delayed", "in_progress", "new")
    known = [s for s in order if s in counts] + sorted(s for s in counts if s not in order)
    return [f"{name('state', state, lang)} {counts[state]}" for state in known]


def progress_bar(console: Console, total: int, lang: Lang) -> tuple[Progress, int]:
    """The demo's progress line and the cells left for its states (``fitted``): the label, the
    bar, the count and the time always fit the console (80 columns: "3990/39…" was cut)."""
    label = _("delivering", lang)
    counted = f"{total}/{total}"
    room = console.width - cell_len(label) - BAR - len(counted) - len("0:00:00") - 4
    progress = Progress(
        TextColumn(label, markup=False),
        BarColumn(bar_width=BAR),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[states]}", markup=False),
        console=console,
        transient=False,
    )
    return progress, room


def run_demo(
    directory: Path,
    *,
    skus: int = 1000,
    console: Console | None = None,
    catalogue: Catalogue | None = None,
    lang: Lang = "en",
) -> int:
    """``catalogue``: the shop owner's rehearsal (the module's docstring); ``lang``: the
    language of the lines printed (contract 15)."""
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
    rehearsal = catalogue is not None
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
        # A rehearsal poisons and refuses none of her SKUs: her report is the shop's answer.
        poison=set() if rehearsal else {named(POISON_SKU)},
        reject=set() if rehearsal else {named(REJECTED_SKU), REJECTED_DOCUMENT},
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
        console.print(
            _("the demo's settings (set the same, for a real site, to run it):", lang),
            markup=False,
        )
        for line in used(settings, overrides):
            console.print(f"  {line}", markup=False, highlight=False)
        engine = make_engine(settings.database_url)
        upgrade(engine)
        rows = renamed(staged_rows(skus, rng, rehearsal=rehearsal), names)
        if catalogue is not None:
            print_catalogue(console, catalogue, lang)
        with transaction(engine) as connection:
            stage(connection, rows)
        console.print(
            ngettext(
                "staged {count} row into {database} (site simulator at {url})",
                "staged {count} rows into {database} (site simulator at {url})",
                len(rows),
                lang,
            ).format(count=len(rows), database=database, url=site.url),
            markup=False,
        )
        worker = bootstrap.worker(settings, engine, rng=random.Random(1))
        started = time.monotonic()

        async def go() -> int:
            bar, room = progress_bar(console, len(rows), lang)
            with bar as progress:
                task = progress.add_task("run", total=len(rows), states="")

                def on_cycle(_: object) -> None:
                    counts = _counts(engine)
                    done = sum(counts.get(s, 0) for s in ("delivered", "cancelled", "quarantined"))
                    duplicates = len(rows) - sum(counts.values())
                    progress.update(
                        task,
                        completed=done + duplicates,
                        states=fitted(progress_states(counts, lang), room),
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
    _print_summary(console, summary, report_path, lang)
    if code == 0 and not summary["ok"]:
        return 1
    return code


def _counts(engine: Any) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        counts: dict[str, int] = {}
        for (state, _reason), count in by_state_and_reason(connection).items():
            counts[state] = counts.get(state, 0) + count
        return counts


def _summary(engine: Any, site: SiteSimulator, elapsed: float) -> dict[str, Any]:
    with transaction(engine, read_only=True) as connection:
        by = Counter(by_state_and_reason(connection))
        cancelled = listed(channel_ids(connection), states=[State.CANCELLED.value])
        stale = set(
            connection.execute(
                select(cancelled.c.message_id).where(
                    cancelled.c.state == State.CANCELLED.value, cancelled.c.reason == "stale"
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


def _rate(rate: float | None, lang: Lang) -> str:
    if rate is None:
        return _("unpaced", lang)
    return ngettext("{rate} request/s", "{rate} requests/s", round(rate), lang).format(
        rate=number(rate, lang, 0)
    )


def _print_summary(console: Console, s: dict[str, Any], report_path: Path, lang: Lang) -> None:
    def say(message: str, **values: Any) -> None:
        console.print(message.format(**values), markup=False, highlight=False)

    say(_("done in {seconds} s", lang), seconds=number(s["seconds"], lang))
    say(_("  delivered            {count}", lang), count=s["delivered"])
    say(_("  superseded (coalesced) {count}", lang), count=s["superseded"])
    say(_("  stale, never sent    {count}", lang), count=s["stale"])
    if s["stale_tried_before"]:
        say(
            _("  stale, tried before a newer version was delivered {count}", lang),
            count=s["stale_tried_before"],
        )
    if s["stale_at_site"]:
        say(_("  stale at the site (409) {count}", lang), count=s["stale_at_site"])
    say(_("  quarantined          {count}", lang), count=sum(s["quarantined"].values()))
    for reason, n in s["quarantined"].items():  # a reason is a code (contract 15)
        console.print(f"      {reason:<20} {n}", markup=False, highlight=False)
    if s.get("lacking") is not None:
        print_lacking(console, s["lacking"], lang)
    say(_("  held behind a quarantined posting {count}", lang), count=s["pending"])
    say(_("  requests sent to the site        {count}", lang), count=s["requests"])
    say(_("  effects applied twice at the site {count}", lang), count=s["double_effects"])
    pace = s["pace"]
    share = s["refused_429"] / s["requests"] if s["requests"] else 0.0
    say(
        _(
            "  the shop takes {rate}: refused with 429 {refused} ({share} of requests, none "
            "charged to a message); the worker's pace at the end: {pace}, limit {limit} of "
            "{most} in flight",
            lang,
        ),
        rate=_rate(SHOP_RATE, lang),
        refused=s["refused_429"],
        share=percent(share, lang),
        pace=_rate(pace["paced_rate"], lang),
        limit=pace["limit"],
        most=pace["max_limit"],
    )
    say(
        _("  old prices applied over newer ones at the site {count}", lang), count=s["stale_writes"]
    )
    say(
        _("  site holds the latest delivered price of every SKU and price type: {answer}", lang),
        answer=_("yes", lang) if s["site_matches"] else _("NO", lang),
    )
    say(_("quarantine report: {path}", lang), path=report_path.resolve())
