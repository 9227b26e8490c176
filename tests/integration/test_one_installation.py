"""One installation with every channel (issue 32: "the three marketplaces run as channels beside
the site in one installation"; contract 13, 14), on SQLite and PostgreSQL.

``EXCHANGE_CHANNELS`` names the site (``api``, as migrate registered it), ``ozon``,
``wildberries`` and ``yandex-market``, each pointed at its simulator over real HTTP on
loopback; the worker is the one ``exchange run`` builds (``exchange.app``), all channels in
one process. 1C stages two price types of several SKUs in two waves (several versions each)
and a posting, which only the site takes (contract 13 ``takes``: the marketplaces take prices
only). Wildberries is down through the first wave (every connection refused, as a host that
is down refuses them): the site, paused by an operator until Wildberries' breaker opens, then
gets all of that wave while it stays open.

Asserted from the database and from each simulator's own state, not from what the service
says it did: every channel holds the latest price of every SKU and every price type it maps
(Wildberries maps the retail one only: the other is ``not-for-this-shop``), no effect applied
twice, never an older version over a newer one, the posting at the site alone, and the site
never waited for the marketplace that was down.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ozon_channel, ozon_sim, wb_channel, wb_sim, ym_channel, ym_sim
from sqlalchemy import Engine, select
from tcpproxy import TcpProxy

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, messages
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import FAST, posting_row, stage
from exchange.dev.wbsim import WbSimulator
from exchange.dev.ymsim import YmSimulator
from exchange.domain.clock import SystemClock
from exchange.queue import control
from exchange.runner import run_until_idle
from exchange.settings import Settings, load_settings

TOKEN = "test-token"
SKUS = [f"SKU-{n}" for n in range(1, 5)]
# Wave by wave, the versions of each price type staged then (every version of every SKU its
# own whole-rouble price, so that a price a marketplace holds names its version).
WAVES: list[dict[str, list[int]]] = [{"retail": [1], "old": [1]}, {"retail": [2, 3], "old": [2]}]
CHANNELS = ("api", "ozon", "wildberries", "yandex-market")


def price(sku: str, price_type: str, version: int) -> Decimal:
    """Whole roubles (Wildberries takes no others); the old price half as much again as any
    retail one (Ozon's gap of more than 5 %, Yandex's discount of 5-99 %), small steps (no
    marketplace's quarantine of a sharp change)."""
    n = int(sku.removeprefix("SKU-"))
    base = 2000 if price_type == "old" else 1000
    return Decimal(base + 100 * n + 10 * version)


def row(sku: str, price_type: str, version: int) -> dict[str, Any]:
    payload = {
        "sku": sku,
        "price": f"{price(sku, price_type, version)}.00",
        "currency": "RUB",
        "price_type": price_type,
    }
    return {
        "kind": "price",
        "aggregate": f"{sku}/{price_type}",
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Установка цен номенклатуры {version:06d}",
    }


def wave(n: int) -> list[dict[str, Any]]:
    rows = [row(sku, t, v) for sku in SKUS for t, vs in WAVES[n].items() for v in vs]
    return [*rows, posting_row("DOC-1", n + 1)]


LATEST = {t: max(v for w in WAVES for v in w.get(t, [])) for t in ("retail", "old")}
VERSION_OF = {
    (sku, t, price(sku, t, v)): v for sku in SKUS for w in WAVES for t, vs in w.items() for v in vs
}


@dataclass
class Sims:
    site: SiteSimulator
    ozon: OzonSimulator
    wb: WbSimulator
    ym: YmSimulator
    wb_door: TcpProxy  # the way to Wildberries: cut, it is down


@pytest.fixture
def sims() -> Iterator[Sims]:
    with ExitStack() as stack:
        # The site keeps the idempotency promise only: an old price sent over a newer one
        # would show in its stale writes instead of being refused.
        site = stack.enter_context(SiteSimulator(token=TOKEN, check_versions=False))
        ozon = stack.enter_context(ozon_sim())
        # WB's goods hold a price already (an account's goods do): the staged ones are rises.
        wb = stack.enter_context(wb_sim((sku, int(price(sku, "retail", 0))) for sku in SKUS))
        ym = stack.enter_context(ym_sim())
        door = stack.enter_context(TcpProxy("127.0.0.1", int(wb.url.rsplit(":", 1)[1])))
        yield Sims(site, ozon, wb, ym, door)


def installation(db_url: str, tmp_path: Path, sims: Sims) -> Settings:
    token = tmp_path / "site-token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    named: dict[str, dict[str, Any]] = {
        "api": {"target": "api", "site_url": sims.site.url, "site_token_file": str(token)},
        "ozon": ozon_channel(sims.ozon, tmp_path, {"retail": "price", "old": "old_price"}),
        "wildberries": {
            **wb_channel(sims.wb, tmp_path, {"retail": "price", "old": None}),
            "wb_api_url": f"http://127.0.0.1:{sims.wb_door.port}",
        },
        "yandex-market": ym_channel(
            sims.ym, tmp_path, {"retail": "value", "old": "discountBase"}, ym_apply_timeout=10
        ),
    }
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(
        database_url=db_url,
        worker_id="test-worker",
        # Wildberries down for a while is many failures: none may run out of attempts.
        **{**fast, "max_attempts": 200, "retry_base_delay": 0.05, "retry_max_delay": 0.3},
        channels=named,
    )


