"""Contract 3: "a version at or below the last delivered one is never sent", at the moment of
the claim, under the interleaving that broke it (issue 12, item 2).

Two workers share a database and a clock. Worker A sends v1 of ten SKUs; while those requests
are out (the site will answer 503), 1C stages v5 and worker B runs a cycle: it takes v5 in,
coalesces (v1 is in flight under a live lease: not pending, so not cancelled) and finds every
aggregate leased. A records v1 delayed, claims again in the same cycle and delivers v5; time
passes and v1 is due again. The site keeps only the idempotency promise (no version check), so
v1 sent now would be applied over v5. It must end ``cancelled``, reason ``stale``, never sent.
Runs on SQLite and PostgreSQL.

The first test runs with the tests' short poll interval: A's cycle may take rows in again
between v1's failure and v5's claim, and that take-in's coalescing may cancel v1 before the
claim sees it (``superseded``). The second holds the poll interval long, so that nothing
coalesces between v5's delivery and v1's next claim: the claim's own order check (contract 3,
``lease._eligible`` through ``order.in_order``) is all that stands between v1 and the site.
Tried: without that check (or with only its "above the cursor" part taken out of
``order.newest_live``) the second test fails on both databases, v1 sent after v5; the first
still passes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.dev.testing import (
    FakeSite,
    drain,
    fast_settings,
    one_channel_aggregates,
    one_channel_messages,
    price_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.states import DUE, values
from exchange.queue import lease

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

SKUS = [f"SKU-{n}" for n in range(10)]
DUE_STATES = values(DUE)


class SlowFirstSite(FakeSite):
    """Keys only (no 409 for old versions). The first request of each v1 is answered 503, and
    before that answer worker B runs a cycle with v5 staged; each v5 moves the clock past v1's
    retry time, so v1 is due again within A's cycle."""

    def __init__(self, engine: Engine, clock: FakeClock) -> None:
        super().__init__(check_versions=False)
        self.engine = engine
        self.clock = clock
        self.other: Any = None  # worker B, set once built
        self.seen: dict[str, list[int]] = {}  # per SKU, the versions requested, in order
        self.staged = False

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":  # the health check the worker's pace asks after a 503
            response: httpx.Response = self(request)
            return response
        body = json.loads(request.content)
        self.seen.setdefault(body["aggregate"], []).append(body["version"])
        if body["version"] == 1 and self.seen[body["aggregate"]] == [1]:
            if not self.staged:
                self.staged = True
                stage(self.engine, [price_row(sku, 5, "500.00") for sku in SKUS])
                await self.other.cycle()  # B: intake and coalesce while v1 is in flight
            return httpx.Response(503, json={"error": "busy"})
        if body["version"] == 5:
            self.clock.advance(60)  # v1's retry (at most 0.01 s away) is due now
        answered: httpx.Response = self(request)
        return answered


def test_an_older_price_delayed_while_a_newer_one_was_delivered_is_cancelled_stale_never_sent(
    db_url: str,
) -> None:
    engine = make_engine(db_url)
    clock = FakeClock()
    site = SlowFirstSite(engine, clock)
    settings = fast_settings(
        db_url, "https://site.test", batch_size=50, concurrency=10, breaker_threshold=50
    )

    def worker(name: str) -> Any:
        return bootstrap.worker(
            settings.model_copy(update={"worker_id": name}),
            engine,
            clock=clock,
            transport=httpx.MockTransport(site.handle),
        )

    a, b = worker("A"), worker("B")
    site.other = b
    stage(engine, [price_row(sku, 1, "100.00") for sku in SKUS])

    async def scenario() -> None:
        try:
            await a.cycle()  # v1 -> 503 (B takes v5 in meanwhile), v5 delivered, v1 due again
            await drain(a)
            await drain(b)
        finally:
            await a.target.aclose()
            await b.target.aclose()

    asyncio.run(scenario())
    with transaction(engine, read_only=True) as connection:
        ends = {
            (aggregate, version): (state, reason)
            for aggregate, version, state, reason in connection.execute(
                select(
                    messages.c.aggregate, messages.c.version, messages.c.state, messages.c.reason
                )
            )
        }
    engine.dispose()

    assert {sku: [1, 5] for sku in SKUS} == site.seen, "v1 was sent again after v5"
    assert [] == site.stale_writes
    assert {("price", sku): 5 for sku in SKUS} == site.held
    # Under the claim order of issue 23, A's cycle may end before v5 is claimed; the next
    # cycle's coalescing then supersedes v1 before any claim. Either way v1 ends cancelled,
    # never sent after v5 (asserted above).
    assert {(sku, 5): ("delivered", None) for sku in SKUS} == {
        key: end for key, end in ends.items() if key[1] == 5
    }
    assert {("cancelled", "stale"), ("cancelled", "superseded")} >= {
        end for key, end in ends.items() if key[1] == 1
    }


