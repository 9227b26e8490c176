"""Yandex Market's cap on requests at once is the business's (research §3.3: a 420 "Hit rate
limit of 'N' parallel requests"), whichever worker sends them. Review ym34: four workers,
``ym_parallel`` 2 (Yandex's cap 2): each kept at least one place of its own, four at once, 38
such 420s in a minute. Now every request takes one of the business's ``ym_parallel`` places in
the database (``DbSlots``: ``target_locks`` rows), so the workers together never exceed it.
Review ym35: three workers, ``ym_parallel`` 4 above Yandex's cap of 2: 81 such 420s in 30 s,
each worker's own lowering stopping at its one place. Now a 420 for parallel requests any
worker hears lowers the business's places for all of them (pace.py ``parallel_heard``)."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import secret, ym_sim
from mp_workers import mp_states, run_workers
from sqlalchemy import Engine

from exchange.dev.testing import price_row, stage
from exchange.dev.ymsim import ApiError, YmFaults, YmSimulator, _YmHandler, channel_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timing,
    pytest.mark.subprocess,
    pytest.mark.timeout(240),
]

PRICES = 3_000


def parallel_refusals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every 420 for parallel requests the simulator answers, as it answers it."""
    refused: list[str] = []
    lock = threading.Lock()
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420 and "parallel" in str(error):
            with lock:
                refused.append(str(error))
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    return refused


def deliver_with_workers(
    sim: YmSimulator,
    channel: dict[str, object],
    workers: int,
    db_url: str,
    engine: Engine,
    directory: Path,
) -> None:
    """``PRICES`` prices staged and delivered by ``workers`` ``exchange run`` processes on
    one database: each exits 0, every delivery ends delivered, and every price is live on the
    simulator."""
    prices = {f"SKU-{n:04d}": Decimal(f"{900 + n}.00") for n in range(PRICES)}
    stage(engine, [price_row(sku, 1, f"{value}") for sku, value in prices.items()])
    outputs = run_workers(
        db_url, channel, directory, workers=workers, batch_size=250, max_seconds=150, timeout=200
    )
    assert {"delivered"} == mp_states(engine), outputs
    lives = sim.lives()
    live = {sku: None if lives.get(sku) is None else lives[sku].value for sku in prices}
    assert prices == live


def test_four_workers_never_send_more_requests_at_once_than_ym_parallel(
    db_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Yandex's cap 2, ``ym_parallel`` 2, each request held in flight a while (§3.3: the cap
    counts requests in flight), four workers: no 420 for parallel requests; every price lands
    (SQLite and PostgreSQL)."""
    refused = parallel_refusals(monkeypatch)
    with ym_sim() as sim:
        sim.switches.parallel = 2
        sim.faults = YmFaults(hold=0.2)
        channel = channel_settings(sim, secret(tmp_path, "ym-key", "ym-key-1234"))
        assert channel["ym_parallel"] == 2
        deliver_with_workers(sim, channel, 4, db_url, engine, tmp_path)
    assert [] == refused, f"{len(refused)} 420(s) for parallel requests"


def test_three_workers_above_yandexs_cap_all_lower_on_one_refusal(
    db_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review ym35: ``ym_parallel`` 4, Yandex's cap 2, each request held in flight a while,
    three workers (each its one place of its own: three at once). The first 420 for parallel
    requests, heard while 3 were in flight, lowers the business's places to 2 for every
    worker. A worker reads the places before each request and sends at most two at a time
    (its share of 4 among 3, rounded up where the places are shared: review ym36), so only
    the few that read them before a lowering are refused (and lower them no further than
    Yandex took): a few refusals in all, at most two a worker,
    where the old code had one every few hundred milliseconds for the whole run. Every price
    lands (SQLite and PostgreSQL)."""
    workers = 3
    refused = parallel_refusals(monkeypatch)
    with ym_sim() as sim:
        sim.switches.parallel = 2
        sim.faults = YmFaults(hold=0.3)
        channel = channel_settings(sim, secret(tmp_path, "ym-key", "ym-key-1234"))
        channel["ym_parallel"] = 4
        deliver_with_workers(sim, channel, workers, db_url, engine, tmp_path)
    print(f"{len(refused)} 420(s) for parallel requests")
    assert len(refused) <= 2 * workers, f"{len(refused)} 420(s) for parallel requests"