def site_holds(site: SiteSimulator, waves: int) -> bool:
    """The site holds the latest version of every price of the first ``waves`` waves and of
    the posting."""
    held = site.held_versions()
    want = {
        ("price", f"{sku}/{t}"): max(vs)
        for w in WAVES[:waves]
        for t, vs in w.items()
        for sku in SKUS
    }
    want[("financial_posting", "DOC-1")] = waves
    return all(held.get(key) == version for key, version in want.items())


def test_one_installation_carries_every_price_to_the_site_and_the_three_marketplaces(
    db_url: str, engine: Engine, sims: Sims, tmp_path: Path
) -> None:
    settings = installation(db_url, tmp_path, sims)
    bootstrap.register_channels(settings, engine)
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    assert [loop.channel for loop in worker.loops] == list(CHANNELS)
    seen: dict[str, Any] = {}

    wb_loop = worker.loops[CHANNELS.index("wildberries")]

    async def lift_the_outage_once_the_site_holds_the_wave() -> None:
        # The site waits (paused by an operator) until Wildberries' breaker is open: the
        # site's whole wave is then delivered while that channel is down.
        while not wb_loop.breaker.is_open():
            await asyncio.sleep(0.02)
        with transaction(engine) as connection:
            assert control.resume(connection, operator="test", channel="api")
        while not site_holds(sims.site, 1):
            await asyncio.sleep(0.02)
        seen["wb_applied"] = {nm: list(p) for nm, p in sims.wb.applied.items() if p}
        seen["wb_breaker_open"] = wb_loop.breaker.is_open()
        sims.wb_door.restore()

    async def scenario() -> list[int]:
        codes = []
        try:
            sims.wb_door.cut()
            with transaction(engine) as connection:
                assert control.pause(
                    connection, operator="test", note="", now=SystemClock().now(), channel="api"
                )
            stage(engine, wave(0))
            lifting = asyncio.create_task(lift_the_outage_once_the_site_holds_the_wave())
            codes.append(await run_until_idle(worker, max_seconds=90, poll_interval=0.02))
            await asyncio.wait_for(lifting, 5)
            stage(engine, wave(1))
            codes.append(await run_until_idle(worker, max_seconds=90, poll_interval=0.02))
        finally:
            await worker.aclose()
        return codes

    assert asyncio.run(scenario()) == [0, 0]

    # -- the site was never held back by the marketplace that was down ---------------------
    assert seen["wb_applied"] == {}, "Wildberries was down"
    assert seen["wb_breaker_open"], "the site's wave was delivered while WB's breaker was open"

    # -- the database: every latest version delivered on every channel that maps it ---------
    states = delivery_states(engine)
    for channel in CHANNELS:
        for sku in SKUS:
            for t, version in LATEST.items():
                expected = (
                    ("cancelled", "not-for-this-shop")
                    if (channel, t) == ("wildberries", "old")
                    else ("delivered", None)
                )
                assert states[channel][(f"{sku}/{t}", version)] == expected, (channel, sku, t)
        left = {s for s, _r in states[channel].values()} - {"delivered", "cancelled"}
        assert not left, (channel, states[channel], last_errors(engine))
    # The posting: the site's alone (the marketplaces take prices only).
    assert {(a, v) for (a, v) in states["api"] if a == "DOC-1"} == {("DOC-1", 1), ("DOC-1", 2)}
    for channel in CHANNELS[1:]:
        assert not [key for key in states[channel] if key[0] == "DOC-1"], channel

    # -- the site, from its own state --------------------------------------------------------
    assert site_holds(sims.site, len(WAVES))
    assert all(n == 1 for n in sims.site.effect_counts().values()), "an effect applied twice"
    assert sims.site.stale_writes() == [], "an old price applied over a newer one"

    # -- Ozon: price and old_price, every update in order, none twice -------------------------
    for sku in SKUS:
        product = sims.ozon.product(sku)
        assert product is not None
        assert (product.price, product.old_price) == (
            price(sku, "retail", LATEST["retail"]),
            price(sku, "old", LATEST["old"]),
        ), sku
        steps = [
            {
                t: VERSION_OF[(sku, t, value)]
                for t, name in (("retail", "price"), ("old", "old_price"))
                if (value := update.get(name)) is not None
            }
            for update in sims.ozon.updates(sku)
        ]
        assert_in_order(f"ozon {sku}", steps)

    # -- Wildberries: the retail price, every task's outcome in order, none twice -------------
    for sku in SKUS:
        good = sims.wb.by_vendor_code(sku)
        assert good is not None
        assert good.price == price(sku, "retail", LATEST["retail"]), sku
        assert good.discount == 0, "the discount is the seller's, never sent"
        steps = [
            {"retail": VERSION_OF[(sku, "retail", Decimal(p))]} for p in sims.wb.applied[good.nm_id]
        ]
        assert_in_order(f"wildberries {sku}", steps)
    assert not sims.wb.quarantine

    # -- Yandex Market: value and discountBase live, every price in order, none twice ---------
    for sku in SKUS:
        live = sims.ym.live(sku)
        assert live is not None
        assert (live.value, live.discount_base) == (
            price(sku, "retail", LATEST["retail"]),
            price(sku, "old", LATEST["old"]),
        ), sku
        steps = [
            {
                t: VERSION_OF[(sku, t, value)]
                for t, value in (("retail", p.value), ("old", p.discount_base))
                if value is not None
            }
            for p in sims.ym.applied(sku)
        ]
        assert_in_order(f"yandex-market {sku}", steps)
    assert not sims.ym.quarantined()


