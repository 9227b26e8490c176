"""``exchange demo --channels``: one 1C, every place that sells (contract 13, 14; issue 31 item 8,
issue 32 item 4).

A fresh SQLite file and the demo's channels, each a simulator on loopback and a channel of
``EXCHANGE_CHANNELS`` (``shops()``): the site (``exchange.dev.sitesim``), a second shop on
WooCommerce (``exchange.dev.woosim``), and the three marketplaces, Ozon
(``exchange.dev.ozonsim``), Wildberries (``exchange.dev.wbsim``) and Yandex Market
(``exchange.dev.ymsim``), each with its price type mapped (``*_price_types``) and limits that
fit a demo (their clocks run faster, their own limits as the research gives them). 1C stages
several versions of the retail price of each SKU, in whole roubles (Wildberries takes no
kopecks); the marketplaces already hold the price each SKU had before (as a seller's account
does), and one SKU's newest price is a sharp drop (``SHARP_DROP``: a quarter of the one before),
which Wildberries and Yandex Market withhold in their price quarantine. One ``exchange run``
delivers them to every channel. One shop (``FAILING``, the site) is down from the start,
answering 503 to every request (its health check too), until every other channel holds the
newest price of every SKU or withholds it (and at least ``OUTAGE_AT_LEAST`` seconds passed), or
``OUTAGE_AT_MOST`` seconds passed; then it comes back and the service catches it up.

The summary is computed from what the channels applied (each write stamped by the demo's
watcher as it appears: ``Watcher``), not from what the service believes:

- every other channel's prices all landed during the site's outage (when its first and last
  price landed, when the outage ended): it was never held back;
- the failing shop got every price after it came back;
- on every channel: no effect applied twice, no old price applied over a newer one, and the
  channel holds the newest delivered price of every SKU; every SKU's newest price delivered,
  or withheld by the marketplace's quarantine where the marketplace itself holds it back
  (listed with how to release it: ``exchange withheld release``);
- for each marketplace what is its own (requests, tasks, read-backs, the hourly limit).

The exit code is 1 when any of these does not hold.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol, Self

from rich.console import Console

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.on_channels import by_state_and_reason, channel_ids
from exchange.delivery import withheld as release
from exchange.dev.ozonsim import IMPORT_PRICES, ITEM_LIMIT, OzonSimulator
from exchange.dev.simclock import SimClock
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.wbsim import Switches as WbSwitches
from exchange.dev.wbsim import WbSimulator
from exchange.dev.woosim import WooSimulator
from exchange.dev.ymsim import YmSimulator, YmSwitches, channel_settings
from exchange.domain.clock import SystemClock
from exchange.errors import ExchangeError
from exchange.i18n import Lang, _, ngettext, number
from exchange.intake.stage import stage
from exchange.ops.verify import latest_delivered
from exchange.queue.withheld import Withheld, waiting
from exchange.runner import run_until_idle
from exchange.settings import Settings, given_settings
from exchange.words import detail_words

FAILING = "site"  # the shop that is down for a while
OUTAGE_AT_LEAST = 3.0  # seconds: the failing shop is down at least this long (its breaker opens)
OUTAGE_AT_MOST = 60.0  # seconds: the outage ends then, whatever the healthy shops did
WATCH_EVERY = 0.02  # seconds between two looks of the watcher at the shops
PRICE_TYPE = "retail"
SHARP_DROP = "SKU-0000"  # its newest price is a quarter of the one before: quarantined by WB, YM
WB_SCALE = 10.0  # Wildberries' clock: its processing of a task (2 s) lasts 0.2 s
YM_SCALE = 60.0  # Yandex Market's clock: its minute (its budget's window) lasts a second
YM_APPLY_DELAY = 30.0  # its seconds from accepting a price to showing it: half a real second
YM_APPLY_TIMEOUT = 2.0  # seconds: a price Yandex has not shown by then is looked up in quarantine


@dataclass(frozen=True)
class Write:
    """One price a shop applied: when (seconds since the run began, as the watcher saw it
    appear), the SKU, the version (from the price: each version of a SKU has its own)."""

    at: float
    sku: str
    version: int


class Simulator(Protocol):
    """What the demo asks of a shop's simulator."""

    @property
    def url(self) -> str: ...

    def start(self) -> object: ...

    def stop(self) -> object: ...