def test_the_claim_alone_refuses_an_older_price_due_again_after_a_newer_one_was_delivered(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contract 3 at the moment of the claim, with no coalescing to help: A's one cycle sends
    v1 (503; B takes v5 in and coalesces meanwhile, v1 in flight), delivers v5, and claims
    again with v1 due and nothing coalesced since v5 was delivered (the poll interval outlasts
    the cycle, so A takes nothing in between). That claim must come back empty; v1 is
    cancelled ``stale`` by the next cycle's coalescing, never sent."""
    engine = make_engine(db_url)
    clock = FakeClock()
    site = SlowFirstSite(engine, clock)
    settings = fast_settings(
        db_url,
        "https://site.test",
        batch_size=50,
        concurrency=10,
        breaker_threshold=50,
        poll_interval=3600,  # no take-in (no coalescing) within A's cycle
    )
    claims: list[tuple[str, list[int]]] = []  # (worker, versions leased), in order
    real_claim = lease.claim

    def spy(connection: Any, **kwargs: Any) -> lease.Batch:
        batch = real_claim(connection, **kwargs)
        claims.append((kwargs["worker"], [m.version for m in batch.messages]))
        return batch

    monkeypatch.setattr(lease, "claim", spy)

    def worker(name: str) -> Any:
        return bootstrap.worker(
            settings.model_copy(update={"worker_id": name}),
            engine,
            clock=clock,
            transport=httpx.MockTransport(site.handle),
        )

    a, b = worker("A"), worker("B")
    site.other = b
    stage(engine, [price_row(sku, 1, "100.00") for sku in SKUS])

    async def scenario() -> dict[str, tuple[str, bool, int]]:
        try:
            await a.cycle()
            # Between A's cycle and anything else: v1 still waiting (not coalesced: new or
            # delayed, as its 503 was judged the site's or its own), due, below the
            # delivered v5.
            with transaction(engine, read_only=True) as connection:
                found = connection.execute(
                    select(
                        messages.c.aggregate,
                        messages.c.state,
                        messages.c.next_try_at,
                        aggregates.c.done_version,
                    )
                    .join(aggregates, aggregates.c.id == messages.c.aggregate_id)
                    .where(messages.c.version == 1)
                ).all()
            after_cycle = {
                sku: (state in DUE_STATES, due_at is None or due_at <= clock.now(), done)
                for sku, state, due_at, done in found
            }
            await drain(a)
            await drain(b)
            return after_cycle
        finally:
            await a.target.aclose()
            await b.target.aclose()

    after_cycle = asyncio.run(scenario())
    with transaction(engine, read_only=True) as connection:
        ends = {
            (aggregate, version): (state, reason)
            for aggregate, version, state, reason in connection.execute(
                select(
                    messages.c.aggregate, messages.c.version, messages.c.state, messages.c.reason
                )
            )
        }
    engine.dispose()

    assert {sku: [1, 5] for sku in SKUS} == site.seen, "v1 was sent again after v5"
    assert [] == site.stale_writes
    assert {("price", sku): 5 for sku in SKUS} == site.held
    # The interleaving happened as intended: B's cycle claimed nothing (A held every
    # aggregate); A claimed v1, then v5, then claimed again with v1 due and got nothing.
    a_claims = [versions for name, versions in claims if name == "A"]
    assert ("B", []) in claims
    assert a_claims[:3] == [[1] * len(SKUS), [5] * len(SKUS), []]
    assert {sku: (True, True, 5) for sku in SKUS} == after_cycle
    expected = {(sku, 1): ("cancelled", "stale") for sku in SKUS}
    expected |= {(sku, 5): ("delivered", None) for sku in SKUS}
    assert expected == ends
