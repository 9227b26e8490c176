"""Contract 3: "a version at or below the last delivered one is never sent", at the moment of
the claim, under the interleaving that broke it (issue 12, item 2).

Two workers share a database and a clock. Worker A sends v1 of ten SKUs; while those requests
are out (the site will answer 503), 1C stages v5 and worker B runs a cycle: it takes v5 in,
coalesces (v1 is in flight under a live lease: not pending, so not cancelled) and finds every
aggregate leased. A records v1 delayed, claims again in the same cycle and delivers v5; time
passes and v1 is due again. The site keeps only the idempotency promise (no version check), so
v1 sent now would be applied over v5. It must end ``cancelled``, reason ``stale``, never sent.
Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import messages
from exchange.dev.testing import FakeSite, drain, fast_settings, price_row, stage
from exchange.domain.clock import FakeClock

SKUS = [f"SKU-{n}" for n in range(10)]


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
