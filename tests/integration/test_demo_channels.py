"""``exchange demo --channels`` (issue 31 item 8, contract 13): the site and a WooCommerce shop
as two channels of one run, the site down (503) from the start; the second shop gets every
price while the site is down, and the site catches up after, on both nothing applied twice
and no old price over a newer one. Asserted from what the demo leaves: its database and the
simulators' state, not its printed words alone."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from clitools import Cli, assert_one_line_error, describe
from sqlalchemy import select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import channels, deliveries, history, messages
from exchange.dev import demo_channels
from exchange.dev.demo_channels import OUTAGE_AT_LEAST, OUTAGE_AT_MOST, SiteShop, WooShop


def test_the_channels_demo_delivers_to_the_healthy_shop_while_the_other_is_down_and_catches_it_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, woo = SiteShop(), WooShop()
    monkeypatch.setattr(demo_channels, "shops", lambda: [site, woo])
    directory = tmp_path / "demo"
    result = Cli(tmp_path)("demo", "--channels", "--dir", str(directory), "--skus", "40")
    assert result.returncode == 0, describe(result)

    engine = make_engine(f"sqlite:///{directory / 'demo-channels.db'}")
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(channels.c.name, messages.c.payload, messages.c.version, deliveries.c.state)
                .select_from(deliveries)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .join(messages, messages.c.id == deliveries.c.message_pk)
            ).all()
            refused = connection.execute(
                select(history.c.at)
                .join(channels, channels.c.id == history.c.channel_id)
                .where(channels.c.name == site.name, history.c.http_status == 503)
            ).all()
    finally:
        engine.dispose()

    # Both channels registered, each with a delivery of every price; none left waiting or
    # quarantined: every one delivered, or coalesced into a newer version.
    newest: dict[str, tuple[int, Decimal]] = {}
    states: dict[str, Counter[str]] = defaultdict(Counter)
    for channel, payload, version, state in rows:
        states[channel][state] += 1
        sku, price = json.loads(payload)["sku"], Decimal(json.loads(payload)["price"])
        if version > newest.get(sku, (0, Decimal(0)))[0]:
            newest[sku] = (version, price)
    assert set(states) == {"site", "shop2"}, states
    assert len(newest) == 40
    for channel, counted in states.items():
        assert set(counted) <= {"delivered", "cancelled"}, (channel, counted)
        assert counted["delivered"] >= 40, (channel, counted)
    # The site was really tried and refused while it was down.
    assert refused, "the site's channel has no 503 in its history"

    # The outage: one stretch, ended by the second shop holding every price, not by the cap.
    [(down, back)] = site.outages
    assert back is not None and OUTAGE_AT_LEAST <= back - down < OUTAGE_AT_MOST
    # The second shop: every newest price written while the site was down, each price once,
    # never an older version after a newer one.
    version_of = {
        (json.loads(p)["sku"], Decimal(json.loads(p)["price"])): v for _c, p, v, _s in rows
    }
    writes = woo.sim.writes()
    assert writes and all(at < back for at, _sku, _price in writes), (back, writes[-1])
    assert {sku: Decimal(str(woo.sim.price(sku))) for sku in newest} == {
        sku: price for sku, (_v, price) in newest.items()
    }
    seen: dict[str, int] = {}
    for _at, sku, price in writes:
        version = version_of[(sku, Decimal(price))]
        assert version > seen.get(sku, 0), (sku, version, seen.get(sku))
        seen[sku] = version
    # The site: every newest price after it came back, no effect twice, no old over new.
    assert site.sim.held_versions() == {
        ("price", f"{sku}/retail"): version for sku, (version, _p) in newest.items()
    }
    assert all(n == 1 for n in site.sim.effect_counts().values())
    assert site.sim.stale_writes() == []
    # The summary says it too.
    assert "never held back): yes" in result.stdout, describe(result)
    assert "the shop site caught up after the outage: yes" in result.stdout, describe(result)


def test_the_channels_demo_takes_neither_a_target_nor_a_catalogue(tmp_path: Path) -> None:
    result = Cli(tmp_path)("demo", "--channels", "--target", "woocommerce")
    assert_one_line_error(result, "--channels", "--target")
