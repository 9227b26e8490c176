"""Seller review 35 (docs): Yandex Market's learned budget (a 420's
``X-RateLimit-Resource-Limit`` below the request, kept in the business's ``target_locks`` row)
outlives a restart, where the docs said it lasted "until the service restarts". A worker
started after the 420 keeps the lowered budget from its first request (no 420 of its own, its
held prices say the lowered budget), and the docs, Russian and English, say so and how it comes
back: the cabinet allowed more, the next answer's higher limit raises the row by itself (no SQL,
the docs' DELETE only a last resort). The real workers, the Yandex Market simulator over HTTP,
SQLite and PostgreSQL."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history, target_locks
from exchange.dev.simclock import SimClock
from exchange.dev.testing import price_row, run_worker, stage
from exchange.dev.ymsim import UPDATE_RESOURCE, ApiError, YmSimulator, YmSwitches, _YmHandler
from exchange.worker import Worker

KEY = "ym-key-restart"
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second at the simulator; the cabinet allows 20 offers a minute.
    sim = YmSimulator(
        KEY, 1001, clock=SimClock(60.0), switches=YmSwitches(apply_delay=30), offers_per_minute=20
    )
    sim.start()
    yield sim
    sim.stop()


def test_the_budget_a_420_lowered_outlives_a_restart_and_the_docs_say_so(
    db_url: str,
    engine: Engine,
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused: list[int] = []
    fail = _YmHandler.fail

    def counted(handler: _YmHandler, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420:
            refused.append(420)
        fail(handler, error, headers)

    monkeypatch.setattr(_YmHandler, "fail", counted)
    settings = ym_settings(db_url, ym, tmp_path, key=KEY, batch_size="100")

    async def cycle(w: Worker) -> None:
        await w.cycle()

    stage(engine, [price_row(f"SKU-A{n:02d}", 1, "100.00") for n in range(40)])
    run_worker(bootstrap.worker(settings, engine, rng=random.Random(5)), cycle)
    assert refused, "the first worker met the cabinet's 420"
    before = len(refused)
    time.sleep(1.5)  # the simulator's minute over: its budget has room again
    with transaction(engine) as connection:
        last = connection.execute(select(history.c.id).order_by(history.c.id.desc())).scalar()
    stage(engine, [price_row(f"SKU-B{n:02d}", 1, "100.00") for n in range(40)])
    # A restart: a new process, nothing in memory, its requests of 20 offers (the cabinet's
    # limit: no 420 cuts them), its budget of ym_offers_per_minute unless the row says less
    restarted = ym_settings(db_url, ym, tmp_path, key=KEY, batch_size="20")
    run_worker(bootstrap.worker(restarted, engine, rng=random.Random(6)), cycle)

    assert len(refused) == before, "the restarted worker kept the learned budget: no 420"
    with transaction(engine, read_only=True) as connection:
        details = (
            connection.execute(
                select(history.c.detail).where(
                    history.c.id > (last or 0), history.c.detail.like("held:%")
                )
            )
            .scalars()
            .all()
        )
    assert details and all("budget of 20 offers a minute" in d for d in details), details

    def kept() -> str | None:
        with transaction(engine, read_only=True) as connection:
            return connection.execute(
                select(target_locks.c.holder).where(
                    target_locks.c.name == "ym spent:1001:offer-prices/updates"
                )
            ).scalar_one()

    assert kept() == "20", "the row the docs name keeps the learned budget"
    # The cabinet is allowed more: a worker's answer names 40, and the row follows, no SQL.
    ym.budgets[UPDATE_RESOURCE].limit = 40
    time.sleep(1.5)
    stage(engine, [price_row(f"SKU-C{n:02d}", 1, "100.00") for n in range(40)])
    run_worker(bootstrap.worker(restarted, engine, rng=random.Random(7)), cycle)
    assert kept() == "40", "the row follows the higher limit Yandex named"
    assert len(refused) == before, "no 420"
    russian = (DOCS / "marketplaces.ru.md").read_text(encoding="utf-8")
    english = (DOCS / "marketplaces.md").read_text(encoding="utf-8")
    assert "до него же до перезапуска" not in russian
    assert "Уменьшенный лимит переживает перезапуск" in russian
    assert (
        "until the service\nrestarts" not in english and "until the service restarts" not in english
    )
    assert "The lowered budget outlives a\nrestart" in english
    assert "Сам сервис этот лимит не поднимает" not in russian
    assert "The service never raises it by itself" not in english
    assert "следует за тем, который называет Маркет, в обе стороны" in russian
    assert "follows the one\nYandex names, both ways" in english
    assert "без перезапуска и без SQL" in russian and "no restart and\nno SQL" in english
    assert "Крайнее средство" in russian and "A last resort" in english
