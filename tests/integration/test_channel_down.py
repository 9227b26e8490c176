"""Contract 13, issue 31 items 2 and 3: one ``exchange run`` delivers to every configured
channel, each loop on its own; a channel that is down for the whole run (connections refused:
a port nothing listens on, its breaker open) never holds back another, which delivers
everything. Each loop reports on its own row ``<worker id>/<channel>``; an operator's pause of
one channel (``delivery:<channel>``) holds that channel only, and ``--until-idle`` counts a
paused channel as idle; ``--until-idle`` drains each channel at its own pace, so a slow one
never holds back another's next drain. Runs on SQLite and on PostgreSQL. The timing promise
(within 1.3x of the time without the down channel) is the bench's: ``python -m
bench.channel_down``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from exchange import app as bootstrap
from exchange import runner
from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, workers
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import FAST, price_row, stage
from exchange.domain.clock import SystemClock
from exchange.errors import ConfigurationError
from exchange.intake import staging_table as intake
from exchange.queue import channels as channel_queue
from exchange.queue import control
from exchange.settings import Settings, load_settings
from exchange.worker import CycleReport

PRICES = 120
TOKEN = "test-token"


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


def refused_url() -> str:
    """A loopback address nothing listens on: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def two_channels(
    db_url: str, tmp_path: Path, site_url: str, shop_url: str, **shop: Any
) -> Settings:
    """EXCHANGE_CHANNELS: the site (``api``, as migrate registered it) and a second shop
    (``shop``: its own settings over the global ones)."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    named: dict[str, dict[str, Any]] = {
        "api": {"target": "api", "site_url": site_url, "site_token_file": str(token)},
        "shop": {"target": "api", "site_url": shop_url, "site_token_file": str(token), **shop},
    }
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    return load_settings(
        database_url=db_url,
        worker_id="test-worker",
        **{**fast, "batch_size": 20, "http_timeout": 1.0},
        channels=named,
    )


def both_have(engine: Engine, settings: Settings) -> None:
    """PRICES prices taken in, and a delivery of each on both channels (the shop seeded, as
    ``exchange channels seed shop`` does, so the test does not lean on intake's fan-out)."""
    stage(engine, [price_row(f"SKU-{n:04d}", 1) for n in range(PRICES)])
    intake.take(engine, None, settings.kinds, SystemClock().now())
    bootstrap.register_channels(settings, engine)
    channel_queue.seed(engine, "shop", settings.policies, now=SystemClock().now())


def states(engine: Engine, name: str) -> dict[str, int]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(deliveries.c.state, func.count())
            .join(channels, channels.c.id == deliveries.c.channel_id)
            .where(channels.c.name == name)
            .group_by(deliveries.c.state)
        ).all()
    return {state: count for state, count in rows}


def worker_rows(engine: Engine) -> dict[str, dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(workers)).mappings().all()
    return {row["worker_id"]: dict(row) for row in rows}


def test_a_channel_down_for_the_whole_run_never_holds_back_the_other(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``run`` (its scheduler, the loops apart) with the shop refusing every connection: the
    site gets every price, the shop none, its breaker opens; each loop has its own row."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    settings = two_channels(db_url, tmp_path, site.url, refused_url())
    both_have(engine, settings)
    assert states(engine, "shop") == {"new": PRICES}
    worker = bootstrap.worker(settings, engine)
    assert [loop.channel for loop in worker.loops] == ["api", "shop"]

    async def scenario() -> dict[str, dict[str, Any]]:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=0.05))
        try:
            async with asyncio.timeout(60):
                while states(engine, "api").get("delivered", 0) < PRICES:
                    await asyncio.sleep(0.05)
                while not worker.loops[1].breaker.is_open():
                    await asyncio.sleep(0.05)
                await worker.report()
            return worker_rows(engine)
        finally:
            for stop in stops:
                stop()
            assert await asyncio.wait_for(running, 30) == 0
            await worker.aclose()

    rows = asyncio.run(scenario())
    assert states(engine, "api") == {"delivered": PRICES}
    assert len(site.held_versions()) == PRICES
    shop = states(engine, "shop")
    assert shop.get("delivered", 0) == 0 and sum(shop.values()) == PRICES
    assert "in_progress" not in shop  # the stop handed the batch in flight back
    assert rows["test-worker"]["channel"] is None  # the process's own row
    assert rows["test-worker/api"]["channel"] == "api"
    assert rows["test-worker/api"]["breaker_state"] == "closed"
    assert rows["test-worker/shop"]["channel"] == "shop"
    assert rows["test-worker/shop"]["breaker_state"] != "closed"
    assert rows["test-worker/shop"]["unreachable_since"] is not None