class DemoShop(ABC):
    """One shop of the demo: its simulator, its channel in ``EXCHANGE_CHANNELS``, and what it
    applied."""

    name: str  # the channel's name
    target: str  # the channel's target
    sim: Simulator  # started and stopped with the shop

    @property
    def url(self) -> str:
        """Where its simulator listens."""
        return self.sim.url

    def __enter__(self) -> Self:
        self.sim.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sim.stop()

    @abstractmethod
    def channel(self, directory: Path) -> dict[str, Any]:
        """The channel's table in ``EXCHANGE_CHANNELS`` (its secrets written as files under
        ``directory``, as a channel takes them)."""

    @abstractmethod
    def applied(self, since: int) -> list[tuple[str, str]]:
        """The prices the shop applied, in order, from the ``since``-th on: (SKU, price as
        sent)."""

    @abstractmethod
    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        """The price each SKU holds now at the shop (None: none)."""

    def fail(self, down: bool) -> None:
        """Down (every request refused) or back. Only the failing shop needs it."""
        raise NotImplementedError(f"the demo cannot take the {self.target} shop down")

    def refused(self) -> int:
        """Requests the shop refused while it was down (the failing shop's)."""
        return 0

    def seed(self, before: dict[str, str]) -> None:
        """The price each SKU holds before the demo, where the shop already sells it (the
        marketplaces: a seller's account has its goods and their prices). A shop that
        creates its products as it takes prices: nothing."""
        return None

    def quarantined(self) -> dict[str, str]:
        """The prices the shop withholds from buyers (its price quarantine), by SKU."""
        return {}

    def particular(self, lang: Lang) -> list[str]:
        """Lines of the summary about what is the shop's own (a marketplace's limits)."""
        return []


class SiteShop(DemoShop):
    """The site (the shop API, ``sitesim``): it keeps the idempotency promise only
    (``check_versions=False``), so an old price sent over a newer one shows in what it
    applied; down is its ``Faults.down``: 503 to every request, the health check included."""

    target = "api"
    token = "demo-token"  # the simulator's; a real token never appears in code or output

    def __init__(self, name: str = "site") -> None:
        self.name = name
        self.sim: SiteSimulator = SiteSimulator(
            token=self.token, faults=Faults(seed=7), check_versions=False
        )
        self.outages: list[tuple[float, float | None]] = []  # (down, back): time.monotonic()

    def channel(self, directory: Path) -> dict[str, Any]:
        token = directory / f"{self.name}-token"
        token.write_text(self.token + "\n", encoding="utf-8")
        return {"target": self.target, "site_url": self.sim.url, "site_token_file": str(token)}

    def applied(self, since: int) -> list[tuple[str, str]]:
        # The demo stages prices only: every effect is a price's.
        return [(str(e.payload["sku"]), str(e.payload["price"])) for e in self.sim.effects(since)]

    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        held = self.sim.held_versions()
        price = {(e.aggregate, e.version): str(e.payload["price"]) for e in self.sim.effects()}
        out: dict[str, str | None] = {}
        for sku in skus:
            aggregate = f"{sku}/{PRICE_TYPE}"
            version = held.get(("price", aggregate))
            out[sku] = None if version is None else price.get((aggregate, version))
        return out

    def effects_twice(self) -> int:
        """Messages whose effect the site applied more than once (by ``Idempotency-Key``)."""
        return sum(1 for n in self.sim.effect_counts().values() if n > 1)

    def fail(self, down: bool) -> None:
        self.sim.faults.down = down
        if down:
            self.outages.append((time.monotonic(), None))
        elif self.outages and self.outages[-1][1] is None:
            self.outages[-1] = (self.outages[-1][0], time.monotonic())

    def refused(self) -> int:
        return self.sim.requests_by_status()[503]


