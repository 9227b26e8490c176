"""One aggregate is one price (contract 1; issue 12, item 1).

The first version of a ``price`` aggregate the service accepts fixes its sku and price_type
(kept on the aggregate row, past prune); a later row naming others is quarantined
``invalid-contract`` with a message that says how to name the aggregate. Two rows of one version
whose prices are equal as decimals are a duplicate, not a version conflict. Intake's bulk path,
on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from optools import DELIVERED, settle
from sqlalchemy import Engine, RowMapping, column, select, table

from exchange.db.engine import transaction
from exchange.db.schema import aggregates, history
from exchange.dev.testing import fast_settings, one_channel_messages, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.states import Event
from exchange.intake import staging_table as intake
from exchange.ops import prune
from exchange.queue import coalesce, lease
from exchange.settings import Settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url)


def price(
    aggregate: str, version: int, amount: Any, price_type: str | None = "retail", sku: str = ""
) -> dict[str, Any]:
    payload: dict[str, Any] = {"sku": sku or aggregate.split("/")[0], "price": amount}
    if price_type is not None:
        payload["price_type"] = price_type
    text = json.dumps(payload)
    if not isinstance(amount, str):  # a JSON number with its digits as written
        text = text.replace(json.dumps(amount), str(amount))
    return raw_row("price", aggregate, version, text)


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[Any], **kw: Any) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now(), **kw)
    with transaction(engine) as c:
        coalesce.coalesce(c, settings.policies, clock.now())


def outcomes(engine: Engine) -> dict[int, tuple[str, str, str | None]]:
    """staging id -> (message or quarantine record, state, reason); duplicates as 'duplicate'."""
    with transaction(engine, read_only=True) as c:
        found = {
            m["staging_id"]: ("record" if m["rejected"] else "message", m["state"], m["reason"])
            for m in c.execute(select(messages)).mappings()
        }
        for detail in c.execute(
            select(history.c.detail).where(history.c.event == Event.DUPLICATE.value)
        ).scalars():
            found[int(detail.split("#", 1)[1].split()[0])] = ("duplicate", "", None)
    return found


def record_of(engine: Engine, staging_id: int) -> RowMapping:
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(select(messages).where(messages.c.staging_id == staging_id)).mappings().one()
        )


def pin(engine: Engine, aggregate: str) -> tuple[str | None, str | None]:
    with transaction(engine, read_only=True) as c:
        row = c.execute(
            select(aggregates.c.sku, aggregates.c.price_type).where(
                aggregates.c.aggregate == aggregate
            )
        ).one()
    return (row.sku, row.price_type)


MESSAGE = ("message", "new", None)
INVALID = ("record", "quarantined", "invalid-contract")
DUPLICATE = ("duplicate", "", None)


def test_a_second_price_type_under_one_aggregate_is_quarantined_saying_how_to_name_it(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # The case: retail v1, wholesale v2 under aggregate SKU-17. The wholesale price
    # used to supersede the retail one; it is refused now, so the retail price goes out.
    take(engine, settings, clock, [price("SKU-17", 1, "100.00")])
    take(engine, settings, clock, [price("SKU-17", 2, "80.00", "wholesale")])

    assert {1: MESSAGE, 2: INVALID} == outcomes(engine)
    detail = record_of(engine, 2)["last_error"]
    for words in ("price_type 'wholesale'", "'retail'", "'SKU-17/wholesale'", "<sku>/<price_type>"):
        assert words in detail, detail
    assert ("SKU-17", "retail") == pin(engine, "SKU-17")


def test_several_versions_of_a_new_aggregate_in_one_chunk_are_fixed_by_the_first_row(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    rows = [
        price("SKU-1", 1, "10.00", "retail"),
        price("SKU-1", 2, "8.00", "wholesale"),
        price("SKU-1", 3, "11.00", None),  # retail by default
        price("SKU-2", 1, "5.00", "wholesale"),
        price("SKU-2", 2, "6.00", "retail"),
    ]
    take(engine, settings, clock, rows)

    assert {1: ("message", "cancelled", "superseded"), 2: INVALID, 3: MESSAGE} | {
        4: MESSAGE,
        5: INVALID,
    } == outcomes(engine)
    assert [("SKU-1", "retail"), ("SKU-2", "wholesale")] == [
        pin(engine, "SKU-1"),
        pin(engine, "SKU-2"),
    ]


def test_a_row_naming_another_sku_under_the_convention_is_refused(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # The aggregate names SKU-17 in wholesale; a payload of retail (or of SKU-18) is not it.
    take(
        engine,
        settings,
        clock,
        [price("SKU-17/wholesale", 1, "80.00", "retail"), price("SKU-18/retail", 1, "1", sku="X")],
    )
    assert {1: INVALID, 2: INVALID} == outcomes(engine)
    assert "'SKU-17/retail'" in record_of(engine, 1)["last_error"]


def test_each_price_type_named_sku_slash_price_type_is_delivered_on_its_own(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    rows = [
        price("SKU-17/retail", 1, "100.00", "retail"),
        price("SKU-17/wholesale", 1, "80.00", "wholesale"),
        price("SKU-17/retail", 2, "101.00", "retail"),
    ]
    take(engine, settings, clock, rows)
    assert {1: ("message", "cancelled", "superseded"), 2: MESSAGE, 3: MESSAGE} == outcomes(engine)
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=10,
            lease_seconds=30,
            max_attempts=3,
            kinds=settings.policies,
        )
    assert [("SKU-17/retail", 2), ("SKU-17/wholesale", 1)] == sorted(
        (m.aggregate, m.version) for m in batch.messages
    )


def test_the_identity_of_an_aggregate_survives_prune(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """The first accepted version fixes the identity; prune removes it once a newer version
    was delivered (a price keeps only its latest messages, contract 13); the identity stays."""
    for version, amount in ((1, "10.00"), (2, "11.00")):
        take(engine, settings, clock, [price("SKU-1", version, amount)])
        settle(engine, settings, clock, {"SKU-1": DELIVERED})
    clock.advance(timedelta(days=40).total_seconds())
    report = prune.prune(engine, None, now=clock.now(), retention_days=30, kinds=settings.policies)
    assert report.messages == 1
    take(engine, settings, clock, [price("SKU-1", 3, "9.00", "wholesale")])

    assert {2: ("message", "delivered", None), 3: INVALID} == outcomes(engine)
    assert ("SKU-1", "retail") == pin(engine, "SKU-1")


@pytest.mark.parametrize(
    ("first", "again", "expected"),
    [
        ("840.0", "840.00", DUPLICATE),
        (840, "840.00", DUPLICATE),
        ("840.00", 840.0, DUPLICATE),
        ("840.00", "840.01", ("record", "quarantined", "version-conflict")),
    ],
)
@pytest.mark.parametrize("one_chunk", [True, False])
def test_prices_equal_as_decimals_in_one_version_are_a_duplicate_not_a_conflict(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    first: Any,
    again: Any,
    expected: tuple[str, str, str | None],
    one_chunk: bool,
) -> None:
    rows = [price("SKU-1", 1, first), price("SKU-1", 1, again)]
    if one_chunk:
        take(engine, settings, clock, rows)
    else:
        take(engine, settings, clock, rows[:1])
        take(engine, settings, clock, rows[1:])
    assert {1: MESSAGE, 2: expected} == outcomes(engine)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    url: str = request.getfixturevalue("empty_pg_url")
    return url


def test_migration_0003_fixes_existing_price_aggregates_from_their_earliest_message(
    empty_url: str, clock: FakeClock
) -> None:
    from exchange.db.engine import make_engine
    from exchange.db.migrate import upgrade

    engine = make_engine(empty_url)
    upgrade(engine, "0002")
    settings = fast_settings(empty_url)
    # The tables as revision 0002 has them: the models' own would write the columns of later
    # revisions (their defaults, the search keys of 0017).
    old_aggregates = table("aggregates", column("id"), column("kind"), column("aggregate"))
    old_messages = table(
        "messages",
        *(
            column(name)
            for name in [
                "message_id",
                "aggregate_id",
                "kind",
                "aggregate",
                "version",
                "schema_version",
                "payload",
                "created_at",
                "taken_at",
                "state",
                "waiting_since",
                "updated_at",
            ]
        ),
    )
    with transaction(engine) as c:
        first = c.execute(
            old_aggregates.insert()
            .values(kind="price", aggregate="SKU-1")
            .returning(old_aggregates.c.id)
        ).scalar_one()
        c.execute(old_aggregates.insert().values(kind="price", aggregate="SKU-2"))  # all pruned
        c.execute(old_aggregates.insert().values(kind="financial_posting", aggregate="D-1"))
        for pk, version, price_type in ((1, 1, "retail"), (2, 2, "wholesale")):  # v1 first
            payload = {"currency": "RUB", "price": "1", "price_type": price_type, "sku": "SKU-1"}
            c.execute(
                old_messages.insert().values(
                    message_id=f"m{pk}",
                    aggregate_id=first,
                    kind="price",
                    aggregate="SKU-1",
                    version=version,
                    schema_version="1",
                    payload=json.dumps(payload),
                    created_at=clock.now().replace(tzinfo=None),
                    taken_at=clock.now().replace(tzinfo=None),
                    state="new",
                    waiting_since=clock.now().replace(tzinfo=None),
                    updated_at=clock.now().replace(tzinfo=None),
                )
            )
    upgrade(engine)
    try:
        assert [("SKU-1", "retail"), (None, None), (None, None)] == [
            pin(engine, name) for name in ("SKU-1", "SKU-2", "D-1")
        ]
        take(engine, settings, clock, [price("SKU-2", 5, "3.00", "wholesale")])
        take(engine, settings, clock, [price("SKU-2", 6, "3.00", "retail")])
        assert ("SKU-2", "wholesale") == pin(engine, "SKU-2")
        assert INVALID == outcomes(engine)[2]
    finally:
        engine.dispose()


def test_two_workers_taking_versions_of_one_new_aggregate_at_once_agree_on_its_identity(
    pg_url: str, clock: FakeClock
) -> None:
    """PostgreSQL, two intakes at once (rows shared out by SKIP LOCKED): the first creates the
    aggregate with retail and has not committed; the second, with a wholesale version, waits
    on that insert, then reads the identity the first one fixed and refuses its row."""
    import threading

    from exchange.db.engine import make_engine
    from exchange.intake.contracts import StagingRow, validate

    engine = make_engine(pg_url)
    kinds = fast_settings(pg_url).kinds

    def row(staging_id: int, version: int, price_type: str) -> Any:
        data = price("SKU-9", version, "1.00", price_type)
        return validate(
            StagingRow(
                staging_id, "price", "SKU-9", version, data["payload"], "1", None, clock.now()
            ),
            kinds,
        )

    first_stored, reports = threading.Event(), {}

    def second() -> None:
        first_stored.wait(10)
        with transaction(engine) as c:
            reports["second"] = intake._store(c, [row(2, 2, "wholesale")], clock.now(), range(1))

    other = threading.Thread(target=second)
    other.start()
    try:
        with transaction(engine) as c:
            reports["first"] = intake._store(c, [row(1, 1, "retail")], clock.now(), range(1))
            first_stored.set()
            other.join(0.5)
            assert other.is_alive(), "the second intake did not wait for the first's aggregate"
    finally:
        other.join(10)
    try:
        assert (1, 0, 0, 1) == (
            reports["first"].messages,
            reports["first"].rejected,
            reports["second"].messages,
            reports["second"].rejected,
        )
        assert ("SKU-9", "retail") == pin(engine, "SKU-9")
    finally:
        engine.dispose()
