"""Helpers for tests and the demo: staging rows as 1C writes them, fast settings, runs."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Engine,
    Subquery,
    and_,
    bindparam,
    func,
    insert,
    literal,
    select,
    update,
)

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import (
    CURSOR_COLUMNS,
    DELIVERY_COLUMNS,
    aggregates,
    channel_aggregates,
    deliveries,
    history,
    messages,
)
from exchange.dev.sitemodel import (
    BATCH_PATH,
    HEALTH_PATH,
    HEALTHY,
    NO_BATCH,
    UPDATES_PATH,
    BadRequest,
    Reply,
    SiteModel,
    Update,
    refuse_token,
    reply,
)
from exchange.domain.identity import message_id
from exchange.intake.stage import stage as intake_stage
from exchange.queue.deliveries import new_cursors, new_deliveries, the_channel
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
    channels=None,
    pair_settle=0,  # a lone price of a pair goes at once; its wait's tests set their own
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
    """The shop site in memory, as an httpx transport handler (for fast property tests).

    A thin front end of ``exchange.dev.sitemodel`` (the same model as ``exchange.dev.sitesim``
    and ``bench/fastsite.py``, checked by the same table, tests/dev/test_site_conformance.py):
    idempotency by key with same-body replay, 409 stale at or below the held version (none with
    ``check_versions=False``), the batch API when ``batch_enabled``, 404 for a SKU outside
    ``catalog``, 401 unless the bearer ``token`` matches (None accepts any). Faults come from
    ``plan``, one entry per update or batch request (then "ok"): "ok", "503", "429", "drop"
    (the effect applied, the answer lost), "reset" (nothing read or applied). A key already
    answered is replayed whatever the plan says for a single request, as the model's faults
    apply to fresh keys only; a batch takes "503", "429" and "reset" as a whole.
    """

    def __init__(
        self,
        plan: list[str] | None = None,
        *,
        check_versions: bool = True,
        token: str | None = None,
        batch_enabled: bool = False,
        catalog: Iterable[str] | None = None,
        withhold_drops: Any = None,
    ) -> None:
        self.plan = list(plan or [])
        self.token = token
        self.batch_enabled = batch_enabled
        # check_versions=False: a site that keeps only the idempotency promise. It applies
        # whatever version arrives (never 409 stale), so an old price sent after a newer one
        # lands, and shows: ``stale_writes`` lists every applied version below one applied before.
        self.model = SiteModel(
            check_versions=check_versions, catalog=catalog, withhold_drops=withhold_drops
        )

    @property
    def held(self) -> dict[tuple[str, str], int]:
        """Per (kind, aggregate), the version the site shows: the last one applied."""
        return dict(self.model.held)

    @property
    def applied(self) -> dict[tuple[str, str], list[int]]:
        """Per (kind, aggregate), every version applied, in order."""
        applied: dict[tuple[str, str], list[int]] = {}
        for effect in self.model.effects:
            applied.setdefault((effect.kind, effect.aggregate), []).append(effect.version)
        return applied

    @property
    def effects(self) -> dict[str, int]:
        """Effects per message_id (1 each, unless the site is broken)."""
        return dict(self.model.effect_counts)

    @property
    def stale_writes(self) -> list[str]:
        return [f"{e.kind} {e.aggregate} v{e.version}" for e in self.model.stale_writes]

    def __call__(self, request: Any) -> Any:
        import httpx

        path = request.url.path
        refused = refuse_token(self.token, request.headers.get("Authorization"))
        device = self.model.withheld_route(request.method, request.url.raw_path.decode())
        if device is not None:  # the withholding test device (sitemodel)
            return _response(httpx, refused or device)
        if request.method == "GET":  # the health check: the site is up (a fault is per update)
            return _response(httpx, refused or (HEALTHY if path == HEALTH_PATH else NOT_FOUND))
        if path == BATCH_PATH and not self.batch_enabled:
            return _response(httpx, NO_BATCH)
        if path not in (UPDATES_PATH, BATCH_PATH):
            return _response(httpx, NOT_FOUND)
        if refused is not None:
            return _response(httpx, refused)
        fault = self.plan.pop(0) if self.plan else "ok"

        def gate(update: Update) -> Reply | None:
            if fault == "reset":
                raise httpx.ConnectError("connection refused", request=request)
            if fault in ("503", "429"):
                return BUSY[fault]
            return None

        if path == UPDATES_PATH:
            result = self.model.single(
                request.content, request.headers.get("Idempotency-Key"), gate
            )
            answer, applied = result.reply, result.applied
        else:
            if fault in ("503", "429"):
                return _response(httpx, BUSY[fault])
            if fault == "reset":
                raise httpx.ConnectError("connection refused", request=request)
            try:
                items = self.model.read_batch(request.content)
            except BadRequest as exc:
                return _response(httpx, reply(400, {"error": str(exc)}))
            batch = self.model.answer_batch(items)
            answer, applied = batch.reply, batch.applied > 0
        if fault == "drop" and applied:
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return _response(httpx, answer)


BUSY = {"503": reply(503, {"error": "busy"}), "429": reply(429, {"error": "busy"})}
NOT_FOUND = reply(404, {"error": "not found"})


def _response(httpx: Any, answer: Reply) -> Any:
    headers = [("Content-Type", "application/json"), *answer.headers]
    return httpx.Response(answer.status, headers=headers, content=answer.body)


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


def one_channel_messages() -> Subquery:
    """Every message as the one-target service kept it: its own columns and its delivery's on
    the one channel (the first registered, ``deliveries.the_channel``); a rejected record's
    own ``state``, ``reason``, ``last_error`` and ``updated_at`` (it has no delivery). For
    tests and benchmarks that count states the way they did before channels."""
    d = deliveries.alias("d")
    own = [c for c in messages.c if c.name not in DELIVERY_COLUMNS]
    delivery = [
        func.coalesce(d.c[name], messages.c[name]).label(name)
        if name in messages.c
        # a record was never sent: 0 attempts, as it always showed (and as the lists say)
        else func.coalesce(d.c[name], 0).label(name)
        if name == "attempts"
        else d.c[name]
        for name in DELIVERY_COLUMNS
    ]
    on = and_(d.c.message_pk == messages.c.id, d.c.channel_id == the_channel())
    return select(*own, *delivery).select_from(messages.outerjoin(d, on)).subquery("one_channel")


def one_channel_aggregates() -> Subquery:
    """Every aggregate as the one-target service kept it: its identity and its cursor and
    lease on the one channel (``done_version``, ``lease_token``, ``lease_owner``,
    ``lease_until``; none where it has no cursor there)."""
    c = channel_aggregates.alias("c")
    on = and_(c.c.aggregate_id == aggregates.c.id, c.c.channel_id == the_channel())
    return (
        select(*aggregates.c, *(c.c[name] for name in CURSOR_COLUMNS))
        .select_from(aggregates.outerjoin(c, on))
        .subquery("one_channel_aggregates")
    )


def message(engine: Engine, kind: str, aggregate: str, version: int) -> dict[str, Any]:
    """The message row of (kind, aggregate, version), not a rejected-row record, with its
    delivery's columns on the one channel (``one_channel_messages``)."""
    m = one_channel_messages()
    with transaction(engine, read_only=True) as connection:
        row = (
            connection.execute(
                select(m).where(
                    m.c.kind == kind,
                    m.c.aggregate == aggregate,
                    m.c.version == version,
                    m.c.rejected.is_(False),
                )
            )
            .mappings()
            .one()
        )
    return dict(row)


