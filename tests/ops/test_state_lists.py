"""The lists by state (issue 34 item 6): waiting, delayed, in flight, delivered and cancelled
messages, a page at a time, with the quarantine list's filters and search (one ``page_of``, one
``_where``), counted no further than a bound, and each page a walk of an index on both
databases however many messages the state holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from exchange.db.engine import is_postgres, transaction
from exchange.db.on_channels import channel_ids
from exchange.db.schema import messages
from exchange.dev.testing import posting_row, price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.states import State
from exchange.errors import OperatorError
from exchange.intake.staging_table import take
from exchange.ops.quarantine import Filters, Page, page_of, page_query
from tests.support.follow import set_delivery

THE_CHANNEL = "(SELECT min(id) FROM channels WHERE dropped_at IS NULL)"

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _put(engine: Engine, aggregate: str, state: State, **values: object) -> None:
    with transaction(engine) as connection:
        set_delivery(connection, messages.c.aggregate == aggregate, state=state.value, **values)


def _staged(engine: Engine) -> None:
    stage(
        engine,
        [
            price_row("SKU-1", 1, "1234.50", aggregate="SKU-1/retail", name="Кофе молотый"),
            price_row("SKU-2", 1, "99.00", aggregate="SKU-2/retail", name="Чай чёрный"),
            price_row("SKU-3", 1, "10.00", aggregate="SKU-3/retail", name="Кофе в зёрнах"),
            price_row("SKU-4", 1, aggregate="SKU-4/retail"),
            posting_row("DOC-1", 1),
        ],
    )
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    _put(
        engine,
        "SKU-1/retail",
        State.DELAYED,
        next_try_at=NOW + timedelta(seconds=40),
        reason="http-503",
        updated_at=NOW - timedelta(minutes=3),
    )
    _put(
        engine,
        "SKU-3/retail",
        State.DELAYED,
        next_try_at=NOW + timedelta(seconds=10),
        reason="timeout",
        updated_at=NOW - timedelta(minutes=1),
    )
    _put(engine, "SKU-2/retail", State.DELIVERED, updated_at=NOW - timedelta(minutes=2))
    _put(
        engine,
        "SKU-4/retail",
        State.IN_PROGRESS,
        locked_by="worker-a",
        locked_until=NOW + timedelta(seconds=30),
        updated_at=NOW,
    )


def _page(engine: Engine, state: State, filters: Filters | None = None, **options: Any) -> Page:
    with transaction(engine, read_only=True) as connection:
        return page_of(connection, filters or Filters(), state=state, **options)


def _aggregates(page: Page) -> list[str]:
    return [e["aggregate"] for e in page.entries]


def test_each_state_lists_its_messages_with_the_quarantines_filters_and_search(
    engine: Engine,
) -> None:
    _staged(engine)
    delayed = _page(engine, State.DELAYED, sort="next_try")
    # the soonest to go again first; each says its price, when it goes again, since when
    assert _aggregates(delayed) == ["SKU-3/retail", "SKU-1/retail"]
    first = delayed.entries[1]
    assert (first["price"], first["currency"], first["name"]) == ("1234.50", "RUB", "Кофе молотый")
    assert first["next_try_at"] == (NOW + timedelta(seconds=40)).isoformat()
    assert first["in_state_since"] == (NOW - timedelta(minutes=3)).isoformat()
    assert first["state"] == "delayed"
    # the quarantine's filters, every one: search (a name's word), reason, kind, aggregate
    assert _aggregates(_page(engine, State.DELAYED, Filters(search="кофе"))) == [
        "SKU-1/retail",
        "SKU-3/retail",
    ]
    assert _aggregates(_page(engine, State.DELAYED, Filters(reason="timeout"))) == ["SKU-3/retail"]
    assert _aggregates(_page(engine, State.DELAYED, Filters(aggregate="sku-1"))) == ["SKU-1/retail"]
    assert _aggregates(_page(engine, State.NEW, Filters(kind="financial_posting"))) == ["DOC-1"]
    assert _aggregates(_page(engine, State.DELIVERED)) == ["SKU-2/retail"]
    (flying,) = _page(engine, State.IN_PROGRESS).entries
    assert (flying["aggregate"], flying["locked_by"]) == ("SKU-4/retail", "worker-a")
    since = _page(engine, State.DELAYED, Filters(since=NOW - timedelta(minutes=2)))
    assert _aggregates(since) == ["SKU-3/retail"]  # in its state since the filter's time
    # what is in another state is in none of these
    assert _page(engine, State.QUARANTINED).entries == []


def test_a_list_by_state_refuses_an_order_its_index_cannot_walk(engine: Engine) -> None:
    _staged(engine)
    with pytest.raises(OperatorError, match="unknown sort 'attempts'"):
        _page(engine, State.DELIVERED, sort="attempts")


def test_a_list_by_state_counts_only_up_to_its_bound_and_says_there_are_more(
    engine: Engine,
) -> None:
    stage(engine, [price_row(f"SKU-{i}", 1, aggregate=f"SKU-{i}/retail") for i in range(7)])
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    bounded = _page(engine, State.NEW, count_limit=5, limit=2, offset=2)
    assert (bounded.total, bounded.more, len(bounded.entries)) == (5, True, 2)
    exact = _page(engine, State.NEW, count_limit=7)
    assert (exact.total, exact.more) == (7, False)
    assert _page(engine, State.NEW).total == 7  # no bound: the exact count


MANY = 30_000


def _many_delivered(connection: Connection) -> None:
    """``MANY`` delivered messages and a few waiting, written by one statement."""
    if is_postgres(connection):
        numbers = "generate_series(1, :many) AS n(i)"
        at = "TIMESTAMP '2026-12-01 00:00:00' + i * INTERVAL '1 second'"
    else:
        numbers = (
            "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :many) "
            "SELECT i FROM n)"
        )
        at = "datetime('2026-12-01 00:00:00', '+' || i || ' seconds')"
    state = "CASE WHEN i % 1000 = 0 THEN 'new' ELSE 'delivered' END"
    # One aggregate holds them all, a version each: a delivery needs its aggregate.
    connection.execute(
        text("INSERT INTO aggregates (id, kind, aggregate) VALUES (1, 'price', 'SKU/retail')")
    )
    connection.execute(
        text(
            "INSERT INTO messages (message_id, kind, aggregate, aggregate_id, version, "
            "schema_version, payload, created_at, taken_at, updated_at) "
            f"SELECT 'm-' || i, 'price', 'SKU-' || i || '/retail', 1, i, '1', '{{}}', {at}, "
            f"{at}, {at} FROM {numbers}"
        ),
        {"many": MANY},
    )
    # Their deliveries on the one channel, and the aggregate's cursor there.
    state = state.replace("i % 1000", "version % 1000")
    connection.execute(
        text(
            "INSERT INTO deliveries (message_pk, channel_id, aggregate_id, kind, version, state, "
            f"waiting_since, updated_at) SELECT id, {THE_CHANNEL}, aggregate_id, kind, version, "
            f"{state}, created_at, created_at FROM messages"
        )
    )
    connection.execute(
        text(f"INSERT INTO channel_aggregates (aggregate_id, channel_id) VALUES (1, {THE_CHANNEL})")
    )
    connection.execute(text("ANALYZE"))


@pytest.mark.parametrize("analyzed_engine", ["sqlite", "postgresql"], indirect=True)
def test_a_page_of_a_large_state_walks_the_state_index_without_sorting_it(
    analyzed_engine: Engine,
) -> None:
    """30,000 messages, most delivered: the latest page of the delivered, and a page deep in
    it, read the one channel's ``ix_deliveries_channel_id_state_updated_at_message_pk`` in
    order (no sort of the state's deliveries) on both databases; the bounded count reads no
    further than its bound."""
    engine = analyzed_engine
    with transaction(engine) as connection:
        _many_delivered(connection)
    with transaction(engine, read_only=True) as connection:
        postgres = is_postgres(connection)
        page = page_of(
            connection,
            Filters(),
            state=State.DELIVERED,
            descending=True,
            offset=100,
            limit=100,
            count_limit=10_000,
        )
        assert (page.total, page.more) == (10_000, True)
        assert page.entries[0]["message_id"] == f"m-{MANY - 101}"  # m-30000 is new
        ids = channel_ids(connection)
        query = page_query(Filters(), postgres, State.DELIVERED, "since", True, 9_900, 100, ids)
        sql = str(query.compile(connection, compile_kwargs={"literal_binds": True}))
        explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
        plan = " ".join(str(r) for r in connection.execute(text(explain + sql)))
    assert "ix_deliveries_channel_id_state_updated_at_message_pk" in plan, plan
    assert "Sort" not in plan and "TEMP B-TREE" not in plan, plan
