"""``exchange demo --target bitrix|woocommerce|rabbitmq``: the pipeline against a simulated
1C-Bitrix exchange or WooCommerce shop (contract 10), or the real RabbitMQ of this machine
(contract 12), with nothing to configure: the shop owner's rehearsal (issue 24 item 14).

A fresh SQLite file, the simulator on loopback (Bitrix: windows-1251, zip, 16 KB chunks, import
in steps, a session lost once; WooCommerce: products and variations, a rate limit, one batch
half applied and its answer lost), several versions per SKU, one SKU the shop lacks, one price
type nobody mapped and one mapped to null (the purchase price: left out of the shop on
purpose); for RabbitMQ an exchange and a queue of the demo's own, bound for ``price`` only, so
that the financial postings come back unroutable. It prints the ``EXCHANGE_*`` settings it used
(secrets masked), runs to idle, writes the quarantine report (HTML and JSON) beside its database
and checks what the shop ends with: the newest delivered price of every SKU, never an older one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console

from exchange import app as bootstrap
from exchange.config_doc import effective, env_name
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.on_channels import by_state_and_reason
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.catalogue import LACKING, Catalogue, rehearsal_names, renamed
from exchange.dev.demo import lacking_skus, print_catalogue, print_lacking, used
from exchange.dev.woosim import WooSimulator
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import Lang, _, ngettext, number
from exchange.intake.stage import stage
from exchange.ops.quarantine import Filters
from exchange.ops.verify import latest_delivered
from exchange.report import collect as report
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings
from exchange.words import name

UNKNOWN_SKU = "NOSUCH-0001"
UNMAPPED_TYPE = "wholesale"
LEFT_OUT_TYPE = "purchase"  # mapped to null: never sent to the shop (contract 10)
TARGETS = ("bitrix", "woocommerce", "rabbitmq")
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"  # RabbitMQ's own default user, loopback only


class Shop(Protocol):
    """What the summary asks of the shop the demo delivered to."""

    url: str
    requests: Counter[str]

    def price(self, sku: str) -> str | None: ...


def rows(
    skus: int, rng: random.Random, *, variations: bool, rehearsal: bool = False
) -> list[dict[str, Any]]:
    """Several versions of the retail price of each of ``skus`` SKUs; then, unless a
    ``rehearsal`` (``--catalogue``: only the owner's SKUs and those she lacks), the demo's own
    SKU the shop lacks, a price type nobody mapped and one mapped to null."""
    out: list[dict[str, Any]] = []
    for n in range(skus):
        sku = f"{'VAR' if variations and n % 5 == 0 else 'SKU'}-{n:04d}"
        price = rng.randint(100, 99_999)
        for version in range(1, rng.randint(1, 3) + 1):
            price += rng.randint(-500, 500)
            out.append(_row(sku, version, f"{max(price, 1) / 100:.2f}", "retail"))
    if rehearsal:
        return out
    out.append(_row(UNKNOWN_SKU if variations else "SKU-0000", 1, "1.00", UNMAPPED_TYPE))
    out += [_row(f"SKU-{n:04d}", 1, "0.50", LEFT_OUT_TYPE) for n in range(min(skus, 3))]
    if variations:
        out.append(_row(UNKNOWN_SKU, 1, "1.00", "retail"))
    return out


def postings(documents: int) -> list[dict[str, Any]]:
    """Financial postings: RabbitMQ takes every kind, and the demo's queue is bound for
    ``price`` only, so these come back unroutable (quarantined, as a person must see)."""
    return [
        {
            "kind": "financial_posting",
            "aggregate": f"DOC-{n:04d}",
            "aggregate_version": 1,
            "payload": json.dumps(
                {"document": f"DOC-{n:04d}", "line": 1, "amount": "100.00", "account": "62.01"}
            ),
            "schema_version": "1",
            "source_ref": f"Реализация товаров и услуг DOC-{n:04d}",
        }
        for n in range(1, documents + 1)
    ]


def _row(sku: str, version: int, price: str, price_type: str) -> dict[str, Any]:
    payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": price_type}
    return {
        "kind": "price",
        "aggregate": f"{sku}/{price_type}",
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Установка цен номенклатуры {version:06d}",
    }


def _overrides(database: Path, target: str, url: str) -> dict[str, Any]:
    """The settings the demo runs with, as given (what it prints: ``used``)."""
    common: dict[str, Any] = dict(
        target=target,
        database_url=f"sqlite:///{database}",
        worker_id="demo-worker",
        poll_interval=0.05,
        batch_size=500,
        concurrency=4,
        lease_seconds=30,
        max_attempts=8,
        retry_base_delay=0.01,
        retry_max_delay=1.0,
        http_timeout=5.0,
    )
    if target == "woocommerce":
        return {
            **common,
            "woo_url": url,
            "woo_key": "ck_demo_key",
            "woo_secret": "cs_demo_secret",
            "woo_price_fields": {"retail": "regular_price", LEFT_OUT_TYPE: None},
        }
    if target == "rabbitmq":
        return {**common, "rabbitmq_url": url, "rabbitmq_exchange": f"exchange-demo-{_TAG}"}
    return {
        **common,
        "bitrix_url": url + PATH,
        "bitrix_user": "exchange",
        "bitrix_password": "demo-password",
        "bitrix_catalog_id": "demo-catalog",
        "bitrix_price_types": {"retail": "Розничная", LEFT_OUT_TYPE: None},
    }


_TAG = uuid.uuid4().hex[:8]  # the demo's own exchange and queue on a shared broker


def _settings(overrides: dict[str, Any]) -> Settings:
    # Explicit Nones: the demo never picks up the shell's EXCHANGE_STAGING_URL or token file.
    return load_settings(
        **{"staging_url": None, "site_token_file": None, "channels": None, **overrides}
    )


def run_target_demo(
    directory: Path,
    *,
    target: str,
    skus: int = 500,
    console: Console | None = None,
    catalogue: Catalogue | None = None,
    lang: Lang = "en",
) -> int:
    """``catalogue`` (WooCommerce only, ``exchange demo --catalogue``): the shop holds the owner's
    SKUs and no others (``WooSimulator.hold``); the demo's 1C sends prices for them (up to
    ``skus``) and for ``LACKING`` more, nothing else (none of the demo's own bad rows), and the
    summary lists the SKUs the shop lacks. ``lang``: the language of the lines printed."""
    console = console or Console()
    names: dict[str, str] = {}
    if catalogue is not None:
        hers = min(skus, len(catalogue.skus))
        skus = hers + LACKING
        demo_skus = [f"{'VAR' if n % 5 == 0 else 'SKU'}-{n:04d}" for n in range(skus)]
        names = rehearsal_names(demo_skus, catalogue, held=hers)
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    rng = random.Random(20261201)
    database = directory / f"demo-{target}.db"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob(f"demo-{target}.db*"):
            stale.unlink()
    except OSError as exc:
        raise ExchangeError(f"cannot prepare the demo directory {directory}: {exc}") from None
    site: WooSimulator | BitrixSimulator | RabbitShop
    if target == "woocommerce":
        woo = WooSimulator("ck_demo_key", "cs_demo_secret")
        woo.faults.rate_limit = 40
        woo.faults.half_apply = True
        if catalogue is not None:
            woo.hold(catalogue)  # her SKUs and no others: none invented on first lookup
        site = woo
    elif target == "rabbitmq":
        site = RabbitShop(os.environ.get("EXCHANGE_RABBITMQ_URL") or RABBITMQ_URL, _TAG)
    else:
        bitrix = BitrixSimulator(
            "exchange", "demo-password", zip=True, file_limit=16_384, step_size=200
        )
        bitrix.faults.lose_session = True
        site = bitrix
    with site:
        overrides = _overrides(database, target, site.url)
        settings = _settings(overrides)
        console.print(
            _("the demo's settings (set the same, for a real shop, to run it):", lang),
            markup=False,
        )
        for line in used(settings, overrides):
            console.print(f"  {line}", markup=False, highlight=False)
        engine = make_engine(settings.database_url)
        upgrade(engine, channel=settings.target)  # the one channel, named as migrate names it
        if catalogue is not None:
            print_catalogue(console, catalogue, lang)
        staged = renamed(
            rows(skus, rng, variations=target == "woocommerce", rehearsal=catalogue is not None),
            names,
        )
        if target == "rabbitmq":
            staged += postings(3)
        with transaction(engine) as connection:
            stage(connection, staged)
        console.print(
            ngettext(
                "staged {count} row ({target} at {url})",
                "staged {count} rows ({target} at {url})",
                len(staged),
                lang,
            ).format(count=len(staged), target=target, url=_shown_url(settings, target)),
            markup=False,
            highlight=False,
        )
        worker = bootstrap.worker(settings, engine, rng=random.Random(1))
        started = time.monotonic()

        async def go() -> int:
            first = True

            def on_cycle(_: object) -> None:
                nonlocal first
                if first and isinstance(site, WooSimulator):
                    site.faults.half_apply = False  # one batch half applied, then all well
                first = False

            try:
                return await run_until_idle(
                    worker, max_seconds=120, poll_interval=settings.poll_interval, on_cycle=on_cycle
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
        if isinstance(site, RabbitShop):
            site.collect()
        with transaction(engine, read_only=True) as connection:
            by = Counter(by_state_and_reason(connection))
            data = report.collect(
                connection, Filters(), SystemClock().now(), zone=settings.display_tz
            )
    report_path = directory / f"quarantine-{target}.html"
    report.export(data, "html", "ru", report_path)
    report.export(data, "json", "ru", directory / f"quarantine-{target}.json")
    wrong = []
    for delivered in latest_delivered(engine):  # what exchange verify compares, too
        payload = json.loads(delivered.message.payload)
        if payload.get("price_type") != "retail":  # the shop's price the summary reads
            continue
        held = site.price(delivered.sku)
        if held is None or Decimal(held) != Decimal(payload["price"]):
            wrong.append(delivered.message.aggregate)
    for line in summary(target, elapsed, by, site.requests, lang):
        console.print(line, markup=False, highlight=False)
    if catalogue is not None:
        print_lacking(console, lacking_skus(engine), lang)
    answer = (
        _("yes", lang)
        if not wrong
        else _("NO ({count}: {aggregates})", lang).format(
            count=len(wrong), aggregates=", ".join(wrong[:5])
        )
    )
    for line in (
        _("  the shop holds the newest delivered price of every SKU: {answer}", lang),
        _("quarantine report: {path}", lang),
    ):
        console.print(
            line.format(answer=answer, path=report_path.resolve()), markup=False, highlight=False
        )
    return code if not wrong else 1


def summary(
    target: str,
    elapsed: float,
    by: Counter[tuple[str, str | None]],
    requests: Counter[str],
    lang: Lang,
) -> list[str]:
    """The summary's lines: how long, the messages by state (in words) and reason (a code,
    contract 15), the requests the shop took."""
    named = {state: name("state", state, lang) for state, _reason in by}
    wide = max([12, *(len(n) for n in named.values())])
    lines = [
        _("{target}: idle after {seconds} s", lang).format(
            target=target, seconds=number(elapsed, lang)
        )
    ]
    for (state, reason), n in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        lines.append(f"  {named[state]:<{wide}} {reason or '':<22} {n}")
    lines.append(
        _("  requests to the shop: {count} ({kinds})", lang).format(
            count=sum(requests.values()), kinds=dict(requests)
        )
    )
    return lines


def _shown_url(settings: Settings, target: str) -> str:
    name = {"woocommerce": "woo_url", "rabbitmq": "rabbitmq_url"}.get(target, "bitrix_url")
    return dict(effective(settings))[env_name(name)]


class RabbitShop:
    """The demo's side of a real RabbitMQ: an exchange and a durable queue of its own, bound
    for ``price`` only (a posting is unroutable), deleted afterwards; ``collect`` reads what
    arrived as a shop's back end would (deduplicated by ``message_id``, the newest version of
    each aggregate kept)."""

    def __init__(self, url: str, tag: str) -> None:
        self.url = url
        self.exchange = f"exchange-demo-{tag}"
        self.queue = f"exchange-demo-{tag}-prices"
        self.requests: Counter[str] = Counter()
        self._prices: dict[str, tuple[int, str]] = {}

    def __enter__(self) -> RabbitShop:
        async def declare(channel: Any) -> None:
            exchange = await channel.declare_exchange(self.exchange, "direct", durable=True)
            queue = await channel.declare_queue(self.queue, durable=True)
            await queue.bind(exchange, routing_key="price")

        self._run(declare)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        async def delete(channel: Any) -> None:
            await channel.queue_delete(self.queue)
            await channel.exchange_delete(self.exchange)

        self._run(delete)

    def collect(self) -> None:
        async def read(channel: Any) -> None:
            queue = await channel.declare_queue(self.queue, passive=True)
            seen: set[str] = set()
            while (message := await queue.get(no_ack=False, fail=False)) is not None:
                await message.ack()
                self.requests["published"] += 1
                if message.message_id in seen:  # a result unknown, published again
                    self.requests["duplicates dropped"] += 1
                    continue
                seen.add(message.message_id or "")
                body = json.loads(message.body, parse_float=Decimal)
                payload = body["payload"]
                if payload.get("price_type") != "retail":
                    continue
                version, _ = self._prices.get(payload["sku"], (0, ""))
                if body["version"] > version:
                    self._prices[payload["sku"]] = (body["version"], str(payload["price"]))

        self._run(read)

    def price(self, sku: str) -> str | None:
        held = self._prices.get(sku)
        return held[1] if held else None

    def _run(self, work: Any) -> None:
        try:
            import aio_pika
        except ImportError:
            raise ExchangeError(
                "demo --target rabbitmq needs the brokers extra: pip install 'exchange[brokers]'"
            ) from None

        async def go() -> None:
            try:
                connection = await asyncio.wait_for(aio_pika.connect(self.url), 10)
            except (OSError, TimeoutError, aio_pika.exceptions.AMQPError) as exc:
                raise ExchangeError(
                    f"RabbitMQ does not answer at {_masked(self.url)} ({exc.__class__.__name__}): "
                    "start one, or set EXCHANGE_RABBITMQ_URL"
                ) from None
            try:
                await work(await connection.channel())
            finally:
                await connection.close()

        asyncio.run(go())


def _masked(url: str) -> str:
    from exchange.config_doc import mask_url_password

    return mask_url_password(url)
