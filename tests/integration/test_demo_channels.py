"""``exchange demo --channels`` (issue 31 item 8, issue 32 item 4, contract 13 and 14): the site,
a WooCommerce shop and the three marketplaces (Ozon, Wildberries, Yandex Market) as five
channels of one run, the site down (503) from the start; every other channel gets every price
while the site is down, and the site catches up after, on each nothing applied twice and no
old price over a newer one; the one sharp drop is withheld by Wildberries and Yandex Market,
whose quarantines hold it, and listed with the command that releases it. Asserted from what
the demo leaves: its database and the simulators' state, not its printed words alone."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from clitools import Cli, assert_one_line_error, describe
from rich.console import Console
from sqlalchemy import select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import channels, deliveries, history, messages
from exchange.dev import demo_channels
from exchange.dev.demo_channels import (
    OUTAGE_AT_LEAST,
    OUTAGE_AT_MOST,
    SHARP_DROP,
    OzonShop,
    SiteShop,
    WbShop,
    WooShop,
    YmShop,
)

MARKETPLACES = ("ozon", "wildberries", "yandex-market")
QUARANTINING = ("wildberries", "yandex-market")  # a drop to a quarter is withheld there


def test_the_channels_demo_delivers_to_every_channel_while_the_site_is_down_and_catches_it_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, woo, ozon, wb, ym = SiteShop(), WooShop(), OzonShop(), WbShop(), YmShop()
    monkeypatch.setattr(demo_channels, "shops", lambda: [site, woo, ozon, wb, ym])
    directory = tmp_path / "demo"
    result = Cli(tmp_path)("demo", "--channels", "--dir", str(directory), "--skus", "40")
    assert result.returncode == 0, describe(result)

    engine = make_engine(f"sqlite:///{directory / 'demo-channels.db'}")
    try:
        with transaction(engine, read_only=True) as connection:
            rows = connection.execute(
                select(
                    channels.c.name,
                    messages.c.message_id,
                    messages.c.payload,
                    messages.c.version,
                    deliveries.c.state,
                )
                .select_from(deliveries)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .join(messages, messages.c.id == deliveries.c.message_pk)
            ).all()
            released = [
                tuple(r)
                for r in connection.execute(
                    select(messages.c.message_id, channels.c.name, history.c.operator)
                    .join(channels, channels.c.id == history.c.channel_id)
                    .join(messages, messages.c.id == history.c.message_pk)
                    .where(history.c.event == "operator-release")
                )
            ]
            refused = connection.execute(
                select(history.c.at)
                .join(channels, channels.c.id == history.c.channel_id)
                .where(channels.c.name == site.name, history.c.http_status == 503)
            ).all()
    finally:
        engine.dispose()

    # Every channel registered, each with a delivery of every price; none left waiting or
    # quarantined: every one delivered, or coalesced into a newer version, or (the sharp
    # drop, on the two marketplaces that quarantine it) withheld.
    newest: dict[str, tuple[int, Decimal]] = {}
    states: dict[str, Counter[str]] = defaultdict(Counter)
    withheld: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for channel, message_id, payload, version, state in rows:
        states[channel][state] += 1
        sku, price = json.loads(payload)["sku"], Decimal(json.loads(payload)["price"])
        if version > newest.get(sku, (0, Decimal(0)))[0]:
            newest[sku] = (version, price)
        if state == "withheld":
            withheld[channel].append((message_id, sku, version))
    assert set(states) == {"site", "shop2", *MARKETPLACES}, states
    assert len(newest) == 40
    for channel, counted in states.items():
        assert set(counted) <= {"delivered", "cancelled", "withheld"}, (channel, counted)
        assert counted["delivered"] >= 39, (channel, counted)
    assert set(withheld) == set(QUARANTINING), withheld
    for channel in QUARANTINING:
        [(message_id, sku, version)] = withheld[channel]
        assert (sku, version) == (SHARP_DROP, newest[SHARP_DROP][0])
        # Listed with how it is released: the command on its channel; Wildberries' in the
        # seller's cabinet, where the command releases nothing (review mpadvice item 9)
        command = f"exchange withheld release {message_id} --channel {channel} --note TEXT"
        if channel == "wildberries":
            assert command not in result.stdout, describe(result)
            assert "Wildberries seller's cabinet" in result.stdout, describe(result)
        else:
            assert command in result.stdout, describe(result)
    # The site was really tried and refused while it was down.
    assert refused, "the site's channel has no 503 in its history"

    # The outage: one stretch, ended by the other channels holding every price (or their
    # quarantine withholding it), not by the cap.
    [(down, back)] = site.outages
    assert back is not None and OUTAGE_AT_LEAST <= back - down < OUTAGE_AT_MOST
    version_of = {
        (json.loads(p)["sku"], Decimal(json.loads(p)["price"])): v for _c, _m, p, v, _s in rows
    }
    want = {sku: price for sku, (_v, price) in newest.items()}
    # The second shop: every newest price written while the site was down, each price once,
    # never an older version after a newer one.
    writes = woo.sim.writes()
    assert writes and all(at < back for at, _sku, _price in writes), (back, writes[-1])
    assert {sku: Decimal(str(woo.sim.price(sku))) for sku in newest} == want
    seen: dict[str, int] = {}
    for _at, sku, price in writes:
        version = version_of[(sku, Decimal(price))]
        assert version > seen.get(sku, 0), (sku, version, seen.get(sku))
        seen[sku] = version
    # The marketplaces, from their own records: every price each took, in order, none
    # twice, none older after newer; each holds the newest but what its quarantine holds.
    for shop in (ozon, wb, ym):
        held = {sku: Decimal(str(p)) for sku, p in shop.held(newest).items()}
        quarantined = {sku: Decimal(p) for sku, p in shop.quarantined().items()}
        if shop.name == "yandex-market" and not quarantined:
            # The demo confirmed Yandex's withheld price (below): Yandex applies a confirm a
            # (simulated) minute later, as any update (ymsim, research §3.4), so a demo slowed
            # down (a loaded CI run) may end after it went live: released, then, not lost.
            assert held == want, shop.name
        elif shop.name in QUARANTINING:
            assert quarantined == {SHARP_DROP: want[SHARP_DROP]}, (shop.name, quarantined)
            assert held[SHARP_DROP] != want[SHARP_DROP]
            assert {k: v for k, v in held.items() if k != SHARP_DROP} == {
                k: v for k, v in want.items() if k != SHARP_DROP
            }, shop.name
        else:
            assert quarantined == {} and held == want, shop.name
        for sku, prices in shop.histories().items():
            versions = [version_of[(sku, Decimal(p))] for p in prices]
            assert versions == sorted(set(versions)), (shop.name, sku, prices)
    # That all of it landed during the site's outage is the summary's, from the watcher's
    # stamps (below: "never held back").
    # The site: every newest price after it came back, no effect twice, no old over new.
    assert site.sim.held_versions() == {
        ("price", f"{sku}/retail"): version for sku, (version, _p) in newest.items()
    }
    assert all(n == 1 for n in site.sim.effect_counts().values())
    assert site.sim.stale_writes() == []
    # The summary says it too.
    assert "never held back): yes" in result.stdout, describe(result)
    assert "the shop site caught up after the outage: yes" in result.stdout, describe(result)
    assert f"withheld: {SHARP_DROP} at" in result.stdout, describe(result)
    # Issue 32: the demo released Yandex Market's withheld price itself, through the command's
    # code, while its simulators ran (after it they are gone): Yandex was asked to confirm it,
    # and the history has the release, by «demo», on that channel.
    [(ym_id, _sku, _v)] = withheld["yandex-market"]
    assert f"the demo released {ym_id} on yandex-market itself" in result.stdout, describe(result)
    assert "price-quarantine/confirm" in result.stdout, describe(result)
    assert ym.sim.requests["price-quarantine/confirm"] == 1
    assert released == [(ym_id, "yandex-market", "demo")], released


class WbWithoutQuarantine(WbShop):
    """Wildberries as the demo would see it if WB held nothing in its quarantine while the
    service says the price is withheld there."""

    def quarantined(self) -> dict[str, str]:
        return {}


def test_the_channels_demo_exits_1_when_a_channel_withholds_what_the_marketplace_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = WbWithoutQuarantine()
    monkeypatch.setattr(demo_channels, "shops", lambda: [SiteShop(), wb])
    console = Console(record=True, width=400)
    code = demo_channels.run_channels_demo(
        tmp_path / "demo", skus=5, console=console, outage_at_most=OUTAGE_AT_LEAST + 1
    )
    said = console.export_text()
    assert code == 1, said
    assert "withheld though the channel does not withhold it: 1" in said
    assert "never held back): NO" in said


def test_the_channels_demo_takes_neither_a_target_nor_a_catalogue(tmp_path: Path) -> None:
    result = Cli(tmp_path)("demo", "--channels", "--target", "woocommerce")
    assert_one_line_error(result, "--channels", "--target")
