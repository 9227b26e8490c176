"""Contract 13 ("delivery metrics carry a ``channel`` label"; issue 31 item 7): under
EXCHANGE_CHANNELS a worker's delivery counters and its loops' gauges carry the channel, so an
operator sees which shop failed; without it (one channel named after its target) every series
keeps today's name and labels, as the cause codes stay bare. Scraped over HTTP after a real
run against two site simulators, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opstools import scrape
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import FAST, drain, price_row, stage
from exchange.ops.metrics import Health, MetricsServer, PrometheusMetrics
from exchange.settings import load_settings

TOKEN = "test-token"


@pytest.fixture
def shop() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


def _settings(db_url: str, tmp_path: Path, named: dict[str, str] | None, **more: Any) -> Any:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    if named is None:
        return load_settings(
            database_url=db_url, worker_id="w", **fast, site_token_file=str(token), **more
        )
    channels = {
        name: {"target": "api", "site_url": url, "site_token_file": str(token)}
        for name, url in named.items()
    }
    return load_settings(database_url=db_url, worker_id="w", **fast, channels=channels, **more)


def _served_run(settings: Any, engine: Engine) -> Any:
    worker = bootstrap.worker(settings, engine)
    bootstrap.register_channels(settings, engine)
    metrics = PrometheusMetrics(channels=[loop.channel for loop in worker.loops if loop.channel])
    worker.metrics = metrics
    check = Health(metrics, engine, poll_interval=settings.poll_interval)
    with MetricsServer(metrics, check, host="127.0.0.1", port=0) as server:

        async def go() -> None:
            try:
                await drain(worker)
            finally:
                await worker.aclose()  # every loop's target, not the first one's only

        asyncio.run(go())
        return scrape(server)


def test_delivery_counters_name_the_channel_under_explicit_channels(
    db_url: str, engine: Engine, site: SiteSimulator, shop: SiteSimulator, tmp_path: Path
) -> None:
    """The shop refuses SKU-R (422): its quarantine and its terminal attempt are the shop's,
    the site's deliveries the site's; each loop's breaker and pace are its own series."""
    shop.faults.reject = {"SKU-R"}
    settings = _settings(db_url, tmp_path, {"api": site.url, "shop": shop.url})
    bootstrap.register_channels(settings, engine)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)] + [price_row("SKU-R", 1)])
    samples = _served_run(settings, engine)

    assert len(site.effects()) == 4 and len(shop.effects()) == 3
    assert samples("exchange_deliveries_total", channel="api") == 4
    assert samples("exchange_deliveries_total", channel="shop") == 3
    assert samples("exchange_attempts_total", channel="shop", outcome="terminal") == 1
    assert samples("exchange_attempts_total", channel="api", outcome="terminal") == 0
    assert samples("exchange_quarantines_total", channel="shop", reason="http-422") == 1
    assert samples("exchange_quarantines_total", channel="api", reason="http-422") == 0
    assert samples("exchange_retries_scheduled_total", channel="api") == 0
    assert samples("exchange_lease_takeovers_total", channel="shop") == 0
    assert samples("exchange_site_refused_total", channel="shop", cause="429") == 0
    assert samples("exchange_breaker_state", channel="shop") == 0
    assert samples("exchange_pace_limit", channel="api") >= 1
    # the process's own series stay unlabelled: intake is no channel's
    assert samples("exchange_intake_rows_total", result="message") == 4


def test_without_explicit_channels_every_series_keeps_its_name_and_labels(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path
) -> None:
    """A one-target installation (no EXCHANGE_CHANNELS): a dashboard written before channels
    reads the same series, with no ``channel`` label anywhere but the per-channel gauges."""
    site.faults.reject = {"SKU-R"}
    settings = _settings(db_url, tmp_path, None, site_url=site.url)
    stage(engine, [price_row("SKU-1", 1), price_row("SKU-R", 1)])
    samples = _served_run(settings, engine)

    assert samples("exchange_deliveries_total") == 1
    assert samples("exchange_attempts_total", outcome="terminal") == 1
    assert samples("exchange_quarantines_total", reason="http-422") == 1
    assert samples("exchange_breaker_state") == 0
    assert samples("exchange_pace_limit") >= 1
    labelled = {
        name
        for (name, labels) in samples.values
        if "channel" in dict(labels) and not name.startswith("exchange_channel_")
    }
    assert labelled == set()


def test_a_channel_view_of_unlabelled_metrics_is_the_metrics_themselves() -> None:
    metrics = PrometheusMetrics()
    assert metrics.for_channel(None) is metrics
    labelled = PrometheusMetrics(channels=["api", "shop"])
    assert (
        labelled.registry.get_sample_value("exchange_deliveries_total", {"channel": "shop"}) == 0
    )  # shown from the first scrape, at 0, for every configured channel
