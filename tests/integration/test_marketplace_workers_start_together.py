"""``exchange run`` workers of one marketplace channel, started at the same moment on one
PostgreSQL database, keep within the seller account's limits from their first request
(contract 14; research §2.3: Wildberries' 10 requests / 6 s, a burst of 5, per seller account;
§3.3: Yandex Market's 4 requests at once and its offers a minute, per business): the
marketplace refuses none of their requests.

A worker learns of the others from their rows in ``workers``; two started together used to
each count itself alone until its next count and spend the whole account for a while (review
32: a 429 at the start, a 420). Now a marketplace loop writes its row, waits
``START_WAIT`` and counts before its first request (``DeliveryLoop.counted_at_start``): any two
started within it count each other."""

from __future__ import annotations

from pathlib import Path

import pytest
from marketsims import secret, ym_sim
from mp_workers import mp_states, run_workers

from exchange.db.engine import make_engine
from exchange.dev.testing import price_row, stage
from exchange.dev.ymsim import ApiError, YmFaults, _YmHandler, channel_settings

# Workers race in wall-clock time: never beside another timing test.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timing,
    pytest.mark.subprocess,
    pytest.mark.timeout(180),
]

OFFERS = 4_000


def test_two_yandex_market_workers_started_together_draw_no_420(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Yandex Market's 4 requests at once per business (§3.3), each request held in flight a
    while: two workers that each sent 4 at once at the start met a 420."""
    engine = make_engine(pg_url)
    refused: list[int] = []
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420:
            refused.append(1)
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    with ym_sim() as sim:
        sim.faults = YmFaults(hold=0.2)
        # Requests of 500 offers (§3.3): batches of 2,000 make four at once a worker.
        stage(engine, [price_row(f"SKU-{n:04d}", 1, f"{900 + n}.00") for n in range(OFFERS)])
        channel = channel_settings(sim, secret(tmp_path, "ym-key", "ym-key-1234"))
        outputs = run_workers(
            pg_url, channel, tmp_path, workers=2, batch_size=2000, max_seconds=90, timeout=150
        )
        assert {"delivered"} == mp_states(engine), outputs
        assert [] == refused, f"Yandex Market refused {len(refused)} request(s): {outputs}"
    engine.dispose()
