"""PostgreSQL plans the claim for its parameters' values however often it runs (issue 23).

psycopg prepares a statement on the server from its sixth execution; from then on PostgreSQL
may plan it once for any values (a generic plan) and keep that plan. For the claim's pick that
plan read and sorted the whole backlog where the plan for the values walks the claim order to
the first ``limit`` rows: 140-410 ms a claim against 1-3 ms while 60,000 prices drained.
"""

from __future__ import annotations

import random

from sqlalchemy import text

from exchange.db.engine import make_engine, transaction
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.intake import staging_table as intake
from exchange.queue import lease, record

CLAIMS = 20  # psycopg prepares at the 6th; PostgreSQL may go generic from the 6th after that

DELIVERED = Classification(Verdict.DELIVERED, "delivered", http_status=200, receipt="{}")


def test_the_claim_is_planned_for_its_values_after_the_server_prepared_it(pg_url: str) -> None:
    # One connection, so that every claim meets the statements psycopg prepared on it.
    engine = make_engine(pg_url, pool_size=1, max_overflow=0)
    clock = FakeClock()
    settings = fast_settings(pg_url)
    try:
        # A backlog far larger than a claim (the skew under which the generic plan was
        # chosen), with statistics, as autovacuum or a large intake gives them.
        stage(engine, [price_row(f"SKU-{n:05d}", 1) for n in range(2_000)])
        intake.take(engine, None, settings.kinds, clock.now())
        intake.analyze(engine)
        policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
        for _ in range(CLAIMS):
            clock.advance(0.001)
            with transaction(engine) as connection:
                batch = lease.claim(
                    connection,
                    worker="w1",
                    now=clock.now(),
                    limit=10,
                    lease_seconds=60,
                    kinds=settings.policies,
                    max_attempts=5,
                )
                # The claim's other statements keep the server's choice (planning its
                # candidates' select every time cost 3 ms a claim).
                after_the_pick = connection.execute(text("SHOW plan_cache_mode")).scalar_one()
            assert len(batch.messages) == 10
            assert after_the_pick == "auto", f"plan_cache_mode after the pick: {after_the_pick}"
            decision = decide(
                DELIVERED, attempt=1, now=clock.now(), policy=policy, rng=random.Random(0)
            )
            with transaction(engine) as connection:
                record.record(
                    connection,
                    token=batch.token,
                    worker="w1",
                    now=clock.now(),
                    outcomes=[(m, decision) for m in batch.messages],
                    kinds=settings.policies,
                )
        with transaction(engine) as connection:
            plans = connection.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE 'SELECT m.aggregate_id %SKIP LOCKED'"
                )
            ).all()
            # Nor the worker's other transactions (planning every statement costs CPU).
            setting = connection.execute(text("SHOW plan_cache_mode")).scalar_one()
    finally:
        engine.dispose()
    assert len(plans) == 1, f"the pick prepared on the server once: {plans}"
    [(generic, custom)] = plans
    assert generic == 0, f"the pick ran {generic} times on a generic plan ({custom} custom)"
    assert custom >= CLAIMS - 6, f"the pick planned for its values {custom} times"
    assert setting == "auto", f"plan_cache_mode outside the claim: {setting}"