class WooShop(DemoShop):
    """A second shop on WooCommerce (``woosim``): the retail price is the product's
    ``regular_price``; every write is in its ``writes()``."""

    target = "woocommerce"
    key, secret = "ck_demo_key", "cs_demo_secret"  # the simulator's own

    def __init__(self, name: str = "shop2") -> None:
        self.name = name
        self.sim: WooSimulator = WooSimulator(self.key, self.secret)

    def channel(self, directory: Path) -> dict[str, Any]:
        files = {}
        for part, value in (("key", self.key), ("secret", self.secret)):
            path = directory / f"{self.name}-{part}"
            path.write_text(value + "\n", encoding="utf-8")
            files[f"woo_{part}_file"] = str(path)
        return {
            "target": self.target,
            "woo_url": self.sim.url,
            **files,
            "woo_price_fields": {PRICE_TYPE: "regular_price"},
        }

    def applied(self, since: int) -> list[tuple[str, str]]:
        return [(sku, price) for _at, sku, price in self.sim.writes(since)]

    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        return {sku: self.sim.price(sku) for sku in skus}


class MarketShop(DemoShop):
    """A marketplace: what it applied is read from the price history of each of its goods
    (kept by its simulator); the order across goods is the watcher's (a look's new prices
    share its stamp)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._log: list[tuple[str, str]] = []
        self._seen: dict[str, int] = {}

    @abstractmethod
    def histories(self) -> dict[str, list[str]]:
        """Every price each SKU took there, in order (the one it held before not among them)."""

    def applied(self, since: int) -> list[tuple[str, str]]:
        for sku, prices in self.histories().items():
            seen = self._seen.get(sku, 0)
            self._log.extend((sku, price) for price in prices[seen:])
            self._seen[sku] = len(prices)
        return self._log[since:]

    def secret(self, directory: Path, part: str, value: str) -> str:
        path = directory / f"{self.name}-{part}"
        path.write_text(value + "\n", encoding="utf-8")
        path.chmod(0o600)
        return str(path)


class OzonShop(MarketShop):
    """Ozon (``ozonsim``): the retail price is the product's ``price``; at most 10 updates of a
    product an hour (its own limit, on its clock)."""

    target = "ozon"
    client_id, key = "836741", "ozon-demo-key"  # the simulator's own

    def __init__(self, name: str = "ozon") -> None:
        super().__init__(name)
        self.sim: OzonSimulator = OzonSimulator(self.client_id, self.key)

    def channel(self, directory: Path) -> dict[str, Any]:
        return {
            "target": self.target,
            "ozon_api_url": self.sim.url,
            "ozon_client_id": self.client_id,
            "ozon_api_key_file": self.secret(directory, "key", self.key),
            "ozon_price_types": {PRICE_TYPE: "price"},
        }

    def seed(self, before: dict[str, str]) -> None:
        for sku, price in before.items():
            self.sim.set_price(sku, Decimal(price))

    def histories(self) -> dict[str, list[str]]:
        return self.sim.histories()

    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for sku in skus:
            price = self.sim.price(sku)
            out[sku] = None if price is None else str(price)
        return out

    def particular(self, lang: Lang) -> list[str]:
        return [
            _(
                "      Ozon: {requests} price requests, {unchanged} prices it already held, "
                "{limited} refused by its limit of 10 updates of a product an hour",
                lang,
            ).format(
                requests=self.sim.requests[IMPORT_PRICES],
                unchanged=self.sim.outcomes["unchanged"],
                limited=self.sim.outcomes[ITEM_LIMIT],
            )
        ]


class WbShop(MarketShop):
    """Wildberries (``wbsim``): the retail price is the good's ``price`` (whole roubles), set by
    upload tasks processed later; a drop to a third or less waits in WB's price quarantine."""

    target = "wildberries"

    def __init__(self, name: str = "wildberries") -> None:
        super().__init__(name)
        self.sim: WbSimulator = WbSimulator(time_scale=WB_SCALE, switches=WbSwitches())
        self.nm: dict[str, int] = {}

    def channel(self, directory: Path) -> dict[str, Any]:
        return {
            "target": self.target,
            "wb_api_url": self.sim.url,
            "wb_token_file": self.secret(directory, "token", self.sim.token()),
            "wb_price_types": {PRICE_TYPE: "price"},
            # One task carries up to 1,000 goods: a batch as large keeps to few requests of
            # WB's 10 in 6 s.
            "batch_size": 1000,
        }

    def seed(self, before: dict[str, str]) -> None:
        for sku, price in before.items():
            self.nm[sku] = self.sim.add_good(sku, price=int(Decimal(price))).nm_id

    def histories(self) -> dict[str, list[str]]:
        with self.sim.lock:
            return {
                sku: [str(p) for p in self.sim.applied.get(nm, [])] for sku, nm in self.nm.items()
            }

    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        with self.sim.lock:
            goods = {sku: self.sim.goods.get(nm) for sku, nm in self.nm.items()}
        return {sku: None if goods.get(sku) is None else str(goods[sku].price) for sku in skus}  # type: ignore[union-attr]

    def quarantined(self) -> dict[str, str]:
        with self.sim.lock:
            held = dict(self.sim.quarantine)
        by_nm = {nm: sku for sku, nm in self.nm.items()}
        return {by_nm[nm]: str(entry["newPrice"]) for nm, entry in held.items() if nm in by_nm}

    def particular(self, lang: Lang) -> list[str]:
        return [
            _(
                "      Wildberries: {tasks} upload tasks, {requests} requests in all (within its "
                "10 requests in 6 s), {quarantined} in its price quarantine",
                lang,
            ).format(
                tasks=len(self.sim.tasks),
                requests=sum(self.sim.requests.values()),
                quarantined=len(self.quarantined()),
            )
        ]