def fill_quarantine(
    engine: Engine,
    count: int,
    *,
    reasons: tuple[str, ...] = ("http-422", "unknown-sku"),
    since: datetime | None = None,
    prefix: str = "Q",
) -> list[str]:
    """``count`` quarantined price messages written straight into ``messages`` (each with its
    aggregate), one a minute from ``since`` (by default ``count`` minutes ago), the reasons in
    turn and attempts from 1 to 5: a large quarantine for the list's tests and its benchmark,
    made in seconds. Returns their message_ids, oldest first."""
    now = datetime.now(UTC)
    start = since or now - timedelta(minutes=count)
    rows: list[dict[str, Any]] = []
    for n in range(count):
        sku = f"{prefix}-{n:05d}"
        aggregate = f"{sku}/retail"
        payload = {"sku": sku, "price": f"{100 + n % 900}.00", "currency": "RUB"}
        at = start + timedelta(minutes=n)
        rows.append(
            {
                "message_id": message_id("price", aggregate, 1),
                "kind": "price",
                "aggregate": aggregate,
                "version": 1,
                "schema_version": "1",
                "payload": json.dumps({**payload, "price_type": "retail"}),
                "source_ref": f"1C exchange offers.xml {start.date().isoformat()}",
                "created_at": at,
                "taken_at": at,
                "updated_at": at,
            }
        )
    with transaction(engine) as connection:
        connection.execute(
            insert(aggregates), [{"kind": "price", "aggregate": r["aggregate"]} for r in rows]
        )
        ids = dict(
            connection.execute(
                select(aggregates.c.aggregate, aggregates.c.id).where(
                    aggregates.c.kind == "price",
                    aggregates.c.aggregate.in_([r["aggregate"] for r in rows]),
                )
            ).all()
        )
        connection.execute(
            insert(messages), [{**r, "aggregate_id": ids[r["aggregate"]]} for r in rows]
        )
        # Their deliveries and cursors on every channel taking prices, as intake writes them.
        postgres = is_postgres(connection)
        made = select(aggregates.c.id, aggregates.c.kind).where(aggregates.c.id.in_(ids.values()))
        connection.execute(new_cursors(made.subquery("made"), postgres))
        # The message's identity only: its own state, reason and last_error (a record's, NULL
        # on an accepted message) would override ``begun``.
        written = select(
            messages.c.id,
            messages.c.aggregate_id,
            messages.c.kind,
            messages.c.version,
            literal(0, BigInteger()).label("claim_rank"),
        ).where(messages.c.message_id.in_([r["message_id"] for r in rows]))
        begun = {"state": "quarantined", "attempts": 0, "waiting_since": now, "updated_at": now}
        connection.execute(new_deliveries(written.subquery(), postgres, start=begun))
        # Each its own reason, attempts and time, on every channel.
        pks = dict(
            connection.execute(
                select(messages.c.message_id, messages.c.id).where(
                    messages.c.message_id.in_([r["message_id"] for r in rows])
                )
            ).all()
        )
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == bindparam("pk"))
            .values(
                reason=bindparam("r"),
                attempts=bindparam("a"),
                last_error=bindparam("e"),
                waiting_since=bindparam("at"),
                updated_at=bindparam("at"),
            ),
            [
                {
                    "pk": pks[r["message_id"]],
                    "r": reasons[n % len(reasons)],
                    "a": 1 + n % 5,
                    "e": "site answered 422: price below cost",
                    "at": r["taken_at"],
                }
                for n, r in enumerate(rows)
            ],
        )
    return [r["message_id"] for r in rows]
