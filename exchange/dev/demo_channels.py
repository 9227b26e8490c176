"""``exchange demo --channels``: one 1C, several shops (contract 13, issue 31 item 8).

A fresh SQLite file and the demo's shops, each a simulator on loopback and a channel of
``EXCHANGE_CHANNELS`` (``SHOPS``: the site, ``exchange.dev.sitesim``, and a second shop,
WooCommerce, ``exchange.dev.woosim``). 1C stages several versions of the retail price of each
SKU; one ``exchange run`` delivers them to every shop. One shop (``FAILING``, the site) is down
from the start, answering 503 to every request (its health check too), until every other shop
holds the newest price of every SKU (and at least ``OUTAGE_AT_LEAST`` seconds passed), or
``OUTAGE_AT_MOST`` seconds passed; then it comes back and the service catches it up.

The summary is computed from what the shops applied (each write stamped by the demo's
watcher as it appears: ``Watcher``), not from what the service believes:

- the healthy shop's prices all landed during the other's outage (when its first and last
  price landed, when the outage ended): it was never held back;
- the failing shop got every price after it came back;
- on every shop: no effect applied twice, no old price applied over a newer one, and the
  shop holds the newest delivered price of every SKU.

Adding a shop to the demo (the marketplace simulators, ``ozonsim``, ``wbsim``, ``ymsim``) is
one more ``DemoShop`` in ``SHOPS``: its simulator, its channel's settings, and what it applied.
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
from decimal import Decimal
from pathlib import Path
from typing import Any

from rich.console import Console

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.on_channels import by_state_and_reason, channel_ids
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.woosim import WooSimulator
from exchange.errors import ExchangeError
from exchange.i18n import Lang, _, ngettext, number
from exchange.intake.stage import stage
from exchange.ops.verify import latest_delivered
from exchange.runner import run_until_idle
from exchange.settings import Settings, given_settings

FAILING = "site"  # the shop that is down for a while
OUTAGE_AT_LEAST = 3.0  # seconds: the failing shop is down at least this long (its breaker opens)
OUTAGE_AT_MOST = 60.0  # seconds: the outage ends then, whatever the healthy shops did
WATCH_EVERY = 0.02  # seconds between two looks of the watcher at the shops
PRICE_TYPE = "retail"


@dataclass(frozen=True)
class Write:
    """One price a shop applied: when (seconds since the run began, as the watcher saw it
    appear), the SKU, the version (from the price: each version of a SKU has its own)."""

    at: float
    sku: str
    version: int


class DemoShop(ABC):
    """One shop of the demo: its simulator, its channel in ``EXCHANGE_CHANNELS``, and what it
    applied."""

    name: str  # the channel's name
    target: str  # the channel's target

    @property
    @abstractmethod
    def url(self) -> str:
        """Where its simulator listens."""

    @abstractmethod
    def __enter__(self) -> DemoShop: ...

    @abstractmethod
    def __exit__(self, *exc: object) -> None: ...

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


class SiteShop(DemoShop):
    """The site (the shop API, ``sitesim``): it keeps the idempotency promise only
    (``check_versions=False``), so an old price sent over a newer one shows in what it
    applied; down is its ``Faults.down``: 503 to every request, the health check included."""

    target = "api"
    token = "demo-token"  # the simulator's; a real token never appears in code or output

    def __init__(self, name: str = "site") -> None:
        self.name = name
        self.sim = SiteSimulator(token=self.token, faults=Faults(seed=7), check_versions=False)
        self.outages: list[tuple[float, float | None]] = []  # (down, back): time.monotonic()

    @property
    def url(self) -> str:
        return self.sim.url

    def __enter__(self) -> SiteShop:
        self.sim.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sim.stop()

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
        self.sim = WooSimulator(self.key, self.secret)

    @property
    def url(self) -> str:
        return self.sim.url

    def __enter__(self) -> WooShop:
        self.sim.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sim.stop()

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


def shops() -> list[DemoShop]:
    """The demo's shops, in the order of their channels: the list a marketplace joins."""
    return [SiteShop(), WooShop()]


def staged_rows(skus: int, rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Several versions of the retail price of each of ``skus`` SKUs (every version its own
    price, so that what a shop applied names the version), and the newest price of each."""
    rows: list[dict[str, Any]] = []
    newest: dict[str, str] = {}
    for n in range(skus):
        sku = f"SKU-{n:04d}"
        kopecks = rng.randint(10_000, 99_999)
        taken: set[int] = set()
        for version in range(1, rng.randint(1, 3) + 1):
            kopecks += rng.choice((-1, 1)) * rng.randint(1, 500)
            while kopecks in taken:  # each version a price of its own: the price names it
                kopecks += rng.randint(1, 500)
            taken.add(kopecks)
            price = f"{kopecks / 100:.2f}"
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
    return rows, newest


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
        self._look()
        if self.outage_ended is None:  # the run ended first (it failed): the shop is back
            self._end_outage()

    def _watch(self) -> None:
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
        held = shop.held(self.newest)
        return all(
            held[sku] is not None and Decimal(str(held[sku])) == Decimal(price)
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
    rows, newest = staged_rows(skus, rng)
    demo_shops = shops()
    failing = next(shop for shop in demo_shops if shop.name == FAILING)
    entered: list[DemoShop] = []
    try:
        for shop in demo_shops:
            entered.append(shop.__enter__())
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
        holds = all(
            held[sku] is not None and Decimal(str(held[sku])) == price
            for sku, price in delivered.items()
        )
        with transaction(engine, read_only=True) as connection:
            by = Counter(by_state_and_reason(connection, channel_ids(connection, shop.name)))
        shops_.append(
            {
                "name": shop.name,
                "target": shop.target,
                "failing": shop is failing,
                "first": writes[0].at if writes else None,
                "last": writes[-1].at if writes else None,
                "newest": sum(1 for sku in newest if delivered.get(sku) == Decimal(newest[sku])),
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
        s["last"] is not None and s["last"] <= outage and s["newest"] == s["skus"]
        for s in shops_
        if not s["failing"]
    )
    caught_up = all(
        s["newest"] == s["skus"] and (s["first"] is None or s["first"] >= outage)
        for s in shops_
        if s["failing"]
    )
    clean = all(s["twice"] == 0 and s["older"] == 0 and s["holds"] for s in shops_)
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
    say(
        _(
            "every other shop got all its prices during the outage (never held back): {answer}",
            lang,
        ),
        answer=yes(s["healthy_in_time"]),
    )
    say(
        _("the shop {channel} caught up after the outage: {answer}", lang),
        channel=s["failing"],
        answer=yes(s["caught_up"]),
    )