class YmShop(MarketShop):
    """Yandex Market (``ymsim``): the retail price is the offer's ``value``; a 200 means
    accepted, applied a (simulated) minute later; a change by more than half waits in Yandex's
    price quarantine until confirmed (``exchange withheld release``)."""

    target = "yandex-market"
    key, business = "ym-demo-key", 1001  # the simulator's own

    def __init__(self, name: str = "yandex-market") -> None:
        super().__init__(name)
        self.sim: YmSimulator = YmSimulator(
            self.key,
            self.business,
            clock=SimClock(YM_SCALE),
            switches=YmSwitches(apply_delay=YM_APPLY_DELAY),
        )

    def channel(self, directory: Path) -> dict[str, Any]:
        settings = channel_settings(self.sim, self.secret(directory, "key", self.key))
        settings["ym_price_types"] = {PRICE_TYPE: "value"}
        settings["ym_apply_timeout"] = YM_APPLY_TIMEOUT
        return settings

    def seed(self, before: dict[str, str]) -> None:
        for sku, price in before.items():
            self.sim.set_live(sku, Decimal(price))

    def histories(self) -> dict[str, list[str]]:
        return {sku: [str(p) for p in prices] for sku, prices in self.sim.histories().items()}

    def held(self, skus: Iterable[str]) -> dict[str, str | None]:
        live = self.sim.lives()
        out: dict[str, str | None] = {}
        for sku in skus:
            price = live.get(sku)
            out[sku] = None if price is None else str(price.value)
        return out

    def quarantined(self) -> dict[str, str]:
        return {sku: str(q.current.value) for sku, q in self.sim.quarantined().items()}

    def particular(self, lang: Lang) -> list[str]:
        return [
            _(
                "      Yandex Market: {updates} price updates, {reads} read-backs of what it "
                "shows, {quarantined} in its price quarantine",
                lang,
            ).format(
                updates=self.sim.requests["offer-prices/updates"],
                reads=self.sim.requests["offer-prices"],
                quarantined=len(self.quarantined()),
            )
        ]


def shops() -> list[DemoShop]:
    """The demo's channels, in the order of their channels: the site, a second shop, and the
    three marketplaces."""
    return [SiteShop(), WooShop(), OzonShop(), WbShop(), YmShop()]