def test_a_channel_paused_by_an_operator_is_idle_and_the_other_delivers(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path
) -> None:
    """``pause --channel shop``: the shop's loop sends nothing, the site's delivers every
    price, and ``--until-idle`` ends (a paused channel is a person's decision); ``resume``
    without ``--channel`` ends every channel's pause."""
    with SiteSimulator(token=TOKEN) as shop_site:
        settings = two_channels(db_url, tmp_path, site.url, shop_site.url)
        both_have(engine, settings)
        with transaction(engine) as connection:
            assert control.pause(
                connection, operator="ops", note="", now=SystemClock().now(), channel="shop"
            )
        worker = bootstrap.worker(settings, engine)

        async def until_idle() -> int:
            try:
                return await runner.run_until_idle(worker, max_seconds=60, poll_interval=0.05)
            finally:
                await worker.aclose()

        assert asyncio.run(until_idle()) == runner.EXIT_OK
        assert states(engine, "api") == {"delivered": PRICES}
        assert states(engine, "shop") == {"new": PRICES}
        assert shop_site.request_count == 0
        with transaction(engine) as connection:
            assert control.operator_pause(connection, "shop") is not None
            assert control.operator_pause(connection, "api") is None
            assert control.resume(connection, operator="ops")
            assert control.operator_pause(connection, "shop") is None


def test_until_idle_drains_a_channel_again_while_a_slow_one_still_sends(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path
) -> None:
    """Contract 13 (each channel at its own pace), ``run --until-idle``: the shop answers each
    batch only after 3 s. Prices staged while its first batch is out reach the site, every
    one, while the shop still has them to send: the site's loop drains again without waiting
    for the shop's drain to end (the run used to begin a cycle only when every loop's drain
    had ended, so the site got them only after the shop's last). The run then ends idle, both
    channels delivered."""
    first, more = 2, 60
    with SiteSimulator(
        token=TOKEN, batch_enabled=True, faults=Faults(slow_rate=1.0, slow_seconds=3.0)
    ) as shop_site:
        settings = two_channels(
            db_url, tmp_path, site.url, shop_site.url, site_batch_size=20, http_timeout=10.0
        )
        stage(engine, [price_row(f"SKU-{n:04d}", 1) for n in range(first)])
        intake.take(engine, None, settings.kinds, SystemClock().now())
        bootstrap.register_channels(settings, engine)
        channel_queue.seed(engine, "shop", settings.policies, now=SystemClock().now())
        worker = bootstrap.worker(settings, engine)
        total = first + more
        told: list[CycleReport | None] = []  # what a progress bar is told (``on_cycle``)

        async def scenario() -> tuple[dict[str, int], int]:
            running = asyncio.create_task(
                runner.run_until_idle(
                    worker, max_seconds=120, poll_interval=0.05, on_cycle=told.append
                )
            )
            try:
                async with asyncio.timeout(90):
                    while (
                        states(engine, "api").get("delivered", 0) < first
                        or states(engine, "shop").get("in_progress", 0) == 0
                    ):
                        await asyncio.sleep(0.02)
                    # the shop's first batch is out (3 s): 60 more prices for both channels
                    stage(engine, [price_row(f"SKU-{n:04d}", 1) for n in range(first, total)])
                    while states(engine, "api").get("delivered", 0) < total:
                        await asyncio.sleep(0.02)
                    shop_then = states(engine, "shop")
                    return shop_then, await running
            finally:
                if not running.done():
                    worker.request_stop()
                    await asyncio.wait_for(running, 30)
                await worker.aclose()

        shop_then, code = asyncio.run(scenario())
    assert shop_then.get("delivered", 0) < total, shop_then  # still out or waiting then
    assert code == runner.EXIT_OK
    assert states(engine, "api") == {"delivered": total}
    assert states(engine, "shop") == {"delivered": total}
    assert len(site.held_versions()) == total
    assert len(shop_site.held_versions()) == total
    # each loop's drain told once: every price sent once on each channel, none counted twice
    assert sum(report.sent for report in told if report is not None) == 2 * total


