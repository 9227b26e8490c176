"""A worker waits out its site's hold on its injected monotonic clock (``Worker.monotonic``,
exchange/delivery/gate.py's timer), never on the real one: with ``FakeMonotonic`` a 429's
``Retry-After`` of a minute passes at once on the FakeClock, and the messages still go only
after it (contract 5c: the hold is honoured, by every request)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.testing import FakeSite, drain, fast_settings, price_row, run_worker, stage
from exchange.domain.clock import FakeClock, FakeMonotonic

HOLD_S = 60


def test_a_429s_retry_after_is_waited_out_on_the_workers_clock_not_slept(
    tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    site = FakeSite()
    sent_at: list[float] = []  # the fake monotonic second each request reached the site
    clock = FakeClock()
    monotonic = FakeMonotonic(clock)

    def handler(request: httpx.Request) -> Any:
        sent_at.append(monotonic.now())
        if len(sent_at) == 1:
            return httpx.Response(429, headers={"Retry-After": str(HOLD_S)}, json={})
        return site(request)

    # One request at a time: the second waits for the first's answer, then for its hold (a
    # Retry-After counts up to EXCHANGE_RETRY_MAX_DELAY).
    settings = fast_settings(url, "https://site.test", concurrency=1, retry_max_delay=2 * HOLD_S)
    worker = bootstrap.worker(
        settings, engine, clock=clock, transport=httpx.MockTransport(handler), monotonic=monotonic
    )
    stage(engine, [price_row("S1", 1), price_row("S2", 1)])
    started = time.perf_counter()
    try:
        run_worker(worker, drain)
    finally:
        engine.dispose()
    took = time.perf_counter() - started
    assert {("price", "S1"): [1], ("price", "S2"): [1]} == site.applied
    # Every request after the refusal went once the hold had run, on the worker's clock.
    assert len(sent_at) == 3 and min(sent_at[1:]) - sent_at[0] >= HOLD_S, sent_at
    # A real wait would take the hold's minute; the cycles take tens of milliseconds, and up to
    # 7 s on a machine loaded 7 times its cores (the margin: half the hold).
    assert took < HOLD_S / 2, f"the worker slept: {took:.1f} s"
