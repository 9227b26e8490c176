"""Contract 5b end to end: the worker delivering through the batch API, on SQLite and PostgreSQL.

Against the real simulator over HTTP (``SiteSimulator(batch_enabled=...)``): a reload ends as
it does with single requests, one effect per message, the fallback on a site without the batch
endpoint, a fault mix. Against a scripted site (``httpx.MockTransport``), the worker's side of
per-item answers: the pause, the breaker, the fallback's single warning, malformed answers.
"""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    FakeSite,
    drain,
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.targets.shop_api.client import BATCH_PATH
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

NO_ENDPOINT = "no batch endpoint"


@pytest.fixture
def batch_site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1), batch_enabled=True) as sim:
        yield sim


def make_worker(db_url: str, engine: Engine, site_url: str, **overrides: Any) -> Worker:
    settings = fast_settings(db_url, site_url, **{"site_batch_size": 10, **overrides})
    return bootstrap.worker(settings, engine, rng=random.Random(3))


def scripted_worker(db_url: str, engine: Engine, site: ScriptedSite, **overrides: Any) -> Worker:
    settings = fast_settings(db_url, "https://site.test", **{"site_batch_size": 5, **overrides})
    return bootstrap.worker(
        settings, engine, transport=httpx.MockTransport(site), rng=random.Random(3)
    )


def run(worker: Worker, cycles: int = 1000) -> None:
    async def go() -> None:
        try:
            await drain(worker, cycles=cycles)
        finally:
            await worker.target.aclose()

    asyncio.run(go())


def run_cycles(worker: Worker, count: int) -> None:
    async def go() -> None:
        try:
            for _ in range(count):
                await worker.cycle()
        finally:
            await worker.target.aclose()

    asyncio.run(go())