def staged_rows(
    skus: int, rng: random.Random
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """Several versions of the retail price of each of ``skus`` SKUs, in whole roubles (every
    version its own price, so that what a shop applied names the version; ``SHARP_DROP``'s
    newest a quarter of the one before it), the newest price of each, and the price each had
    before (what the marketplaces hold at the start, never one of the versions)."""
    rows: list[dict[str, Any]] = []
    newest: dict[str, str] = {}
    before: dict[str, str] = {}
    for n in range(skus):
        sku = f"SKU-{n:04d}"
        roubles = rng.randint(1_000, 9_999)
        before[sku] = f"{roubles}.00"
        taken = {roubles}
        count = rng.randint(1, 3)
        for version in range(1, count + 1):
            if sku == SHARP_DROP and version == count:
                roubles //= 4
            else:
                roubles += rng.choice((-1, 1)) * rng.randint(1, 50)
            while roubles in taken:  # each version a price of its own: the price names it
                roubles += 1
            taken.add(roubles)
            price = f"{roubles}.00"
            newest[sku] = price
            payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": PRICE_TYPE}
            rows.append(
                {
                    "kind": "price",
                    "aggregate": f"{sku}/{PRICE_TYPE}",
                    "aggregate_version": version,
                    "payload": json.dumps(payload),
                    "schema_version": "1",
                    "source_ref": f"Установка цен номенклатуры {version:06d}",
                }
            )
    return rows, newest, before


def versions(rows: list[dict[str, Any]]) -> dict[tuple[str, Decimal], int]:
    """(SKU, price) -> the version that carries it."""
    out = {}
    for row in rows:
        payload = json.loads(row["payload"])
        out[(payload["sku"], Decimal(payload["price"]))] = row["aggregate_version"]
    return out


@dataclass
class Watcher:
    """A thread that looks at the shops every ``WATCH_EVERY`` s: stamps each price a shop
    applied with when it appeared, and ends the failing shop's outage once every other shop
    holds the newest price of every SKU and ``OUTAGE_AT_LEAST`` passed (or ``OUTAGE_AT_MOST``
    passed)."""

    shops: list[DemoShop]
    failing: DemoShop
    newest: dict[str, str]
    started: float
    outage_at_most: float = OUTAGE_AT_MOST
    seen: dict[str, list[tuple[float, str, str]]] = field(default_factory=dict)
    outage_ended: float | None = None
    failed: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.failing.fail(True)
        self._thread = threading.Thread(target=self._watch, name="demo-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.failed is not None:
            raise RuntimeError(f"the demo's watcher failed: {self.failed!r}") from self.failed
        self._look()
        if self.outage_ended is None:  # the run ended first (it failed): the shop is back
            self._end_outage()

    def _watch(self) -> None:
        try:
            self._watching()
        except BaseException as exc:  # the run goes on; stop() raises it (never a silent end)
            self.failed = exc
            if self.outage_ended is None:
                self._end_outage()

    def _watching(self) -> None:
        while not self._stop.wait(WATCH_EVERY):
            self._look()
            since = time.monotonic() - self.started
            if self.outage_ended is None and (
                since >= self.outage_at_most
                or (
                    since >= OUTAGE_AT_LEAST
                    and all(self._holds_newest(s) for s in self.shops if s is not self.failing)
                )
            ):
                self._end_outage()

    def _end_outage(self) -> None:
        self.failing.fail(False)
        self.outage_ended = time.monotonic() - self.started

    def _look(self) -> None:
        now = time.monotonic() - self.started
        for shop in self.shops:
            seen = self.seen.setdefault(shop.name, [])
            seen.extend((now, sku, price) for sku, price in shop.applied(len(seen)))

    def _holds_newest(self, shop: DemoShop) -> bool:
        """Every SKU's newest price held by the shop, or withheld by its price quarantine."""
        held, withheld = shop.held(self.newest), shop.quarantined()
        return all(
            _same(held[sku], price) or _same(withheld.get(sku), price)
            for sku, price in self.newest.items()
        )


def run_channels_demo(
    directory: Path,
    *,
    skus: int = 500,
    console: Console | None = None,
    lang: Lang = "en",
    outage_at_most: float = OUTAGE_AT_MOST,
) -> int:
    """The demo (the module's docstring); 0 when every promise held, else 1 (3: the run did
    not end idle)."""
    console = console or Console()
    logging.getLogger("exchange").addHandler(logging.NullHandler())
    rng = random.Random(20261205)
    database = directory / "demo-channels.db"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("demo-channels.db*"):
            stale.unlink()
    except OSError as exc:
        raise ExchangeError(
            f"cannot prepare the demo directory {directory}: {exc.strerror or exc}"
        ) from None
    rows, newest, before = staged_rows(skus, rng)
    demo_shops = shops()
    failing = next(shop for shop in demo_shops if shop.name == FAILING)
    entered: list[DemoShop] = []
    try:
        for shop in demo_shops:
            entered.append(shop.__enter__())
            shop.seed(before)
        settings = _settings(database, {shop.name: shop.channel(directory) for shop in entered})
        engine = make_engine(settings.database_url)
        upgrade(engine, channel=demo_shops[0].name, target=demo_shops[0].target)
        bootstrap.register_channels(settings, engine)
        with transaction(engine) as connection:
            stage(connection, rows)
        for shop in demo_shops:
            console.print(
                _("channel {channel}: {target} at {url}", lang).format(
                    channel=shop.name, target=shop.target, url=shop.url
                ),
                markup=False,
                highlight=False,
            )
        console.print(
            ngettext(
                "staged {count} price of {skus} SKUs; the shop {channel} is down (503) until "
                "the others hold every price",
                "staged {count} prices of {skus} SKUs; the shop {channel} is down (503) until "
                "the others hold every price",
                len(rows),
                lang,
            ).format(count=len(rows), skus=skus, channel=failing.name),
            markup=False,
            highlight=False,
        )
        if SHARP_DROP in newest:
            console.print(
                _(
                    "the newest price of {sku} is a sharp drop, to {price}: a marketplace may "
                    "withhold it in its price quarantine",
                    lang,
                ).format(sku=SHARP_DROP, price=number(Decimal(newest[SHARP_DROP]), lang)),
                markup=False,
                highlight=False,
            )
        worker = bootstrap.worker(settings, engine, rng=random.Random(1))
        started = time.monotonic()
        watcher = Watcher(demo_shops, failing, newest, started, outage_at_most)
        watcher.start()

        async def go() -> int:
            try:
                return await run_until_idle(
                    worker, max_seconds=outage_at_most + 120, poll_interval=settings.poll_interval
                )
            finally:
                await worker.aclose()

        try:
            code = asyncio.run(go())
        finally:
            worker.retire()
            watcher.stop()
        elapsed = time.monotonic() - started
        summary = _summary(engine, demo_shops, failing, watcher, rows, newest, elapsed)
        # While the simulators still run: after the demo they and the channels' settings are
        # gone, so no command could reach a marketplace (issue 32).
        summary["released"] = _release_one(engine, settings, summary)
        engine.dispose()
    finally:
        for shop in reversed(entered):
            shop.__exit__(None, None, None)
    _print_summary(console, summary, lang)
    if code == 0 and not summary["ok"]:
        return 1
    return code


def _settings(database: Path, channels: dict[str, dict[str, Any]]) -> Settings:
    # The demo's own settings alone: nothing of the shell's EXCHANGE_* or configuration file.
    return given_settings(
        database_url=f"sqlite:///{database}",
        channels=channels,
        worker_id="demo-worker",
        poll_interval=0.05,
        batch_size=200,
        concurrency=8,
        lease_seconds=30,
        # A long outage is many failures: the breaker holds them off, and no price runs out
        # of attempts while the shop is down (contract 5: a temporary failure is retried).
        max_attempts=50,
        retry_base_delay=0.05,
        retry_max_delay=0.5,
        http_timeout=2.0,
        breaker_threshold=5,
    )


def _summary(
    engine: Any,
    demo_shops: list[DemoShop],
    failing: DemoShop,
    watcher: Watcher,
    rows: list[dict[str, Any]],
    newest: dict[str, str],
    elapsed: float,
) -> dict[str, Any]:
    version_of = versions(rows)
    shops_: list[dict[str, Any]] = []
    for shop in demo_shops:
        writes = [
            Write(at, sku, version_of[(sku, Decimal(price))])
            for at, sku, price in watcher.seen.get(shop.name, [])
        ]
        twice = Counter((w.sku, w.version) for w in writes)
        last: dict[str, int] = {}
        older = 0
        for w in writes:
            if w.version < last.get(w.sku, 0):
                older += 1
            last[w.sku] = max(w.version, last.get(w.sku, 0))
        delivered = {
            d.sku: Decimal(json.loads(d.message.payload)["price"])
            for d in latest_delivered(engine, shop.name)
        }
        held = shop.held(delivered)
        holds = all(_same(held[sku], price) for sku, price in delivered.items())
        with transaction(engine, read_only=True) as connection:
            ids = channel_ids(connection, shop.name)
            by = Counter(by_state_and_reason(connection, ids))
            withheld_rows = [w for i in ids for w in waiting(connection, channel_id=i)]
        # Withheld by the marketplace itself: the newest version waits in its price
        # quarantine, the demo's simulator says so too (not only the service).
        quarantined = shop.quarantined()
        withheld = [
            w
            for w in withheld_rows
            if _sku(w) in newest
            and json.loads(w.payload)["price"] == newest[_sku(w)]
            and _sku(w) in quarantined
            and Decimal(quarantined[_sku(w)]) == Decimal(newest[_sku(w)])
        ]
        shops_.append(
            {
                "name": shop.name,
                "target": shop.target,
                "failing": shop is failing,
                "first": writes[0].at if writes else None,
                "last": writes[-1].at if writes else None,
                "newest": sum(1 for sku in newest if delivered.get(sku) == Decimal(newest[sku])),
                "withheld": [
                    {
                        "message_id": w.message_id,
                        "sku": _sku(w),
                        "price": json.loads(w.payload)["price"],
                        "said": w.said or "",
                    }
                    for w in withheld
                ],
                "withheld_elsewhere": len(withheld_rows) - len(withheld),
                "particular": shop.particular,
                "skus": len(newest),
                "twice": sum(1 for n in twice.values() if n > 1),
                "older": older,
                "holds": holds and bool(delivered),
                "states": dict(by),
            }
        )
    outage = watcher.outage_ended
    assert outage is not None  # the watcher's stop ends it at the latest
    healthy_in_time = all(
        s["last"] is not None and s["last"] <= outage and _every(s)
        for s in shops_
        if not s["failing"]
    )
    caught_up = all(
        _every(s) and (s["first"] is None or s["first"] >= outage) for s in shops_ if s["failing"]
    )
    clean = all(
        s["twice"] == 0 and s["older"] == 0 and s["holds"] and not s["withheld_elsewhere"]
        for s in shops_
    )
    return {
        "shops": shops_,
        "failing": failing.name,
        "outage": outage,
        "refused": failing.refused(),
        "healthy_in_time": healthy_in_time,
        "caught_up": caught_up,
        "ok": healthy_in_time and caught_up and clean,
        "seconds": elapsed,
    }


# The channel whose withheld price the demo releases itself: it has a way to release one
# (Wildberries has none: the seller confirms it in the cabinet).
RELEASED_ON = "yandex-market"


def _release_one(engine: Any, settings: Settings, summary: dict[str, Any]) -> dict[str, Any] | None:
    """Release one price Yandex Market withholds, through ``exchange withheld release``'s own
    code path (``delivery.withheld``: the channel chosen as the command chooses it, its target
    built from its settings), while the demo's simulators run: what an operator does in a real
    installation, shown to work. None when it withholds none."""
    shop = next((s for s in summary["shops"] if s["name"] == RELEASED_ON), None)
    if shop is None or not shop["withheld"]:
        return None
    message_id = shop["withheld"][0]["message_id"]

    async def go() -> list[release.Released]:
        name = release.choose_channel(engine, [message_id], RELEASED_ON)
        target = bootstrap.target(bootstrap.named_channel(settings, name), engine=engine)
        try:
            return await release.release(
                engine,
                target,
                [message_id],
                operator="demo",
                note="the demo shows a release",
                now=SystemClock().now,
                channel=name,
                kinds=settings.kinds,
            )
        finally:
            await target.aclose()

    (done,) = asyncio.run(go())
    return {
        "message_id": message_id,
        "channel": RELEASED_ON,
        "asked": done.asked,
        "detail": done.detail,
    }


def _same(held: str | None, price: str | Decimal) -> bool:
    """``held`` (a shop's own text: none, or "" for a product with no price yet) is ``price``."""
    try:
        return held is not None and Decimal(held) == Decimal(price)
    except InvalidOperation:
        return False


def _sku(w: Withheld) -> str:
    return str(json.loads(w.payload)["sku"])


def _every(shop: dict[str, Any]) -> bool:
    """Every SKU's newest price delivered, or withheld by the channel's own quarantine."""
    return bool(shop["newest"] + len(shop["withheld"]) == shop["skus"])


def _print_summary(console: Console, s: dict[str, Any], lang: Lang) -> None:
    def say(message: str, **values: Any) -> None:
        console.print(message.format(**values), markup=False, highlight=False)

    def yes(answer: bool) -> str:
        return _("yes", lang) if answer else _("NO", lang)

    def seconds(at: float | None) -> str:
        return "—" if at is None else number(at, lang)

    say(_("done in {seconds} s", lang), seconds=number(s["seconds"], lang))
    say(
        ngettext(
            "the shop {channel} was down (503) from 0 s to {end} s: {count} request refused",
            "the shop {channel} was down (503) from 0 s to {end} s: {count} requests refused",
            s["refused"],
            lang,
        ),
        channel=s["failing"],
        end=number(s["outage"], lang),
        count=s["refused"],
    )
    for shop in s["shops"]:
        say(
            _("  {channel} ({target}): first price landed at {first} s, last at {last} s", lang),
            channel=shop["name"],
            target=shop["target"],
            first=seconds(shop["first"]),
            last=seconds(shop["last"]),
        )
        say(
            _("      SKUs that hold their newest price: {count} of {skus}", lang),
            count=shop["newest"],
            skus=shop["skus"],
        )
        say(_("      effects applied twice {count}", lang), count=shop["twice"])
        say(_("      old prices applied over newer ones {count}", lang), count=shop["older"])
        say(
            _("      holds the latest delivered price of every SKU: {answer}", lang),
            answer=yes(shop["holds"]),
        )
        for line in shop["particular"](lang):
            console.print(line, markup=False, highlight=False)
        for w in shop["withheld"]:
            say(
                _("      withheld: {sku} at {price} (the channel said: {said})", lang),
                sku=w["sku"],
                price=number(Decimal(w["price"]), lang),
                said=detail_words(w["said"]) if lang == "ru" else w["said"],
            )
            if shop["target"] == "wildberries":
                # Wildberries' price quarantine is released in its cabinet, by the seller
                # (research §2.4): the command releases nothing there (review mpadvice item 9)
                say(
                    _(
                        "        in a real installation the seller releases it in the "
                        "Wildberries seller's cabinet (Цены и скидки → Карантин цен); the "
                        "service sees it released when Wildberries shows the price",
                        lang,
                    )
                )
                continue
            say(
                _(
                    "        in a real installation an operator releases it with: exchange "
                    "withheld release {message_id} --channel {channel} --note TEXT",
                    lang,
                ),
                message_id=w["message_id"],
                channel=shop["name"],
            )
        if shop["withheld_elsewhere"]:
            say(
                _("      withheld though the channel does not withhold it: {count}", lang),
                count=shop["withheld_elsewhere"],
            )
    say(
        _(
            "every other channel got all its prices during the outage (never held back): {answer}",
            lang,
        ),
        answer=yes(s["healthy_in_time"]),
    )
    say(
        _("the shop {channel} caught up after the outage: {answer}", lang),
        channel=s["failing"],
        answer=yes(s["caught_up"]),
    )
    released = s.get("released")
    if released is not None:
        # Issue 32: the release shown while the simulators ran; after the demo they are gone.
        say(
            _(
                "the demo released {message_id} on {channel} itself, through exchange withheld "
                "release's own code, while its simulators ran: {answer}",
                lang,
            ),
            message_id=released["message_id"],
            channel=released["channel"],
            answer=detail_words(released["detail"]) if lang == "ru" else released["detail"],
        )
        say(
            _(
                "after the demo its simulators and channels are gone: the command is what an "
                "operator runs in a real installation",
                lang,
            )
        )
