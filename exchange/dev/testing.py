"""Helpers for tests and the demo: staging rows as 1C writes them, fast settings, runs."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.intake.stage import stage as intake_stage
from exchange.settings import Settings, load_settings
from exchange.worker import Worker


def load_scale() -> float:
    """How much longer than on an idle machine a wait may take now: the run queue per core
    (the 1-minute load average over the cores), between 1 and 5. A hang detector (a test's
    timeout, a started command's) stretches by it; a check never does."""
    return min(5.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


FAST = dict(
    poll_interval=0.01,
    batch_size=50,
    concurrency=4,
    lease_seconds=30,
    max_attempts=3,
    retry_base_delay=0.001,
    retry_max_delay=0.01,
    http_timeout=2.0,
    gap_timeout=600,
    breaker_threshold=5,
    site_batch_size=1,
    staging_url=None,
    site_token_file=None,
)


def fast_settings(database_url: str, site_url: str | None = None, **overrides: Any) -> Settings:
    """Settings with millisecond delays, independent of the environment's EXCHANGE_*."""
    return load_settings(
        database_url=database_url,
        site_url=site_url,
        site_token="test-token",
        worker_id="test-worker",
        **{**FAST, **overrides},
    )


def price_row(sku: str, version: int, price: str = "100.00", **extra: Any) -> dict[str, Any]:
    payload = {"sku": sku, "price": price, "currency": "RUB", "price_type": "retail"}
    return {
        "kind": "price",
        "aggregate": sku,
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Установка цен номенклатуры {version:06d}",
        **extra,
    }


def posting_row(document: str, version: int, amount: str = "10.00", **extra: Any) -> dict[str, Any]:
    payload = {"document": document, "line": version, "amount": amount}
    return {
        "kind": "financial_posting",
        "aggregate": document,
        "aggregate_version": version,
        "payload": json.dumps(payload),
        "schema_version": "1",
        "source_ref": f"Реализация {document}",
        **extra,
    }


def raw_row(
    kind: str,
    aggregate: str,
    version: int,
    payload: str,
    schema_version: str = "1",
    source_ref: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "aggregate": aggregate,
        "aggregate_version": version,
        "payload": payload,
        "schema_version": schema_version,
        "source_ref": source_ref,
    }


def stage(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Insert rows into staging_intents the way 1C does: INSERT only."""
    with transaction(engine) as connection:
        intake_stage(connection, rows)


def run_worker(worker: Worker, scenario: Callable[[Worker], Awaitable[Any]] | None = None) -> None:
    """Run ``scenario(worker)`` (by default ``drain``) in a fresh event loop, then close the
    worker's site client whatever happened: the set-up most tests share."""

    async def go() -> None:
        try:
            await (scenario or drain)(worker)
        finally:
            await worker.target.aclose()

    asyncio.run(go())


async def drain(worker: Worker, *, cycles: int = 200) -> None:
    """Run cycles until the worker is idle (bounded: fails loudly instead of hanging)."""
    for _ in range(cycles):
        report = await worker.cycle()
        if worker.idle():
            return
        if report.batches == 0:
            await asyncio.sleep(0.005)
    raise AssertionError(f"not idle after {cycles} cycles")


class FakeSite:
    """The site's promises in memory, as an httpx transport handler (for fast property tests).

    Same rules as ``exchange.sitesim`` without the sockets: idempotency by key, 409 stale at
    or below the held version (none with ``check_versions=False``), and faults drawn from
    ``plan`` (one entry per request, then "ok"): "ok", "503", "429", "drop" (effect applied,
    answer lost), "reset" (not applied).
    """

    def __init__(self, plan: list[str] | None = None, *, check_versions: bool = True) -> None:
        self.plan = list(plan or [])
        # False: a site that keeps only the idempotency promise. It applies whatever version
        # arrives (never 409 stale), so an old price sent after a newer one lands, and shows:
        # ``stale_writes`` lists every applied version below one applied before.
        self.check_versions = check_versions
        self.held: dict[tuple[str, str], int] = {}
        self.applied: dict[tuple[str, str], list[int]] = {}
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.effects: dict[str, int] = {}
        self.stale_writes: list[str] = []

    def __call__(self, request: Any) -> Any:
        import httpx

        if request.method == "GET":  # the health check: the site is up (a fault is per update)
            return httpx.Response(200, json={"status": "ok"})
        body = json.loads(request.content)
        key = request.headers["Idempotency-Key"]
        fault = self.plan.pop(0) if self.plan else "ok"
        if key in self.answers:
            status, content = self.answers[key]
            return httpx.Response(status, content=content)
        if fault == "reset":
            raise httpx.ConnectError("connection refused", request=request)
        if fault in ("503", "429"):
            return httpx.Response(int(fault), json={"error": "busy"})
        aggregate = (body["kind"], body["aggregate"])
        held = self.held.get(aggregate, 0)
        if body["version"] <= held and self.check_versions:
            return httpx.Response(409, json={"error": "stale", "current_version": held})
        if body["version"] < max(self.applied.get(aggregate, [0])):
            self.stale_writes.append(f"{body['kind']} {body['aggregate']} v{body['version']}")
        self.held[aggregate] = body["version"]  # what the site shows: the last one applied
        self.applied.setdefault(aggregate, []).append(body["version"])
        self.effects[key] = self.effects.get(key, 0) + 1
        content = json.dumps({"receipt": f"R-{len(self.effects)}"}).encode()
        self.answers[key] = (200, content)
        if fault == "drop":
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return httpx.Response(200, content=content)


def in_flight_overlaps(engine: Engine) -> list[str]:
    """Per aggregate, the attempts of two different messages whose leases overlap.

    Each attempt is one history row: its lease began at ``leased_at`` and ended at ``at``
    (answered or released), or at ``lease_until`` when that came first: a lease that expired
    unanswered ended then, though the row that says so (a takeover, or a cancellation or
    quarantine by a later cycle) is written later. A claim reads the lease's start once it
    holds the aggregates, that is after the commit that ended the previous attempt, whose
    ``at`` was read before that commit: on one clock, the next lease of an aggregate never
    begins before the previous attempt's end.
    """
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(
                messages.c.kind,
                messages.c.aggregate,
                messages.c.version,
                history.c.message_pk,
                history.c.leased_at,
                history.c.at,
                history.c.lease_until,
            )
            .join(messages, messages.c.id == history.c.message_pk)
            .where(history.c.leased_at.is_not(None))
        ).all()
    spans: dict[tuple[str, str], list[tuple[Any, Any, int, int]]] = defaultdict(list)
    for kind, aggregate, version, pk, leased_at, at, until in rows:
        end = min(at, until) if until is not None else at
        spans[(kind, aggregate)].append((leased_at, end, pk, version))
    found = []
    for (kind, aggregate), intervals in spans.items():
        intervals.sort()
        for (_, end, pk, v), (start_next, _, pk_next, v_next) in itertools.pairwise(intervals):
            if start_next < end and pk != pk_next:
                found.append(f"{kind} {aggregate} v{v}/v{v_next}")
    return found


def message(engine: Engine, kind: str, aggregate: str, version: int) -> dict[str, Any]:
    """The message row of (kind, aggregate, version), not a rejected-row record."""
    with transaction(engine, read_only=True) as connection:
        row = (
            connection.execute(
                select(messages).where(
                    messages.c.kind == kind,
                    messages.c.aggregate == aggregate,
                    messages.c.version == version,
                    messages.c.rejected.is_(False),
                )
            )
            .mappings()
            .one()
        )
    return dict(row)