def by_message_id(engine: Engine) -> dict[str, dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return {r["message_id"]: dict(r) for r in connection.execute(select(messages)).mappings()}


def events_of(engine: Engine) -> list[str]:
    with transaction(engine, read_only=True) as connection:
        return list(connection.execute(select(history.c.event)).scalars())


def warnings_about(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


class ScriptedSite:
    """An httpx handler: FakeSite's promises for singles and for each batch item, with the
    batch endpoint missing, a whole-batch answer, or per-aggregate item answers on demand."""

    def __init__(
        self,
        *,
        batch_enabled: bool = True,
        whole: tuple[int, bytes] | None = None,
        items: dict[str, tuple[int, dict[str, Any]]] | None = None,
    ) -> None:
        self.inner = FakeSite()
        self.batch_enabled = batch_enabled
        self.whole = whole
        self.items = dict(items or {})  # aggregate -> (status, body), answered once
        self.batches: list[list[str]] = []  # the aggregates of each batch request
        self.singles: list[str] = []  # the aggregate of each single request
        self.health_status = 200

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/health":
            return httpx.Response(self.health_status, json={})
        if request.url.path != BATCH_PATH:
            self.singles.append(json.loads(request.content)["aggregate"])
            return self.inner(request)  # type: ignore[no-any-return]
        items = json.loads(request.content)["items"]
        self.batches.append([item["aggregate"] for item in items])
        if not self.batch_enabled:
            return httpx.Response(404, json={"error": "not found"})
        if self.whole is not None:
            return httpx.Response(self.whole[0], content=self.whole[1])
        return httpx.Response(200, json={"results": [self._item(item) for item in items]})

    def _item(self, item: dict[str, Any]) -> dict[str, Any]:
        scripted = self.items.pop(item["aggregate"], None)
        if scripted is not None:
            status, body = scripted
            return {"message_id": item["message_id"], "status": status, "body": body}
        single = httpx.Request(
            "POST",
            "https://site.test/api/v1/updates",
            headers={"Idempotency-Key": item["message_id"]},
            content=json.dumps(item).encode(),
        )
        answer = self.inner(single)
        return {
            "message_id": item["message_id"],
            "status": answer.status_code,
            "body": answer.json(),
        }


# -- against the simulator -------------------------------------------------------------------


def reload_rows() -> list[dict[str, Any]]:
    rows = [price_row(f"SKU-{n}", v, f"{n}.{v:02d}") for n in range(40) for v in (1, 2)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(4) for v in range(1, 6)]
    random.Random(11).shuffle(rows)
    return rows


def end_state(engine: Engine) -> dict[str, tuple[Any, ...]]:
    return {
        mid: (m["kind"], m["aggregate"], m["version"], m["state"], m["reason"], m["attempts"])
        for mid, m in by_message_id(engine).items()
    }


def test_a_full_reload_through_batches_ends_exactly_as_with_single_requests(
    db_url: str, engine: Engine, batch_site: SiteSimulator, tmp_path: Path
) -> None:
    rows = reload_rows()
    stage(engine, rows)
    worker = make_worker(db_url, engine, batch_site.url)
    run(worker)

    singles_url = sqlite_copy(tmp_path / "singles.db")
    singles_engine = make_engine(singles_url)
    try:
        stage(singles_engine, rows)
        with SiteSimulator(token="test-token", faults=Faults(seed=1)) as singles_site:
            run(make_worker(singles_url, singles_engine, singles_site.url, site_batch_size=1))
            singles_held = singles_site.held_versions()
            singles_applied = sorted(
                (e.kind, e.aggregate, e.version) for e in singles_site.effects()
            )
        singles_end = end_state(singles_engine)
    finally:
        singles_engine.dispose()

    assert singles_end == end_state(engine)
    assert singles_held == batch_site.held_versions()
    assert singles_applied == sorted((e.kind, e.aggregate, e.version) for e in batch_site.effects())
    delivered = sum(1 for m in by_message_id(engine).values() if m["state"] == "delivered")
    assert 40 + 20 == delivered
    assert worker.requests_sent < delivered / 5, "the messages were not sent in batches"


def test_through_batches_the_site_sees_one_effect_per_message_even_when_answers_are_lost(
    db_url: str, engine: Engine, batch_site: SiteSimulator
) -> None:
    batch_site.faults.drop_after_effect_rate = 0.5
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(30)])
    run(make_worker(db_url, engine, batch_site.url, max_attempts=10))

    rows = by_message_id(engine)
    assert {"delivered"} == {m["state"] for m in rows.values()}
    assert dict.fromkeys(rows, 1) == dict(batch_site.effect_counts())
    retried = [m for m in rows.values() if m["attempts"] > 1]
    assert retried, "no answer was lost: the test proved nothing"


def test_a_site_without_the_batch_endpoint_gets_everything_by_single_requests(
    db_url: str, engine: Engine, site_without_batch: SiteSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(25)])
    caplog.set_level(logging.WARNING, logger="exchange")
    worker = make_worker(db_url, engine, site_without_batch.url, batch_size=10, concurrency=2)
    run(worker)

    rows = by_message_id(engine)
    assert {("delivered", 1)} == {(m["state"], m["attempts"]) for m in rows.values()}
    assert 25 == site_without_batch.request_count  # each one single request
    assert {1} == set(site_without_batch.effect_counts().values())
    assert 1 == len(warnings_about(caplog, NO_ENDPOINT))


@pytest.fixture
def site_without_batch() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1), batch_enabled=False) as sim:
        yield sim


