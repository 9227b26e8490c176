"""Yandex Market's budget of offers a minute is the business's (research §3.3: counted per
method, a 420 with ``X-RateLimit-Resource-Limit``, ``-Remaining`` and ``-Until``), whichever
worker spends it. Review ym34: a cabinet allowing fewer offers than ``ym_offers_per_minute``,
three workers: each learned only from its own answers, so every minute one sent after another's
answer had said ``Remaining: 0`` until the minute's end, and met a 420 (5 of 7 minutes).

Now what one worker hears (a 420 for the budget, ``Remaining: 0``) is a ``target_locks`` row of
the business and method (``DbHold``, as Ozon's "Circle is open"): every worker reads it before
its next request of that method and waits until the moment named, not charged; a budget a worker
cut its requests to (``X-RateLimit-Resource-Limit``) is kept in it too, and the workers divide
that one. And what is left (``-Remaining`` on every answer) is the business's count too
(``DbLeft``), each request taking its offers from it first: a worker kept only its own answers'
count, sent 500 after another's answer had said 50 were left, and met a 420 in 2 to 4 of a run's
simulated minutes (under load; the bound below was met by chance)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from marketsims import secret, ym_sim
from mp_workers import mp_states, run_workers
from sqlalchemy import Engine

from exchange.dev.testing import price_row, stage
from exchange.dev.ymsim import UPDATE_RESOURCE, ApiError, _YmHandler, channel_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timing,
    pytest.mark.subprocess,
    pytest.mark.timeout(240),
]

WORKERS = 3
PRICES = 6_000
CABINET = 1_500  # offers a (simulated) minute the cabinet allows: below the setting's


def test_a_spent_budget_heard_by_one_worker_holds_every_worker(
    db_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three workers, a cabinet below ``ym_offers_per_minute``: at most one 420 for the budget
    a worker (before the first one's word is in the database), never one every minute; every
    price lands (SQLite and PostgreSQL)."""
    refused: dict[str, int] = {}
    lock = threading.Lock()
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420:
            with lock:
                refused[str(error)] = refused.get(str(error), 0) + 1
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    with ym_sim(scale=6, apply_delay=3) as sim:
        channel = channel_settings(sim, secret(tmp_path, "ym-key", "ym-key-1234"))
        sim.budgets[UPDATE_RESOURCE].limit = CABINET
        stage(engine, [price_row(f"SKU-{n:04d}", 1, f"{900 + n}.00") for n in range(PRICES)])
        outputs = run_workers(
            db_url, channel, tmp_path, workers=WORKERS, batch_size=500, max_seconds=150, timeout=200
        )
    assert {"delivered"} == mp_states(engine), outputs
    budget = sum(n for said, n in refused.items() if "parallel" not in said)
    assert budget <= WORKERS, f"420s for the budget: {refused}"
