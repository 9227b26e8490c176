"""EXCHANGE_TARGET=bitrix end to end (contract 10): staging -> the real worker -> the 1C-Bitrix
exchange simulator over HTTP, on SQLite and PostgreSQL.

A worker killed mid-upload, a session lost between file and import, an import answering
progress forever: nothing lost, nothing quarantined that a retry would deliver, no stale price
over a newer one, and never a package that would make Bitrix deactivate the catalogue.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conformance import price
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.testing import (
    drain,
    fast_settings,
    one_channel_messages,
    price_row,
    run_worker,
    stage,
)
from exchange.domain.verdicts import Classification, Verdict
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def site() -> Iterator[BitrixSimulator]:
    simulator = BitrixSimulator("exchange", "secret", zip=True, file_limit=2048, step_size=7)
    simulator.start()
    yield simulator
    simulator.stop()


def make_worker(db_url: str, engine: Engine, site: BitrixSimulator, **overrides: Any) -> Worker:
    worker_id = overrides.pop("worker_id", "test-worker")
    settings = fast_settings(
        db_url,
        None,
        target="bitrix",
        bitrix_url=site.url + PATH,
        bitrix_user="exchange",
        bitrix_password="secret",
        bitrix_catalog_id="catalog-1",
        bitrix_price_types={"retail": "Розничная"},
        **overrides,
    ).model_copy(update={"worker_id": worker_id})
    return bootstrap.worker(settings, engine, rng=random.Random(3))


def states(engine: Engine) -> dict[tuple[str, int], tuple[str, str | None]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.version, messages.c.state, messages.c.reason)
        )
        return {(a, v): (s, r) for a, v, s, r in rows}


def test_a_batch_travels_as_one_package_in_chunks_within_file_limit_and_only_changes(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.active["OTHER"] = True  # an offer 1C's own exchange made: never deactivated by us
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.50") for n in range(40)])

    run_worker(make_worker(db_url, engine, site))

    assert {(f"SKU-{n}", 1): ("delivered", None) for n in range(40)} == states(engine)
    assert [f"{n}.50" for n in range(40)] == [site.price(f"SKU-{n}") for n in range(40)]
    assert all(size <= 2048 for size in site.chunks)
    assert all(b"\xd0\xa1\xd0\xbe\xd0\xb4\xd0\xb5\xd1\x80\xd0\xb6" in p for p in site.packages)
    assert all('СодержитТолькоИзменения="true"'.encode() in p for p in site.packages)
    assert set() == site.deactivated
    assert site.active["OTHER"]


def test_unmapped_price_type_is_quarantined_and_the_rest_delivered(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    row = price_row("SKU-W", 1)
    row["payload"] = row["payload"].replace('"retail"', '"wholesale"')
    stage(engine, [row, price_row("SKU-1", 1, "5.00")])

    run_worker(make_worker(db_url, engine, site))

    assert {
        ("SKU-W", 1): ("quarantined", "unmapped-price-type"),
        ("SKU-1", 1): ("delivered", None),
    } == states(engine)


def test_a_session_lost_between_file_and_import_is_retried_and_delivered(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.faults.lose_session = True
    stage(engine, [price_row("SKU-1", 1, "1.00"), price_row("SKU-2", 1, "2.00")])

    run_worker(make_worker(db_url, engine, site))

    assert {("SKU-1", 1): ("delivered", None), ("SKU-2", 1): ("delivered", None)} == states(engine)
    assert 2 <= site.requests["checkauth"], "a fresh exchange after the lost session"


def test_an_import_answering_progress_forever_is_temporary_then_delivered(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.faults.progress_forever = True
    stage(engine, [price_row("SKU-1", 1, "1.00")])
    worker = make_worker(db_url, engine, site, bitrix_max_import_steps=5, max_attempts=100)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()
        assert states(engine)[("SKU-1", 1)][0] in {"delayed", "new"}, "not quarantined"
        site.faults.progress_forever = False
        await drain(worker)

    run_worker(worker, scenario)

    assert ("delivered", None) == states(engine)[("SKU-1", 1)]
    assert "1.00" == site.price("SKU-1")


def test_a_worker_killed_mid_upload_loses_nothing_and_the_next_one_delivers(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.faults.delay = 0.2
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(30)])
    first = make_worker(db_url, engine, site, lease_seconds=1)

    async def killed(worker: Worker) -> None:
        task = asyncio.create_task(worker.cycle())
        while site.requests["file"] == 0:
            await asyncio.sleep(0.01)
        task.cancel()  # as a process killed mid-upload: its lease is left behind
        with pytest.raises(asyncio.CancelledError):
            await task

    run_worker(first, killed)
    assert [] == site.packages, "nothing imported"
    site.faults.delay = 0
    stage(engine, [price_row("SKU-0", 2, "100.00")])  # a newer price meanwhile

    async def later(worker: Worker) -> None:
        await asyncio.sleep(1.1)  # the lease ends
        await drain(worker)

    run_worker(make_worker(db_url, engine, site, lease_seconds=1), later)

    delivered = {k for k, (s, _) in states(engine).items() if s == "delivered"}
    assert {(f"SKU-{n}", 1) for n in range(1, 30)} | {("SKU-0", 2)} <= delivered
    assert "100.00" == site.price("SKU-0"), "the newer price, never the older over it"
    assert [f"{n}.00" for n in range(1, 30)] == [site.price(f"SKU-{n}") for n in range(1, 30)]


def test_a_package_refused_for_one_sku_delivers_the_others(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.faults.reject.add("SKU-3")
    stage(engine, [price_row(f"SKU-{n}", 1, f"{n}.00") for n in range(8)])

    run_worker(make_worker(db_url, engine, site))

    expected = {(f"SKU-{n}", 1): ("delivered", None) for n in range(8)}
    expected[("SKU-3", 1)] = ("quarantined", "shop-failure")
    assert expected == states(engine)


def test_refused_credentials_pause_and_quarantine_nothing(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    site.faults.refuse = True
    stage(engine, [price_row("SKU-1", 1)])

    async def scenario(worker: Worker) -> None:
        await worker.cycle()

    run_worker(make_worker(db_url, engine, site), scenario)

    assert states(engine)[("SKU-1", 1)][0] in {"new", "delayed"}


def test_two_workers_never_run_two_exchanges_with_the_site_at_once(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    """Two workers' targets (each with its own in-process lock) send packages at the same
    moment: the lock row in the database lets one exchange run at a time."""
    site.faults.delay = 0.02
    targets = [make_worker(db_url, engine, site, worker_id=f"w{n}").target for n in (1, 2)]

    async def both() -> list[list[Classification]]:
        try:
            return await asyncio.gather(
                *(
                    t.send([price(f"SKU-{n}-{k}", 1) for k in range(20)])
                    for n, t in enumerate(targets)
                )
            )
        finally:
            for t in targets:
                await t.aclose()

    answers = asyncio.run(both())

    assert 0 == site.overlaps
    assert {Verdict.DELIVERED} == {a.verdict for batch in answers for a in batch}
    assert 2 == len(site.packages)


def test_the_sites_own_temporary_trouble_is_not_charged_to_the_messages(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    # catalog.import.1c's CC_BSC1_TABLE_CREATE_ERROR: the site's database, not the package.
    site.faults.failure_text = "Ошибка создания временных таблиц."
    stage(engine, [price_row("SKU-1", 1, "1.00"), price_row("SKU-2", 1, "2.00")])
    worker = make_worker(db_url, engine, site, max_attempts=1)

    async def scenario(worker: Worker) -> None:
        await worker.cycle()
        assert {"new", "delayed"} >= {s for s, _ in states(engine).values()}, states(engine)
        site.faults.failure_text = None
        await drain(worker)

    run_worker(worker, scenario)

    assert {("SKU-1", 1): ("delivered", None), ("SKU-2", 1): ("delivered", None)} == states(engine)


def test_a_user_who_may_sign_in_but_not_import_pauses_once_and_charges_nothing(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    """The Bitrix side of issue 22 item 4: checkauth (the health check) succeeds for a user in
    none of the component's GROUP_PERMISSIONS, and every exchange is refused
    CC_BSC1_PERMISSION_DENIED. Delivery pauses (the key may read but not write), nothing is
    charged, and it does not loop."""
    site.faults.no_permission = True
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site, retry_max_delay=1.0)
    took: list[float] = []

    async def scenario(worker: Worker) -> None:
        started = time.monotonic()
        for _ in range(20):
            await worker.cycle()
            await asyncio.sleep(0.02)
        took.append(time.monotonic() - started)

    run_worker(worker, scenario)

    assert worker.paused_reason is not None
    assert "may read but not write" in worker.paused_reason
    assert states(engine)[("SKU-1", 1)] in {("new", None), ("delayed", None)}
    # the first refused exchange, then one write about every second, however long a loaded
    # machine makes the 20 cycles: a few, never one per cycle
    assert site.requests["init"] <= 2 + took[0] / 1.0, (site.requests, took)
    assert site.requests["init"] < 20, site.requests


def test_known_prices_unread_pause_delivery_with_their_own_words_never_the_sites_failure(
    db_url: str, engine: Engine, site: BitrixSimulator
) -> None:
    """Issue 34: when the service's own database does not give the known prices a Bitrix offer
    must carry (Bitrix's import deletes the price types an offer lacks), nothing is sent and
    delivery is paused with words of its own: not the site's temporary failure (the site is
    well: no breaker, nobody charged), said in status as what a person mends; the database
    answering again, one package tries and delivery goes on by itself."""
    from exchange.domain.breaker import BreakerState
    from exchange.domain.clock import SystemClock
    from exchange.domain.pause import PauseCause
    from exchange.ops.attention import attention
    from exchange.ops.status import status

    class Unread:
        def latest(self, skus: object) -> list[Any]:
            raise OSError("the database went away")

    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(6)])
    worker = make_worker(db_url, engine, site, breaker_threshold=2, retry_max_delay=60)
    store = worker.target.known  # type: ignore[attr-defined]
    worker.target.known = Unread()  # type: ignore[attr-defined]
    seen: dict[str, Any] = {}

    async def unread_then_read(w: Worker) -> None:
        await w.cycle()
        seen.update(cause=w.pause_cause, breaker=w.breaker.state(SystemClock().now()))
        seen.update(packages=len(site.packages), states=states(engine))
        with transaction(engine, read_only=True) as connection:
            seen["attempts"] = connection.execute(select(messages.c.attempts)).scalars().all()
            figures = status(connection, SystemClock().now(), w.settings.policies)
            seen["figures"] = figures
            seen["found"] = attention(
                connection, None, figures, SystemClock().now(), w.settings.policies, 60.0
            )
        # The database answers again; the next trial is due (EXCHANGE_RETRY_MAX_DELAY passed).
        w.target.known = store  # type: ignore[attr-defined]
        w._write_try_at = 0.0
        await drain(w)

    run_worker(worker, unread_then_read)

    figures, found = seen["figures"], seen["found"]
    assert 0 == seen["packages"]
    assert PauseCause.KNOWN_PRICES is seen["cause"]
    assert BreakerState.CLOSED is seen["breaker"]
    assert {(f"SKU-{n}", 1): ("new", None) for n in range(6)} == seen["states"]
    assert {0} == set(seen["attempts"])  # nobody charged
    assert (True, "known-prices", False) == (
        figures.delivery_paused,
        figures.pause and figures.pause["cause"],
        figures.breaker_open,
    )
    (said,) = [c.words("ru") for c in found.causes if c.code == "paused"]
    assert said.startswith(
        "Доставка остановлена: последние известные цены не прочитаны из базы обмена (OSError)."
    ), said
    assert "EXCHANGE_DATABASE_URL" in said and "exchange resume" in said

    assert worker.pause_cause is None and worker.paused_reason is None
    assert {(f"SKU-{n}", 1): ("delivered", None) for n in range(6)} == states(engine)