def test_a_fault_mix_through_batches_ends_with_every_invariant_true(
    db_url: str, engine: Engine, batch_site: SiteSimulator
) -> None:
    batch_site.faults = Faults(
        seed=7,
        fail_rate=0.15,
        drop_after_effect_rate=0.15,
        slow_rate=0.05,
        slow_seconds=0.02,
        poison={"SKU-P"},
        reject={"SKU-R"},
    )
    skus = [f"SKU-{n}" for n in range(30)]
    rows = [price_row(s, v, f"{v}.50") for s in skus for v in (1, 2)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(3) for v in range(1, 5)]
    rows += [price_row("SKU-P", 1), price_row("SKU-R", 1)]
    random.Random(13).shuffle(rows)
    stage(engine, rows)
    run(make_worker(db_url, engine, batch_site.url, max_attempts=8), cycles=3000)

    rows_now = list(by_message_id(engine).values())
    poison = next(m for m in rows_now if m["aggregate"] == "SKU-P")
    rejected = next(m for m in rows_now if m["aggregate"] == "SKU-R")
    assert ("quarantined", "retry-limit", 8) == (
        poison["state"],
        poison["reason"],
        poison["attempts"],
    )
    assert ("quarantined", "http-422", 422) == (
        rejected["state"],
        rejected["reason"],
        rejected["last_status"],
    )
    others = [m for m in rows_now if m["aggregate"] not in ("SKU-P", "SKU-R")]
    outcomes = {(m["kind"], m["aggregate"], m["version"]): m["state"] for m in others}
    expected = {("price", s, 1): "cancelled" for s in skus}  # superseded by version 2
    expected |= {("price", s, 2): "delivered" for s in skus}
    expected |= {
        ("financial_posting", f"DOC-{d}", v): "delivered" for d in range(3) for v in (1, 2, 3, 4)
    }
    assert expected == outcomes
    held = batch_site.held_versions()
    assert {("price", s): 2 for s in skus} == {k: v for k, v in held.items() if k[0] == "price"}
    for d in range(3):
        assert [1, 2, 3, 4] == batch_site.applied_versions("financial_posting", f"DOC-{d}")
    assert {1} == set(batch_site.effect_counts().values())
    delivered = {m["message_id"] for m in others if m["state"] == "delivered"}
    assert delivered == set(batch_site.effect_counts())


# -- against a scripted site: the worker's side of per-item and whole answers ----------------


def test_after_a_404_to_the_batch_the_worker_logs_once_and_sends_singles_uncharged(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    site = ScriptedSite(batch_enabled=False)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(20)])
    caplog.set_level(logging.WARNING, logger="exchange")
    run(scripted_worker(db_url, engine, site, batch_size=8, site_batch_size=4, concurrency=2))

    rows = by_message_id(engine)
    assert {("delivered", 1)} == {(m["state"], m["attempts"]) for m in rows.values()}
    assert 1 == len(warnings_about(caplog, NO_ENDPOINT))
    assert 1 <= len(site.batches) <= 2, "batch requests after the fallback (concurrency 2)"
    assert sorted(f"SKU-{n}" for n in range(20)) == sorted(site.singles)
    assert {"taken", "delivered"} == set(events_of(engine))


def test_a_per_item_401_pauses_delivery_without_charging_that_message(
    db_url: str, engine: Engine
) -> None:
    site = ScriptedSite(items={"SKU-2": (401, {"error": "unauthorized"})})
    site.health_status = 401
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)])
    worker = scripted_worker(db_url, engine, site, batch_size=5)
    run_cycles(worker, 2)

    rows = {m["aggregate"]: m for m in by_message_id(engine).values()}
    assert ("new", 0) == (rows["SKU-2"]["state"], rows["SKU-2"]["attempts"])
    assert {("delivered", 1)} == {
        (m["state"], m["attempts"]) for a, m in rows.items() if a != "SKU-2"
    }
    assert worker.paused_reason is not None and "401" in worker.paused_reason

    site.health_status = 200
    run(scripted_worker(db_url, engine, site))  # the site accepts again: it resumes
    assert ("delivered", 1) == (
        by_message_id(engine)[rows["SKU-2"]["message_id"]]["state"],
        by_message_id(engine)[rows["SKU-2"]["message_id"]]["attempts"],
    )


