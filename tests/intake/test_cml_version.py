"""A CommerceML package's version (contract 9a, "Versions"; contract 1, the newer version wins):
each package's number is above every package before it and above every version already known
of the aggregates it touches, whether that version waits untaken in staging (the JSON intake or
1C's own rows), is a message, or was a message that has been delivered and pruned since; with
staging in the service's database or in one of its own. And finding that number does not read
the whole ``messages`` table: the newest package keeps a mark (``cml_packages.messages_mark``)
and the next one reads only the messages above it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, event, func, insert, select, text, update

from exchange.db.channels import register
from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    channels,
    cml_packages,
    messages,
    staging,
)
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.intake.commerceml.publish import _next_version, import_file
from exchange.intake.stage import stage
from exchange.intake.staging_table import take
from exchange.settings import load_settings
from tests.support.follow import set_delivery

RETAIL = CmlType("t-retail", "Розничная", "руб")
KINDS = load_settings(database_url="sqlite://").kinds


@dataclass(frozen=True)
class Configured:
    """A channel as the registry reads it from the configuration."""

    name: str
    target: str
    takes: tuple[str, ...]


class World:
    """The service's database and where packages are staged (the same one, or its own)."""

    def __init__(self, main: Engine, staged_in: Engine | None, folder: Path) -> None:
        self.main, self.staged_in, self.folder = main, staged_in, folder
        self.count = 0

    @property
    def staging(self) -> Engine:
        return self.staged_in if self.staged_in is not None else self.main

    def package(self, *skus: str) -> int:
        """Import a package with a price for each SKU; its version."""
        self.count += 1
        data = offers_xml(
            Package(
                types=[RETAIL],
                offers=[CmlOffer(s, [CmlPrice("t-retail", f"{self.count}.00")]) for s in skus],
                generated_at=f"2026-12-01T10:00:{self.count:02d}",
            )
        )
        path = self.folder / f"offers{self.count}.xml"
        path.write_bytes(data)
        outcome = import_file(
            self.main,
            path,
            name=path.name,
            price_types={"Розничная": "retail"},
            sku_mode="id",
            staging_engine=self.staged_in,
        )
        assert outcome.outcome == "staged", outcome
        assert outcome.version is not None
        with transaction(self.staging, read_only=True) as connection:
            versions = set(
                connection.execute(
                    select(staging.c.aggregate_version).where(
                        staging.c.source_ref.like(f"%{path.name}%")
                    )
                ).scalars()
            )
        assert versions == {outcome.version}
        return outcome.version

    def intent(self, aggregate: str, version: int) -> None:
        """A row staged as the JSON intake (and 1C's own INSERT) stages it, untaken."""
        sku = aggregate.split("/")[0]
        payload = {"sku": sku, "price": "9.00", "currency": "RUB", "price_type": "retail"}
        with transaction(self.staging) as connection:
            stage(
                connection,
                [
                    {
                        "kind": "price",
                        "aggregate": aggregate,
                        "aggregate_version": version,
                        "payload": json.dumps(payload),
                        "schema_version": "1",
                        "source_ref": "JSON intake",
                    }
                ],
            )

    def take(self) -> None:
        """The workers' intake: every untaken row becomes a message."""
        take(self.main, self.staged_in, KINDS, datetime.now(UTC))
        with transaction(self.staging, read_only=True) as connection:
            assert (
                0
                == connection.execute(
                    select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
                ).scalar()
            )


