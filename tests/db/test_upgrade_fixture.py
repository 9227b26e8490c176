"""Upgrading keeps everything (issue 31, item 4): the database the one-target service left
(tests/db/upgrade_fixture/: made by make_fixture.py with main's code at migration 0023, just
before the channels schema change) migrates to head with every message, its state, lease,
attempts and history, every aggregate's delivered version and lease, the workers' rows and
their pace, the operator's pause and the 1C packages just as the manifest lists them, on SQLite
(the file copied) and PostgreSQL (the plain dump run into an empty database).

Migration 0024 (channels) makes it the test of the upgrade: the same rows also come back as the
deliveries and cursors of the one channel, named after ``EXCHANGE_TARGET`` (``api`` unset).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, select, update
from upgrade_data import _text, differences, load_pg_dump, snapshot, without_record_copies

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import current_revision, head_revision, upgrade
from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
)

FIXTURE = Path(__file__).resolve().parent / "upgrade_fixture"
MANIFEST: dict[str, Any] = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))


def loaded(dialect: str, request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """A fresh database holding the fixture of ``dialect``, not yet migrated."""
    if dialect == "sqlite":
        path = tmp_path / "pre_channels.sqlite3"
        shutil.copyfile(FIXTURE / "pre_channels.sqlite3", path)
        return make_engine(f"sqlite:///{path}")
    url: str = request.getfixturevalue("empty_pg_url")
    load_pg_dump(
        url.replace("postgresql+psycopg://", "postgresql://", 1), FIXTURE / "pre_channels.pg.sql"
    )
    return make_engine(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    engine = loaded(request.param, request, tmp_path)
    try:
        assert current_revision(engine) == MANIFEST["made_with"]["alembic_revision"][request.param]
        upgrade(engine)
        yield request.param, engine
    finally:
        engine.dispose()


def test_migrating_the_one_target_database_keeps_every_message_state_lease_and_history_row(
    migrated: tuple[str, Engine],
) -> None:
    dialect, engine = migrated
    assert current_revision(engine) == head_revision(engine)
    assert differences(without_record_copies(MANIFEST[dialect]), snapshot(engine)) == []


def test_the_check_notices_a_lost_history_row_and_a_changed_state(
    migrated: tuple[str, Engine],
) -> None:
    """The comparison above can fail: a migration that dropped a history row or released a
    quarantined message is named, line by line."""
    dialect, engine = migrated
    quarantined = next(
        mid for mid, row in MANIFEST[dialect]["messages"].items() if row["reason"] == "http-404"
    )
    with transaction(engine) as connection:
        pk = connection.execute(
            messages.select()
            .with_only_columns(messages.c.id)
            .where(messages.c.message_id == quarantined)
        ).scalar_one()
        connection.execute(
            update(deliveries).where(deliveries.c.message_pk == pk).values(state="new")
        )
        connection.execute(
            delete(history).where(history.c.message_pk == pk, history.c.event == "quarantined")
        )
    found = differences(without_record_copies(MANIFEST[dialect]), snapshot(engine))
    assert f"/messages/{quarantined}/state: 'quarantined' became 'new'" in found
    assert any(line.startswith(f"/messages/{quarantined}/history") for line in found), found


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_fixture_holds_every_state_the_upgrade_must_keep(dialect: str) -> None:
    """What the fixture must hold to be worth migrating (issue 31, item 4)."""
    rows = MANIFEST[dialect]["messages"].values()

    def one(aggregate: str, version: int) -> dict[str, Any]:
        (row,) = [r for r in rows if r["aggregate"] == aggregate and r["version"] == version]
        return dict(row)

    live = one("LEASE-1", 1)  # a live lease: in flight, held far beyond any test's run
    assert live["state"] == "in_progress" and live["lease_token"]
    assert datetime.fromisoformat(live["locked_until"]) > datetime.now(UTC)
    assert one("BUSY-1", 1)["state"] == "delayed" and one("BUSY-1", 1)["next_try_at"]
    assert (one("GONE-1", 1)["state"], one("GONE-1", 1)["reason"]) == ("quarantined", "http-404")
    assert any(r["rejected"] and r["state"] == "quarantined" for r in rows)  # intake's record
    # Held: DOC-Q v3 waits behind v2, quarantined because v1 never came.
    assert (one("DOC-Q", 2)["state"], one("DOC-Q", 2)["reason"]) == ("quarantined", "sequence-gap")
    assert one("DOC-Q", 3)["state"] == "new"
    # An open gap: DOC-GAP v1 delivered, v2 missing, v3 waiting.
    assert one("DOC-GAP", 1)["state"] == "delivered" and one("DOC-GAP", 3)["state"] == "new"
    assert not [r for r in rows if r["aggregate"] == "DOC-GAP" and r["version"] == 2]
    cancelled = {r["reason"] for r in rows if r["state"] == "cancelled"}
    assert {"operator", "superseded", "stale"} <= cancelled
    assert [h["event"] for h in one("GONE-3", 1)["history"]][-1] == "operator-retry"
    snap = MANIFEST[dialect]
    assert {w["stopped_at"] is None for w in snap["workers"].values()} == {True, False}
    assert all(w["pace"] for w in snap["workers"].values())
    assert len(snap["cml_packages"]) == 2 and snap["pause"]
    assert snap["aggregates"]["price LEASE-1"]["lease_token"] == live["lease_token"]


def _deliveries(engine: Engine) -> dict[str, Any]:
    """What the upgrade made of the fixture, by message_id and key: the channels, each
    message's deliveries, each aggregate's cursors and the history's channels."""
    with transaction(engine, read_only=True) as c:
        named = dict(c.execute(select(channels.c.id, channels.c.name)).all())
        ids = dict(c.execute(select(messages.c.id, messages.c.message_id)).all())
        found: dict[str, Any] = {"channels": sorted(named.values()), "deliveries": {}}
        for row in c.execute(select(deliveries)).mappings():
            found["deliveries"].setdefault(ids[row["message_pk"]], {})[named[row["channel_id"]]] = {
                name: _text(row[name]) for name in DELIVERED
            }
        keys = {
            r.id: f"{r.kind} {r.aggregate}"
            for r in c.execute(select(aggregates.c.id, aggregates.c.kind, aggregates.c.aggregate))
        }
        found["cursors"] = {}
        for row in c.execute(select(channel_aggregates)).mappings():
            found["cursors"].setdefault(keys[row["aggregate_id"]], {})[named[row["channel_id"]]] = {
                name: _text(row[name]) for name in CURSOR
            }
        found["history"] = [
            (ids[r.message_pk], r.event, named.get(r.channel_id))
            for r in c.execute(
                select(history.c.message_pk, history.c.event, history.c.channel_id).order_by(
                    history.c.id
                )
            )
        ]
    return found