def test_a_whole_batch_503_counts_one_failure_per_aggregate_for_the_breaker(
    db_url: str, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    site = ScriptedSite(whole=(503, b'{"error": "outage"}'))
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)])
    caplog.set_level(logging.WARNING, logger="exchange")
    worker = scripted_worker(
        db_url,
        engine,
        site,
        batch_size=5,
        breaker_threshold=3,
        retry_base_delay=30,  # the cool-down outlasts the test: no probe
        retry_max_delay=60,
    )
    run_cycles(worker, 2)

    assert worker.breaker.is_open()
    assert 1 == len(warnings_about(caplog, "circuit breaker open"))
    assert [[f"SKU-{n}" for n in range(5)]] == site.batches
    assert {("delayed", 1, 503)} == {
        (m["state"], m["attempts"], m["last_status"]) for m in by_message_id(engine).values()
    }


def test_while_the_breaker_is_half_open_a_batch_request_carries_one_probe(
    db_url: str, engine: Engine
) -> None:
    site = ScriptedSite(whole=(503, b'{"error": "outage"}'))
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(6)])
    worker = scripted_worker(
        db_url, engine, site, batch_size=6, site_batch_size=6, breaker_threshold=2, max_attempts=50
    )

    async def outage() -> None:
        try:
            while len(site.batches) < 4:
                await worker.cycle()
                await asyncio.sleep(0.005)
        finally:
            await worker.target.aclose()

    asyncio.run(asyncio.wait_for(outage(), timeout=60))

    assert 6 == len(site.batches[0])
    assert [1, 1, 1] == [len(b) for b in site.batches[1:4]]
    assert 6 == sum(m["attempts"] for m in by_message_id(engine).values())  # probes: uncharged


@pytest.mark.parametrize(
    "content", [b"not json", b'{"results": "none"}', b'{"receipt": "R-1"}'], ids=str
)
def test_a_2xx_that_is_not_a_results_document_quarantines_unknown_response_never_delivered(
    db_url: str, engine: Engine, content: bytes
) -> None:
    site = ScriptedSite(whole=(200, content))
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    run(scripted_worker(db_url, engine, site))

    assert {("quarantined", "unknown-response")} == {
        (m["state"], m["reason"]) for m in by_message_id(engine).values()
    }


def test_an_item_missing_from_the_results_is_quarantined_unknown_response(
    db_url: str, engine: Engine
) -> None:
    site = ScriptedSite()
    original = site._item
    site._item = lambda item: (  # type: ignore[method-assign]
        {"message_id": "not-this-one", "status": 200, "body": {}}
        if item["aggregate"] == "SKU-1"
        else original(item)
    )
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    run(scripted_worker(db_url, engine, site))

    rows = {m["aggregate"]: m for m in by_message_id(engine).values()}
    assert ("quarantined", "unknown-response") == (rows["SKU-1"]["state"], rows["SKU-1"]["reason"])
    assert {"delivered"} == {rows[a]["state"] for a in ("SKU-0", "SKU-2")}


def test_every_batch_request_holds_at_most_site_batch_size_items_one_per_aggregate(
    db_url: str, engine: Engine
) -> None:
    site = ScriptedSite()
    rows = [price_row(f"SKU-{n}", v) for n in range(12) for v in (1, 2, 3)]
    rows += [posting_row(f"DOC-{d}", v) for d in range(4) for v in range(1, 5)]
    random.Random(17).shuffle(rows)
    stage(engine, rows)
    run(scripted_worker(db_url, engine, site, site_batch_size=5))

    assert site.batches, "nothing went through the batch endpoint"
    assert [] == [b for b in site.batches if len(b) > 5 or len(set(b)) != len(b)]
    assert {"delivered", "cancelled"} == {m["state"] for m in by_message_id(engine).values()}


def test_several_batch_requests_are_in_flight_at_once_up_to_the_concurrency(
    db_url: str, engine: Engine
) -> None:
    site = ScriptedSite()
    in_flight = 0
    most = 0

    async def slow_site(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return site(request)

    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(20)])
    settings = fast_settings(
        db_url, "https://site.test", site_batch_size=2, batch_size=20, concurrency=3
    )
    worker = bootstrap.worker(settings, engine, transport=httpx.MockTransport(slow_site))
    run(worker)

    assert 10 == len(site.batches)
    assert 3 == most