def _sqlite(path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    return engine


@pytest.fixture(params=["same", "separate"])
def world(request: pytest.FixtureRequest, engine: Engine, tmp_path: Path) -> Iterator[World]:
    """Once per database (SQLite, PostgreSQL) with staging in it, and once with staging in a
    database of its own of the same kind."""
    staged_in: Engine | None = None
    if request.param == "separate":
        staged_in = (
            make_engine(str(request.getfixturevalue("other_pg_url")))
            if is_postgres(engine)
            else _sqlite(tmp_path / "staging.db")
        )
    yield World(engine, staged_in, tmp_path)
    if staged_in is not None:
        staged_in.dispose()


@pytest.fixture(params=["same", "separate"])
def pg_world(request: pytest.FixtureRequest, pg_url: str, tmp_path: Path) -> Iterator[World]:
    """PostgreSQL only (SQLite has one writer: no transaction commits behind another's id),
    with staging in it and in a database of its own."""
    main = make_engine(pg_url)
    staged_in = (
        make_engine(str(request.getfixturevalue("other_pg_url")))
        if request.param == "separate"
        else None
    )
    yield World(main, staged_in, tmp_path)
    if staged_in is not None:
        staged_in.dispose()
    main.dispose()


def _latest_version(connection: Any) -> int:
    return int(connection.execute(select(func.max(messages.c.version))).scalar() or 0)


def test_a_package_is_above_every_version_known_for_its_aggregates(world: World) -> None:
    first = world.package("A", "B")  # no mark before it: the queue read whole

    world.intent("A/retail", first + 500)  # the JSON intake, before the package, untaken
    second = world.package("A")
    assert second > first + 500

    world.take()  # now a message, above the second package's mark
    world.intent("B/retail", second + 300)
    world.take()
    third = world.package("B")
    assert third > second + 300

    world.intent("A/retail", third + 700)
    world.take()
    # Delivered long ago, then pruned by a release before prune kept a price's latest message
    # (contract 13): the version lives on only in the cursor, in a database pruned back then.
    with transaction(world.main) as connection:
        done_on_every_channel(connection, "A/retail", third + 700)
        assert connection.execute(delete(messages)).rowcount
    with transaction(world.main, read_only=True) as connection:
        assert _latest_version(connection) < third + 700  # its version lives on in the cursor
    fourth = world.package("A")
    assert fourth > third + 700

    world.intent("B/retail", fourth + 50)  # untaken, and a message above the mark as well
    world.intent("A/retail", fourth + 90)
    world.take()
    world.intent("B/retail", fourth + 60)
    assert world.package("A", "B") > fourth + 90


def done_on_every_channel(connection: Any, aggregate: str, version: int, *, on: Any = None) -> None:
    """The aggregate's cursor at ``version`` on every channel (``on``: that channel's only)."""
    found = select(aggregates.c.id).where(aggregates.c.aggregate == aggregate).scalar_subquery()
    chosen = update(channel_aggregates).where(channel_aggregates.c.aggregate_id == found)
    if on is not None:
        chosen = chosen.where(channel_aggregates.c.channel_id == on)
    assert connection.execute(chosen.values(done_version=version)).rowcount


def test_a_package_is_above_a_version_delivered_on_the_second_channel_only(
    world: World,
) -> None:
    """Contract 13: each channel has its own cursor; a price delivered and pruned while the
    second shop was ahead of the first lives on in the second shop's cursor only."""
    register(world.main, [Configured("shop", "api", ("price",))], datetime.now(UTC))
    first = world.package("A")
    world.intent("A/retail", first + 800)
    world.take()
    with transaction(world.main) as connection:
        shop = connection.execute(select(channels.c.id).where(channels.c.name == "shop")).scalar()
        done_on_every_channel(connection, "A/retail", first + 800, on=shop)
        assert connection.execute(delete(messages)).rowcount
    assert world.package("A") > first + 800


def test_a_mark_from_another_service_database_is_not_trusted(world: World) -> None:
    """The service's database replaced or restored (its ids back below the mark kept with
    the packages): the next package reads the queue whole instead of skipping it."""
    first = world.package("A")
    with transaction(world.staging) as connection:
        connection.execute(update(cml_packages).values(messages_mark=10**12))
    world.intent("A/retail", first + 400)
    world.take()
    assert world.package("A") > first + 400


def test_the_first_package_after_the_upgrade_reads_the_queue_whole(world: World) -> None:
    """Packages staged before the mark existed keep NULL: every message counts."""
    world.intent("A/retail", 900)
    world.take()
    with transaction(world.main) as connection:  # a message that came before any package
        set_delivery(
            connection, state="delivered", updated_at=datetime.now(UTC) - timedelta(days=30)
        )
    with transaction(world.staging) as connection:
        connection.execute(
            insert(cml_packages).values(
                digest="0" * 64,
                version=3,
                source_ref="before the upgrade",
                intents=1,
                staged_at=datetime.now(UTC),
                messages_mark=None,
            )
        )
    assert world.package("A") > 900


def _messages(engine: Engine, count: int, *, start_version: int = 1) -> None:
    """``count`` price messages of 100 aggregates, inserted by one statement."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with transaction(engine) as connection:
        first = int(connection.execute(select(func.count()).select_from(messages)).scalar() or 0)
        series = (
            f"SELECT generate_series({first + 1}, {first + count}) AS n"
            if is_postgres(connection)
            else "WITH RECURSIVE s(n) AS (SELECT :first + 1 UNION ALL SELECT n + 1 FROM s "
            "WHERE n < :last) SELECT n FROM s"
        )
        connection.execute(
            text(
                "INSERT INTO messages (message_id, rejected, kind, aggregate, version, "
                "schema_version, payload, created_at, taken_at, updated_at) "
                "SELECT 'm-' || n, false, 'price', 'S' || (n % 100) || '/retail', "
                ":v + n, '1', '{}', :now, :now, :now "
                f"FROM ({series}) AS s"
            ),
            {"first": first, "last": first + count, "v": start_version, "now": now},
        )
        if is_postgres(connection):
            connection.execute(text("ANALYZE messages"))


class Reads:
    """How much of ``messages`` a statement sequence read: PostgreSQL's own counters of this
    backend not yet flushed (``pg_stat_xact_user_tables``: tuples read by sequential scans and
    fetched through indexes, counted from here); on SQLite the virtual machine's steps,
    counted by a progress handler."""

    before = 0

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.steps = 0
        if is_postgres(connection):
            self.before = self._tuples()
        else:
            raw = connection.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_progress_handler(self._step, 1)

    def _step(self) -> int:
        self.steps += 1
        return 0

    def _tuples(self) -> int:
        row = self.connection.execute(
            text(
                "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                "FROM pg_stat_xact_user_tables WHERE relname = 'messages'"
            )
        ).scalar()
        return int(row or 0)

    def of_messages(self) -> int:
        if is_postgres(self.connection):
            return self._tuples() - self.before
        raw = self.connection.connection.driver_connection
        raw.set_progress_handler(None, 1)
        return self.steps


def test_the_version_lookup_reads_the_messages_above_the_mark_not_the_whole_table(
    engine: Engine, tmp_path: Path
) -> None:
    world = World(engine, None, tmp_path)
    history = 20_000
    _messages(engine, history)
    first = world.package("A")  # the whole queue read, once: the mark is set
    assert first > history
    _messages(engine, 10, start_version=first + 1000)
    with transaction(engine) as connection:
        reads = Reads(connection)
        version, mark = _next_version(connection, None)
        read = reads.of_messages()
        assert mark == connection.execute(select(func.max(messages.c.id))).scalar()
    assert version > first + 1000 + history
    # A full read of messages costs at least one tuple (PostgreSQL) or one step (SQLite) per
    # message: the lookup stays far below the history's size.
    assert read < history // 10, read


def test_a_package_staged_keeps_the_mark_its_lookup_covered(engine: Engine, tmp_path: Path) -> None:
    world = World(engine, None, tmp_path)
    _messages(engine, 50)
    world.package("A")
    with transaction(engine) as connection:
        top = connection.execute(select(func.max(messages.c.id))).scalar()
        assert [top] == list(connection.execute(select(cml_packages.c.messages_mark)).scalars())
        connection.execute(delete(cml_packages))


def _message(connection: Any, aggregate: str, version: int, key: str) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    connection.execute(
        text(
            "INSERT INTO messages (message_id, rejected, kind, aggregate, version, "
            "schema_version, payload, created_at, taken_at, updated_at) VALUES (:key, false, "
            "'price', :aggregate, :version, '1', '{}', :now, :now, :now)"
        ),
        {"key": key, "aggregate": aggregate, "version": version, "now": now},
    )


def test_a_message_that_commits_after_a_higher_id_is_not_skipped_by_the_mark(
    pg_world: World,
) -> None:
    """PostgreSQL: an intake transaction holds a message id below one that another transaction
    has committed, and commits only after a package took its mark. Right after the package's
    read of the untaken staging rows, a row arrives and is taken that way: the next package
    is still above it (the mark is read before the staging rows, so it cannot cover that id)."""
    world = pg_world
    high = 10**9
    world.package("A")
    x = world.main.connect()
    x.begin()
    fired: list[bool] = []

    def arrive(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if fired or "taken_at IS NULL" not in statement or "aggregate_version" not in statement:
            return
        fired.append(True)
        world.intent("A/retail", high)  # committed now
        with transaction(world.staging, read_only=True) as staged_in:
            row = staged_in.execute(
                select(staging.c.id).where(staging.c.aggregate_version == high)
            ).scalar_one()
        _message(x, "A/retail", high, "x")  # the intake's id, not committed yet
        if world.staged_in is None:
            x.execute(update(staging).where(staging.c.id == row).values(taken_at=func.now()))
        with transaction(world.main) as y:  # a higher id, committed first
            _message(y, "B/retail", 1, "y")

    listened = world.staging
    event.listen(listened, "after_cursor_execute", arrive)
    try:
        world.package("A")  # concurrent with that row: it need not be above it
    finally:
        event.remove(listened, "after_cursor_execute", arrive)
    assert fired
    x.commit()
    x.close()
    if world.staged_in is not None:  # marked taken after the service's commit
        with transaction(world.staged_in) as connection:
            connection.execute(
                update(staging)
                .where(staging.c.aggregate_version == high)
                .values(taken_at=datetime.now(UTC))
            )
    assert world.package("A") > high


def test_a_message_that_commits_between_the_mark_and_the_staging_read_is_counted(
    pg_world: World,
) -> None:
    """PostgreSQL: an intake transaction has taken a staging row and holds a message id below
    one already committed; it commits right after the package reads its mark, so the row is
    taken when the staging rows are read. The messages above the old mark are read after the
    staging rows, in a snapshot of their own: the message is seen, and the next package is
    above it too."""
    world = pg_world
    high = 10**9
    world.package("A")
    world.intent("A/retail", high)
    with transaction(world.staging, read_only=True) as staged_in:
        row = staged_in.execute(
            select(staging.c.id).where(staging.c.aggregate_version == high)
        ).scalar_one()
    x = world.main.connect()
    x.begin()
    _message(x, "A/retail", high, "x")
    if world.staged_in is None:
        x.execute(update(staging).where(staging.c.id == row).values(taken_at=func.now()))
    with transaction(world.main) as y:
        _message(y, "B/retail", 1, "y")
    fired: list[bool] = []

    def commit(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if fired or "max(messages.id)" not in statement:
            return
        fired.append(True)
        x.commit()
        x.close()
        if world.staged_in is not None:  # marked taken after the service's commit
            with transaction(world.staged_in) as connection:
                connection.execute(
                    update(staging).where(staging.c.id == row).values(taken_at=func.now())
                )

    event.listen(world.main, "after_cursor_execute", commit)
    try:
        assert world.package("A") > high
    finally:
        event.remove(world.main, "after_cursor_execute", commit)
    assert fired
    assert world.package("A") > high
