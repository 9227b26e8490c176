"""PostgreSQL walks the claim order for the pick, however often it runs (issue 23) and
however many messages are done behind the waiting ones (issue 35).

psycopg prepares a statement on the server from its sixth execution; from then on PostgreSQL
may plan it once for any values (a generic plan) and keep that plan. For the claim's pick that
plan read and sorted the whole backlog where the plan for the values walks the claim order to
the first ``limit`` rows: 140-410 ms a claim against 1-3 ms while 60,000 prices drained. The
pick is sent unprepared, so it is planned for its values every time.

Behind a long history the pick stated the claimable states twice; PostgreSQL multiplied the
two selectivities, took the waiting messages for a tenth of what they were and read, joined
and sorted all of them (74 ms a claim behind 100,000 done messages) instead of the walk (1 ms).
"""

from __future__ import annotations

import random
import re
from typing import Any

from sqlalchemy import Engine, event, text

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import CLAIMABLE_STATES, DELIVERY_CLAIM_ORDER_INDEX
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.states import DUE, Event, State, sources
from exchange.domain.verdicts import Classification, Verdict
from exchange.intake import staging_table as intake
from exchange.queue import coalesce, lease, record

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
            prepared = connection.execute(
                text("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
            ).all()
            # Nor the worker's other transactions (planning every statement costs CPU).
            setting = connection.execute(text("SHOW plan_cache_mode")).scalar_one()
    finally:
        engine.dispose()
    picks = [row for row in prepared if "SKIP LOCKED" in row.statement]
    assert picks == [], f"the pick was prepared on the server (a generic plan may follow): {picks}"
    # The claim's other statements are prepared as usual (planning the candidates' select
    # every time cost 3 ms a claim).
    candidates = [row for row in prepared if row.statement.startswith("SELECT d.message_pk, ")]
    assert candidates, "the candidates' select is prepared on the server"
    assert setting == "auto", f"plan_cache_mode outside the claim: {setting}"


def test_the_claimable_states_are_the_due_ones_and_in_flight() -> None:
    # The pick states the claimable states once (the partial index's predicate) and tells
    # the due ones apart by ``in_progress`` alone: right only while these are the same states.
    claimable = {*DUE, State.IN_PROGRESS}
    listed = CLAIMABLE_STATES.removeprefix("state IN (").removesuffix(")")
    assert {word.strip(" '") for word in listed.split(",")} == {s.value for s in claimable}
    # The gap check walks the claim order's index for its candidates (coalesce.quarantine_gaps).
    assert sources(Event.SEQUENCE_GAP) <= claimable


WAITING = 1_000
DONE = 19_000


def _kept_picks(engine: Engine) -> list[tuple[str, Any]]:
    kept: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "SKIP LOCKED" in statement:
            kept.append((statement, params))

    event.listen(engine, "before_cursor_execute", keep)
    return kept


def test_the_pick_walks_the_claim_order_behind_many_done_messages(pg_url: str) -> None:
    # Done messages far outnumber the waiting ones (a long history): 5 % of the table waits.
    engine = make_engine(pg_url)
    clock = FakeClock()
    settings = fast_settings(pg_url)
    try:
        stage(engine, [price_row(f"SKU-{n:05d}", 1) for n in range(WAITING + DONE)])
        intake.take(engine, None, settings.kinds, clock.now())
        with transaction(engine) as connection:
            # Done as far as the pick sees: the test's shortcut for delivering 19,000.
            connection.execute(
                text("UPDATE deliveries SET state = 'delivered' WHERE message_pk % 20 <> 0")
            )
        intake.analyze(engine)
        kept = _kept_picks(engine)
        with transaction(engine) as connection:
            batch = lease.claim(
                connection,
                worker="w1",
                now=clock.now(),
                limit=100,
                lease_seconds=60,
                kinds=settings.policies,
                max_attempts=5,
            )
            connection.rollback()
        [(statement, params)] = kept
        with engine.connect() as connection:
            plan = "\n".join(
                str(row[0]) for row in connection.exec_driver_sql("EXPLAIN " + statement, params)
            )
            connection.rollback()
    finally:
        engine.dispose()
    assert len(batch.messages) == 100
    walk = re.search(
        rf"Index Scan using {DELIVERY_CLAIM_ORDER_INDEX} on deliveries d .*rows=(\d+)", plan
    )
    assert walk is not None and "Sort" not in plan, f"the pick does not walk the index:\n{plan}"
    # What keeps the walk chosen behind any history: the planner counts the waiting messages
    # about right. With the states stated twice it took 5 % of 5 %: a twentieth of them, and
    # behind 100,000 done messages that made the sort of all of them look cheaper.
    (estimate,) = walk.groups()
    assert int(estimate) >= WAITING // 4, f"the waiting messages estimated at {estimate}:\n{plan}"


RELOAD_SKUS, RELOAD_VERSIONS = 1_000, 5


def _cte_rescans(node: dict[str, Any]) -> list[str]:
    """Nested loops whose inner side scans a CTE: the CTE read again for every outer row."""
    found = []
    children = node.get("Plans", [])
    if node["Node Type"] == "Nested Loop" and len(children) == 2:
        inner = children[1]
        if inner["Node Type"] == "CTE Scan":
            found.append(inner.get("CTE Name", "?"))
    for child in children:
        found += _cte_rescans(child)
    return found


def test_a_reloads_sweep_reads_its_candidates_once_per_join(pg_url: str) -> None:
    # A reload: every SKU in several versions, all but the newest to be cancelled by the sweep.
    # Its statement (candidates, the deliveries' update, the history) once also updated the
    # messages' old columns, joining the candidates' CTE a second time, and that join was
    # planned as a nested loop over the CTE: 180,000 × 180,000 rows read at 20,000 SKUs × 10
    # versions, and the worker never finished; the sweep turned nested loops off for it.
    # Now the candidates are joined back once, on the delivery's primary key, with the
    # planner's own settings: no join of the statement reads the CTE again per row.
    engine = make_engine(pg_url)
    clock = FakeClock()
    settings = fast_settings(pg_url)
    plans: list[Any] = []
    nested: list[str] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().startswith("WITH candidates"):
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, parameters)
            plans.append(cursor.fetchone()[0][0]["Plan"])
            cursor.execute("SHOW enable_nestloop")
            nested.append(cursor.fetchone()[0])

    try:
        rows = [
            price_row(f"SKU-{n:05d}", version)
            for version in range(1, RELOAD_VERSIONS + 1)
            for n in range(RELOAD_SKUS)
        ]
        stage(engine, rows)
        intake.take(engine, None, settings.kinds, clock.now())
        intake.analyze(engine)
        event.listen(engine, "before_cursor_execute", explain)
        with transaction(engine) as connection:
            cancelled = coalesce.coalesce(connection, settings.policies, clock.now())
        event.remove(engine, "before_cursor_execute", explain)
        assert nested == ["on"] * len(plans), "planned with the planner's own settings"
        assert cancelled == RELOAD_SKUS * (RELOAD_VERSIONS - 1)
        assert plans, "the sweep ran no candidates' statement"
        assert [_cte_rescans(plan) for plan in plans] == [[] for _ in plans]
    finally:
        engine.dispose()