def assert_in_order(where: str, steps: list[dict[str, int]]) -> None:
    """What a marketplace applied to one good, update by update (the version of each price
    type it carried, an update leaving a type out keeping the one before): never a version
    below one applied before (old over new), never the same versions again (an effect twice),
    and the latest of every type it carried last."""
    assert steps, f"{where}: nothing applied"
    held: dict[str, int] = {}
    before: list[dict[str, int]] = []
    for step in steps:
        for t, version in step.items():
            assert version >= held.get(t, 0), f"{where}: v{version} of {t} over v{held[t]}"
        held = {**held, **step}
        assert held not in before, f"{where}: {held} applied twice ({steps})"
        before.append(dict(held))
    assert all(held[t] == LATEST[t] for t in held), (where, held)


def last_errors(engine: Engine) -> list[tuple[str, str, int, str, str | None]]:
    with transaction(engine, read_only=True) as connection:
        return [
            tuple(r)  # type: ignore[misc]
            for r in connection.execute(
                select(
                    channels.c.name,
                    messages.c.aggregate,
                    messages.c.version,
                    deliveries.c.state,
                    deliveries.c.last_error,
                )
                .join(deliveries, deliveries.c.channel_id == channels.c.id)
                .join(messages, messages.c.id == deliveries.c.message_pk)
                .where(deliveries.c.state == "quarantined")
            )
        ]


def delivery_states(engine: Engine) -> dict[str, dict[tuple[str, int], tuple[str, str | None]]]:
    """Each channel's deliveries: (aggregate, version) -> (state, reason)."""
    out: dict[str, dict[tuple[str, int], tuple[str, str | None]]] = defaultdict(dict)
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(
            select(
                channels.c.name,
                messages.c.aggregate,
                messages.c.version,
                deliveries.c.state,
                deliveries.c.reason,
            )
            .join(deliveries, deliveries.c.channel_id == channels.c.id)
            .join(messages, messages.c.id == deliveries.c.message_pk)
        )
        for channel, aggregate, version, state, reason in found:
            out[channel][(aggregate, version)] = (state, reason)
    return out