@pytest.mark.parametrize("ended_by", ["stop", "max-seconds"])
def test_until_idle_with_a_slow_channel_ends_on_a_stop_or_its_time_its_batch_recorded(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ended_by: str,
) -> None:
    """While each loop drains apart: SIGTERM (exit 0) or ``--max-seconds`` (exit 3) ends the
    run once the shop's batch out (3 s) is answered and recorded; nothing is left
    ``in_progress``, and what the shop took is recorded as delivered."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    with SiteSimulator(
        token=TOKEN, batch_enabled=True, faults=Faults(slow_rate=1.0, slow_seconds=3.0)
    ) as shop_site:
        settings = two_channels(
            db_url, tmp_path, site.url, shop_site.url, site_batch_size=5, http_timeout=10.0
        )
        both_have(engine, settings)
        worker = bootstrap.worker(settings, engine)
        max_seconds = 2.0 if ended_by == "max-seconds" else 120.0

        async def scenario() -> int:
            running = asyncio.create_task(
                runner.run_until_idle(worker, max_seconds=max_seconds, poll_interval=0.05)
            )
            try:
                async with asyncio.timeout(60):
                    if ended_by == "stop":
                        while states(engine, "shop").get("in_progress", 0) == 0:
                            await asyncio.sleep(0.02)
                        stops[0]()
                    return await running
            finally:
                await worker.aclose()

        code = asyncio.run(scenario())
    assert code == (runner.EXIT_OK if ended_by == "stop" else runner.EXIT_TIMED_OUT)
    shop = states(engine, "shop")
    assert "in_progress" not in shop, shop
    assert shop.get("delivered", 0) < PRICES, shop
    # what the shop took is recorded as delivered, not abandoned to a lease's end
    assert shop.get("delivered", 0) == len(shop_site.held_versions())


def test_run_channel_serves_the_one_named(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path
) -> None:
    """``run --channel api``: one loop, the site's; the shop's deliveries are left alone and
    not waited for."""
    settings = two_channels(db_url, tmp_path, site.url, refused_url())
    both_have(engine, settings)
    worker = bootstrap.worker(settings, engine, channel="api")
    assert [loop.channel for loop in worker.loops] == ["api"]

    async def until_idle() -> int:
        try:
            return await runner.run_until_idle(worker, max_seconds=60, poll_interval=0.05)
        finally:
            await worker.aclose()

    assert asyncio.run(until_idle()) == runner.EXIT_OK
    assert states(engine, "api") == {"delivered": PRICES}
    assert states(engine, "shop") == {"new": PRICES}


def test_a_channel_down_with_fewer_waiting_than_the_breaker_threshold_opens_its_breaker(
    db_url: str,
    engine: Engine,
    site: SiteSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small second shop refusing every connection with two prices waiting (the threshold
    is five aggregates): it is recognised as down, its breaker opens, and its prices wait
    unsent and uncharged rather than retried without end."""
    stops: list[Callable[[], None]] = []
    monkeypatch.setattr(runner, "_install_signals", lambda _loop, stop: stops.append(stop))
    settings = two_channels(db_url, tmp_path, site.url, refused_url())
    assert settings.breaker_threshold == 5
    stage(engine, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    intake.take(engine, None, settings.kinds, SystemClock().now())
    bootstrap.register_channels(settings, engine)
    channel_queue.seed(engine, "shop", settings.policies, now=SystemClock().now())
    worker = bootstrap.worker(settings, engine)
    shop = worker.loops[1]

    async def scenario() -> bool:
        running = asyncio.create_task(runner.run_forever(worker, poll_interval=0.05))
        try:
            async with asyncio.timeout(20):
                while not shop.breaker.is_open():
                    await asyncio.sleep(0.05)
            return True
        except TimeoutError:
            return False
        finally:
            for stop in stops:
                stop()
            assert await asyncio.wait_for(running, 30) == 0
            await worker.aclose()

    assert asyncio.run(scenario()), "the small shop's breaker never opened"
    assert states(engine, "api") == {"delivered": 2}
    shop_states = states(engine, "shop")
    assert shop_states.get("delivered", 0) == 0 and "quarantined" not in shop_states


def test_each_loop_is_given_its_channels_registered_id_when_the_worker_is_built(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    settings = two_channels(db_url, tmp_path, refused_url(), refused_url())
    bootstrap.register_channels(settings, engine)
    with transaction(engine, read_only=True) as connection:
        registered = dict(
            connection.execute(
                select(channels.c.name, channels.c.id).where(channels.c.dropped_at.is_(None))
            ).all()
        )
    worker = bootstrap.worker(settings, engine)
    assert registered == {loop.channel: loop.channel_id for loop in worker.loops}


def test_a_configured_channel_not_registered_is_refused_when_the_worker_is_built(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Not later, inside the running loop: ``run`` registers the configured channels first, so
    only a caller that skipped that meets this one line."""
    settings = two_channels(db_url, tmp_path, refused_url(), refused_url())
    with pytest.raises(ConfigurationError, match=r"^channel shop is not registered"):
        bootstrap.worker(settings, engine)
