"""The growth section (bench/growth.py, issue 35 item 6) measures on the table it says: the
size asked, every message done (delivered or cancelled as a reload leaves them), each copy an
aggregate of its own with its own versions; and new prices on top of it drain completely."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, create_engine, text

from bench.growth import SEED, drain_new, fill, table
from bench.pg_diagnose import diagnose


@pytest.mark.timeout(300)
@pytest.mark.parametrize("analyzed_engine", ["sqlite", "postgresql"], indirect=True)
def test_the_table_holds_the_size_asked_all_done_each_copy_an_aggregate_of_its_own(
    analyzed_engine: Engine,
) -> None:
    filled = fill(analyzed_engine, 2 * SEED)
    assert {"delivered": 2_000, "cancelled": 18_000} == filled["states"]
    with analyzed_engine.connect() as connection:
        aggregates = connection.execute(
            text("SELECT count(*), count(DISTINCT aggregate) FROM aggregates")
        ).one()
        mismatched = connection.execute(
            text(
                "SELECT count(*) FROM messages m JOIN aggregates a ON a.id = m.aggregate_id "
                "LEFT JOIN channel_aggregates ca ON ca.aggregate_id = a.id "
                "WHERE m.aggregate <> a.aggregate OR coalesce(ca.done_version, 0) <> 10"
            )
        ).scalar_one()
        per_aggregate = connection.execute(
            text(
                "SELECT min(n), max(n) FROM "
                "(SELECT aggregate_id, count(*) AS n FROM messages GROUP BY aggregate_id) AS c"
            )
        ).one()
    assert (2_000, 2_000) == tuple(aggregates)
    assert 0 == mismatched
    assert (10, 10) == tuple(per_aggregate)
    drained = drain_new(analyzed_engine, 150, 100, 0)
    assert 150 == drained["messages"]
    with analyzed_engine.connect() as connection:
        states = dict(
            connection.execute(text("SELECT state, count(*) FROM deliveries GROUP BY state")).all()
        )
    assert {"delivered": 2_150, "cancelled": 18_000} == states


def row(database: str, already: int, us: float, ratio: float) -> dict[str, object]:
    return {
        "database": database,
        "already": already,
        "claim_ms_per_batch": 5.0,
        "record_ms_per_batch": 5.0,
        "us_per_message": us,
        "runs_us": [us],
        "ratio": ratio,
        "load_1min": [1.0],
    }


def test_the_table_sets_the_largest_size_against_the_goal_per_database() -> None:
    text_ = table(
        [
            row("sqlite", 10_000, 100.0, 1.0),
            row("sqlite", 1_000_000, 125.0, 1.25),
            row("postgresql", 10_000, 100.0, 1.0),
            row("postgresql", 1_000_000, 126.0, 1.26),
        ]
    )
    assert "sqlite: at 1,000,000 messages already, 1.25x the cost at 10,000 (meets" in text_
    assert "postgresql: at 1,000,000 messages already, 1.26x the cost at 10,000 (misses" in text_


@pytest.mark.timeout(300)
def test_the_diagnosis_explains_each_statement_and_leaves_the_drain_as_it_was(
    pg_url: str,
) -> None:
    """bench.pg_diagnose (issue 35 item 1) replays a claim and a record under EXPLAIN ANALYZE
    in transactions it rolls back: every message is still claimed and recorded once."""
    found = diagnose(pg_url, 250, 100, {2})
    assert 3 == found["batches"]
    # each batch's record is timed statement by statement, the same statements every batch
    # (their number is the queue's: it changes as the queue's writes do, issue 31's dual write)
    counts = [len(statements) for statements in found["per"]["record"]]
    assert counts[0] > 0 and counts == [counts[0]] * 3, counts
    plans = found["plans"][2]
    assert any(
        p.startswith("-- UPDATE channel_aggregates") and "Buffers" in p for p in plans["claim"]
    )
    assert any(p.startswith("-- INSERT message_history") for p in plans["record"])
    engine = create_engine(pg_url)
    try:
        with engine.connect() as connection:
            states = dict(
                connection.execute(
                    text("SELECT state, count(*) FROM deliveries GROUP BY state")
                ).all()
            )
            history = connection.execute(
                text("SELECT count(*) FROM message_history WHERE event = 'delivered'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert ({"delivered": 250}, 250) == (states, history)