# What each delivery must keep of its message, and each cursor of its aggregate.
DELIVERED = (
    "state",
    "reason",
    "attempts",
    "next_try_at",
    "locked_by",
    "locked_until",
    "leased_at",
    "lease_token",
    "claim_rank",
    "last_status",
    "last_error",
    "receipt",
    "superseded_by",
    "waiting_since",
    "updated_at",
)
CURSOR = ("done_version", "lease_owner", "lease_token", "lease_until")
INTAKE_EVENTS = {"taken", "duplicate", "rejected"}


def test_every_message_becomes_its_delivery_on_the_channel_named_after_the_target(
    migrated: tuple[str, Engine],
) -> None:
    """Contract 13, "Upgrading": the one-target installation (EXCHANGE_TARGET unset: ``api``)
    keeps every message's state, reason, attempts, next try, lease (same worker, expiry and
    token: a live lease stays live and fenced) and rank as its delivery on the channel ``api``;
    a rejected record gets none (no channel receives it); each aggregate's delivered version
    and lease become its cursor there; every history row after intake names the channel."""
    dialect, engine = migrated
    expected = MANIFEST[dialect]
    found = _deliveries(engine)
    assert found["channels"] == ["api"]
    accepted = {mid: row for mid, row in expected["messages"].items() if not row["rejected"]}
    assert set(found["deliveries"]) == set(accepted)
    for mid, row in accepted.items():
        assert found["deliveries"][mid] == {"api": {k: row[k] for k in DELIVERED}}, mid
    assert found["cursors"] == {
        key: {"api": {k: cursor[k] for k in CURSOR}}
        for key, cursor in expected["aggregates"].items()
    }
    history_expected = [
        (
            mid,
            h["event"],
            None if h["event"] in INTAKE_EVENTS or row["rejected"] else "api",
        )
        for mid, row in expected["messages"].items()
        for h in row["history"]
    ]
    assert sorted(found["history"], key=str) == sorted(history_expected, key=str)
    assert any(channel == "api" for _, _, channel in found["history"])
    live = next(row for row in accepted.values() if row["state"] == "in_progress")
    assert found["deliveries"][live["message_id"]]["api"]["lease_token"] == live["lease_token"]
    # Migration 0025: the channel takes every kind an accepted message has (api takes all).
    with transaction(engine, read_only=True) as c:
        takes = json.loads(c.execute(select(channels.c.takes)).scalar_one())
    assert takes == sorted({row["kind"] for row in accepted.values()})


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_channel_is_named_after_the_target_in_force_at_migrate(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``exchange migrate`` with EXCHANGE_TARGET=woocommerce: the deliveries are that
    channel's (keep the name in EXCHANGE_CHANNELS to keep them)."""
    engine = loaded(dialect, request, tmp_path)
    try:
        upgrade(engine, channel="woocommerce")
        found = _deliveries(engine)
        with transaction(engine, read_only=True) as c:
            targets = c.execute(select(channels.c.target)).scalars().all()
            takes = c.execute(select(channels.c.takes)).scalars().all()
    finally:
        engine.dispose()
    assert found["channels"] == ["woocommerce"] and targets == ["woocommerce"]
    assert [json.loads(t) for t in takes] == [["price"]]  # migration 0025: what it takes
    assert {tuple(d) for d in found["deliveries"].values()} == {("woocommerce",)}


def _before_0026(engine: Engine) -> str:
    """The revision migration 0026 follows."""
    from alembic.script import ScriptDirectory

    from exchange.db.migrate import alembic_config

    found = ScriptDirectory.from_config(alembic_config(engine)).get_revision("0026")
    assert found is not None and isinstance(found.down_revision, str)
    return found.down_revision


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_dropping_the_one_channel_copy_loses_no_state_history_lease_or_message_id(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Migration 0026 (issue 31, step 4) drops the old delivery columns of ``messages`` and
    ``aggregates``: every delivery, cursor (with its lease), history row and message_id is
    what it was just before, and the one channel's deliveries still say what the old columns
    said (each message's state, reason, attempts, lease and rank; a rejected record its own
    state on ``messages``)."""
    engine = loaded(dialect, request, tmp_path)
    try:
        upgrade(engine, _before_0026(engine))
        before, old_columns = _deliveries(engine), snapshot(engine)
        assert differences(MANIFEST[dialect], old_columns) == []
        upgrade(engine)
        after, one_channel = _deliveries(engine), snapshot(engine)
        with transaction(engine, read_only=True) as c:
            names = {col.name for col in messages.c}
            records = c.execute(
                select(messages.c.message_id, messages.c.state, messages.c.reason).where(
                    messages.c.rejected
                )
            ).all()
            accepted_states = c.execute(
                select(messages.c.state).where(~messages.c.rejected).distinct()
            ).scalars()
            accepted_states = list(accepted_states)
    finally:
        engine.dispose()
    assert "lease_token" not in names and "claim_rank" not in names
    assert after == before
    assert differences(without_record_copies(old_columns), one_channel) == []
    assert records and {mid: (s, r) for mid, s, r in records} == {
        mid: (row["state"], row["reason"])
        for mid, row in MANIFEST[dialect]["messages"].items()
        if row["rejected"]
    }
    assert accepted_states == [None]  # an accepted message's state is its deliveries'


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_downgrade_of_0026_fills_the_old_columns_from_the_default_channel(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Downgraded to the revision before 0026, the old columns hold again what the one-target
    service left: the default channel's deliveries and cursors put back on ``messages`` and
    ``aggregates``."""
    from alembic import command

    from exchange.db.migrate import alembic_config

    engine = loaded(dialect, request, tmp_path)
    try:
        upgrade(engine)
        before = _before_0026(engine)
        command.downgrade(alembic_config(engine), before)
        assert current_revision(engine) == before
        found = snapshot(engine)
        upgrade(engine)  # and up again: the same rows as a straight upgrade
        again = snapshot(engine)
    finally:
        engine.dispose()
    assert differences(MANIFEST[dialect], found) == []
    assert differences(without_record_copies(MANIFEST[dialect]), again) == []


def _sqlite_forms(engine: Engine) -> dict[str, str]:
    """The DDL SQLite keeps of ``channel_aggregates`` and of the records' index."""
    with engine.connect() as c:
        return dict(
            c.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE name IN "
                "('channel_aggregates', 'ix_messages_state_updated_at_id')"
            ).all()
        )


def test_0028_rebuilds_sqlites_cursors_without_a_rowid_keeping_every_row(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Migration 0028 (issue 31 item 9): on SQLite ``channel_aggregates`` becomes a table
    without a rowid (a cursor found by its key in one descent) and the records' index holds
    only rows with a state; every delivery, cursor (its live lease too), history row and
    message is what it was, the records' list still walks the index, and the downgrade puts
    the rowid table back with the same rows."""
    from alembic import command

    from exchange.db.migrate import alembic_config

    engine = loaded("sqlite", request, tmp_path)
    try:
        upgrade(engine, "0027")
        before, old = _deliveries(engine), snapshot(engine)
        assert "WITHOUT ROWID" not in _sqlite_forms(engine)["channel_aggregates"]
        upgrade(engine)
        forms = _sqlite_forms(engine)
        after, new = _deliveries(engine), snapshot(engine)
        with engine.connect() as c:
            plan = " | ".join(
                row[-1]
                for row in c.exec_driver_sql(
                    "EXPLAIN QUERY PLAN SELECT id, reason FROM messages WHERE state = ? "
                    "ORDER BY updated_at, id",
                    ("quarantined",),
                )
            )
        command.downgrade(alembic_config(engine), "0027")
        back, old_again = _deliveries(engine), snapshot(engine)
        back_forms = _sqlite_forms(engine)
    finally:
        engine.dispose()
    assert forms["channel_aggregates"].rstrip().endswith("WITHOUT ROWID")
    assert forms["ix_messages_state_updated_at_id"].endswith("WHERE state IS NOT NULL")
    assert "INDEX ix_messages_state_updated_at_id (state=?)" in plan, plan
    assert before["cursors"] and any(
        cursor["api"]["lease_token"] for cursor in before["cursors"].values()
    )
    assert after == before and differences(old, new) == []
    assert back == before and differences(old, old_again) == []
    assert "WITHOUT ROWID" not in back_forms["channel_aggregates"]
    assert "WHERE" not in back_forms["ix_messages_state_updated_at_id"]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_0029_marks_the_messages_kept_with_no_delivery(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Migration 0029 (review 32k finding 1): an accepted message with no delivery on any
    channel before the upgrade (a posting taken while no channel took postings) is marked
    ``kept_nowhere``, so ``status``'s ``no-channel:KIND`` still counts it once a channel
    takes the kind; a message with a delivery and a rejected record are not marked."""
    from exchange.db.channels import kept_nowhere

    engine = loaded(dialect, request, tmp_path)
    try:
        upgrade(engine, "0028")
        with transaction(engine) as c:
            kept, kept_id = c.execute(
                select(messages.c.id, messages.c.message_id)
                .where(messages.c.kind == "financial_posting", ~messages.c.rejected)
                .order_by(messages.c.id)
                .limit(1)
            ).one()
            c.execute(delete(deliveries).where(deliveries.c.message_pk == kept))
        upgrade(engine)
        with transaction(engine) as c:
            marked = (
                c.execute(select(messages.c.id).where(messages.c.kept_nowhere.is_not(None)))
                .scalars()
                .all()
            )
            counted = kept_nowhere(c, ["price", "financial_posting"], coalescing=["price"])
    finally:
        engine.dispose()
    assert list(marked) == [kept]
    assert counted == {
        "financial_posting": {"count": 1, "oldest": kept_id, "taken": True},
    }
