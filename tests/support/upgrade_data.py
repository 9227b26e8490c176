"""The upgrade fixture (issue 31, item 4): a database as the one-target service leaves it.

``build`` fills a migrated, empty database through the product's own code paths, never by
writing rows by hand: staging rows through ``intake.stage``, a 1C package through the
CommerceML publish path (``import_file``), worker cycles against the site model
(``exchange.dev.testing.FakeSite``, scripted per aggregate), the gap sweep on the worker's
clock, the operators' quarantine retry and cancel, a claim left unanswered (a live lease), the
operator's pause, and the workers' heartbeats (their pace). What it leaves:

- delivered prices and postings, prices cancelled as superseded and as stale;
- ``delayed``: a price the site answered 503, its next try an hour ahead;
- ``quarantined``: a price for a SKU the site lacks (404), a row intake refused (a record);
- a strict aggregate whose first version never came: the next is quarantined
  ``sequence-gap`` and the one after it *held* behind it (still ``new``);
- an open gap: a posting waiting for its missing predecessor, not yet timed out;
- ``cancelled`` by an operator; ``new`` again after an operator's retry;
- ``in_progress`` under a live lease (lease until 2036) of a second worker;
- two worker rows (one stopped, one live with its pace), an operator pause, 1C packages.

``snapshot`` reads back everything a migration must keep, as JSON-ready data; the manifest
written beside the fixture files is that snapshot plus the versions it was made with, and
``tests/db/test_upgrade_fixture.py`` compares a migrated copy's snapshot with it.
``tests/db/upgrade_fixture/make_fixture.py`` writes the files.
"""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy import Connection, Engine, func, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import (
    cml_package_repeats,
    cml_packages,
    delivery_pause,
    history,
    messages,
    price_owners,
    staging,
    workers,
)
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.testing import FAST, FakeSite, posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock, FakeMonotonic
from exchange.domain.policy import KindPolicies
from exchange.intake.commerceml.publish import import_file
from exchange.intake.staging_table import take
from exchange.ops import quarantine
from exchange.queue import control, lease
from exchange.settings import load_settings
from exchange.worker import Worker

# The fixture's own clock: every time it writes is on it (staging's created_at excepted: the
# database's default), so two builds differ only there and in lease tokens.
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SITE_URL = "https://site.test"
GAP_TIMEOUT = 600
RETAIL = CmlType("t-retail", "Розничная", "руб")
# Aggregates the scripted site answers 503 (a delay); SKUs missing from its catalogue (404).
BUSY = {"BUSY-1"}
MISSING = {"GONE-1", "GONE-2", "GONE-3"}
LEASE_WORKER = "fixture-worker-2"
LEASE_SECONDS = 10 * 365 * 24 * 3600  # live whenever the fixture is read (until 2036)


class ScriptedSite:
    """The site model, with a 503 for the aggregates of ``BUSY`` whatever is asked."""

    def __init__(self, catalog: set[str]) -> None:
        self.site = FakeSite(catalog=catalog)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            body = json.loads(request.content or b"{}")
            if isinstance(body, dict) and body.get("aggregate") in BUSY:
                return httpx.Response(503, json={"error": "busy"})
        response: httpx.Response = self.site(request)
        return response


def _worker(
    url: str, engine: Engine, clock: FakeClock, site: ScriptedSite, worker_id: str
) -> Worker:
    settings = load_settings(
        **{
            **FAST,
            "database_url": url,
            "site_url": SITE_URL,
            "site_token": "fixture-token",
            "worker_id": worker_id,
            "concurrency": 1,
            "max_attempts": 5,
            "retry_base_delay": 3600,
            "retry_max_delay": 3600,
            "gap_timeout": GAP_TIMEOUT,
        }
    )
    return bootstrap.worker(
        settings,
        engine,
        clock=clock,
        transport=httpx.MockTransport(site),
        monotonic=FakeMonotonic(clock),
        rng=random.Random(31),
    )


def _cycles(worker: Worker, count: int = 4) -> None:
    async def go() -> None:
        for _ in range(count):
            await worker.cycle()

    asyncio.run(go())


def _close(worker: Worker) -> None:
    asyncio.run(worker.target.aclose())


def _package(path: Path, offers: list[tuple[str, str]]) -> None:
    package = Package(
        types=[RETAIL], offers=[CmlOffer(o, [CmlPrice("t-retail", p)]) for o, p in offers]
    )
    path.write_bytes(offers_xml(package))


def build(url: str, engine: Engine, workdir: Path) -> None:
    """Fill the migrated, empty database of ``engine`` (at ``url``) as the module says."""
    workdir.mkdir(parents=True, exist_ok=True)
    clock = FakeClock(START)
    prices = [f"P-{n:03d}" for n in range(1, 13)]
    catalog = {*prices, *BUSY, "LEASE-1", "STALE-1"}
    packages = [f"C-{n}" for n in range(1, 6)]
    site = ScriptedSite(catalog | {f"{sku}/retail" for sku in packages} | set(packages))
    first = _worker(url, engine, clock, site, "fixture-worker-1")
    try:
        # Prices delivered, some superseded before they went (two versions in one take-in).
        stage(engine, [price_row(sku, 1, f"{100 + n}.00") for n, sku in enumerate(prices)])
        stage(engine, [price_row(sku, 2, f"{200 + n}.50") for n, sku in enumerate(prices[:4])])
        # Postings in strict order, delivered; a posting whose first version never came.
        stage(engine, [posting_row("DOC-A", v, f"{v}0.00") for v in (1, 2, 3)])
        stage(engine, [posting_row("DOC-Q", v) for v in (2, 3)])
        # Refused at intake (not a number): a quarantine record.
        stage(engine, [raw_row("price", "BAD-1", 1, '{"sku": "BAD-1", "price": "дорого"}')])
        # Prices for SKUs the site lacks (404), and one the site answers 503.
        stage(engine, [price_row(sku, 1) for sku in sorted(MISSING | BUSY)])
        _cycles(first)
        # Two 1C packages through the CommerceML publish path (offers.xml twice).
        for number, offers in enumerate(
            ([(sku, f"{300 + n}.00") for n, sku in enumerate(packages)], [("C-1", "399.00")]),
            start=1,
        ):
            path = workdir / f"offers_{number}.xml"
            _package(path, offers)
            outcome = import_file(
                engine, path, name=path.name, price_types={"Розничная": "retail"}, sku_mode="id"
            )
            assert outcome.outcome == "staged", outcome
        _cycles(first)
        # A version at or below the delivered one is stale: cancelled at intake's coalesce.
        stage(engine, [price_row("STALE-1", 2, "50.00")])
        _cycles(first)
        stage(engine, [price_row("STALE-1", 1, "40.00")])
        _cycles(first)
        # DOC-Q's gap times out: v2 quarantined (sequence-gap), v3 held behind it.
        clock.advance(GAP_TIMEOUT + 60)
        _cycles(first)
        # An open gap: DOC-GAP v1 delivered, v3 waits for v2 (not yet timed out).
        stage(engine, [posting_row("DOC-GAP", v) for v in (1, 3)])
        _cycles(first)
        # An operator cancels GONE-2 for good (its history row names the operator and note).
        with transaction(engine) as connection:
            quarantine.cancel(
                connection,
                [_quarantined_ids(connection)["GONE-2"]],
                operator="fixture-operator",
                note="removed from the catalogue",
                now=clock.now(),
                kinds=KindPolicies.of(first.settings.kinds),
            )
        first.retire()  # a stopped worker's row
    finally:
        _close(first)
    # A second worker: its heartbeat (and pace) row, and a claim it never answers.
    clock.advance(60)
    second = _worker(url, engine, clock, site, LEASE_WORKER)
    try:
        _cycles(second, 1)
        # LEASE-1 taken in and claimed, never answered: in_progress under a live lease.
        stage(engine, [price_row("LEASE-1", 1, "77.00")])
        take(engine, None, second.settings.kinds, clock.now())
        with transaction(engine) as connection:
            claimed = lease.claim(
                connection,
                worker=LEASE_WORKER,
                now=clock.now(),
                limit=10,
                lease_seconds=LEASE_SECONDS,
                kinds=KindPolicies.of(second.settings.kinds),
                max_attempts=5,
            )
        assert [m.aggregate for m in claimed.messages] == ["LEASE-1"], claimed
    finally:
        _close(second)
    # Then GONE-3 retried by an operator: new again, its attempts start again.
    with transaction(engine) as connection:
        quarantine.retry(
            connection,
            [_quarantined_ids(connection)["GONE-3"]],
            quarantine.Filters(),
            operator="fixture-operator",
            note="added to the shop",
            now=clock.now(),
            dry_run=False,
        )
    with transaction(engine) as connection:
        control.pause(
            connection, operator="fixture-operator", note="site maintenance", now=clock.now()
        )


def _quarantined_ids(connection: Connection) -> dict[str, str]:
    rows = connection.execute(
        select(messages.c.aggregate, messages.c.message_id).where(messages.c.state == "quarantined")
    ).all()
    return {aggregate: message_id for aggregate, message_id in rows}


# -- what a migration must keep ----------------------------------------------------------------


_TIMES = {"next_try_at", "locked_until", "leased_at", "updated_at", "waiting_since", "lease_until"}


def _typed(name: str, value: Any) -> Any:
    """A value read with plain SQL as the models read it: a time as an aware UTC datetime
    (SQLite gives text), a flag as a bool (SQLite gives 0 or 1)."""
    if name in _TIMES and isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    if name in _TIMES and isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if name == "rejected" and value is not None:
        return bool(value)
    return value


def _text(value: Any) -> Any:
    """A value as the manifest writes it: times in UTC ISO form, the rest as JSON has it."""
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return stamp.astimezone(UTC).isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


MESSAGE_COLUMNS = (
    "message_id",
    "kind",
    "aggregate",
    "version",
    "rejected",
    "state",
    "reason",
    "superseded_by",
    "attempts",
    "next_try_at",
    "locked_by",
    "locked_until",
    "leased_at",
    "lease_token",
    "last_status",
    "last_error",
    "receipt",
    "claim_rank",
    "updated_at",
    "payload",
    "source_ref",
    "name",
    "staging_id",
    "waiting_since",
)
HISTORY_COLUMNS = (
    "at",
    "event",
    "from_state",
    "to_state",
    "worker",
    "attempt",
    "http_status",
    "operator",
    "note",
)


# What a delivery holds of a message (contract 13): the columns the one-target service kept on
# ``messages``, which migration 0026 dropped there (but a rejected record's own).
DELIVERY_OF_MESSAGE = (
    "state",
    "reason",
    "superseded_by",
    "attempts",
    "next_try_at",
    "locked_by",
    "locked_until",
    "leased_at",
    "lease_token",
    "last_status",
    "last_error",
    "receipt",
    "claim_rank",
    "updated_at",
    "waiting_since",
)


def without_record_copies(snap: dict[str, Any]) -> dict[str, Any]:
    """``snap`` (a manifest made before migration 0026) as that migration leaves it: a
    rejected record keeps only its own columns on ``messages`` (state, reason, last_error,
    updated_at and what intake wrote); the delivery columns it had there (no attempt, rank 0,
    the gap clock at its intake) belonged to no delivery, and were never read for it."""
    out = dict(snap)
    out["messages"] = {
        mid: (
            {k: v for k, v in row.items() if k == "history" or k in messages.c}
            if row["rejected"]
            else row
        )
        for mid, row in snap["messages"].items()
    }
    return out


CURSOR_OF_AGGREGATE = ("done_version", "lease_owner", "lease_token", "lease_until")


def _one_target(c: Connection) -> tuple[list[Any], list[Any]]:
    """The messages and aggregates as the one-target service kept them, whatever the schema:
    with the old columns (before migration 0026) as they are; after it, each accepted
    message with its delivery on the one channel (the first registered) and each aggregate
    with its cursor there, a rejected record with its own state."""
    tables = set(sa.inspect(c).get_table_names())
    old = "done_version" in {col["name"] for col in sa.inspect(c).get_columns("aggregates")}
    if old or "deliveries" not in tables:
        found = c.execute(sa.text("SELECT * FROM messages ORDER BY id")).mappings().all()
        cursors = (
            c.execute(sa.text("SELECT * FROM aggregates ORDER BY kind, aggregate")).mappings().all()
        )
        return list(found), list(cursors)
    channel = "(SELECT min(id) FROM channels)"
    # The columns of ``messages`` this revision has (``kept_nowhere`` came with 0029).
    present = {col["name"] for col in sa.inspect(c).get_columns("messages")}
    own = [
        col.name
        for col in messages.c
        if col.name not in DELIVERY_OF_MESSAGE and col.name in present
    ]
    picked = ", ".join(
        [f"m.{name}" for name in own]
        + [
            f"CASE WHEN m.rejected THEN m.{name} ELSE d.{name} END AS {name}"
            if name in messages.c
            else f"d.{name}"
            for name in DELIVERY_OF_MESSAGE
        ]
    )
    found = (
        c.execute(
            sa.text(
                f"SELECT {picked} FROM messages m LEFT JOIN deliveries d ON d.message_pk = m.id "
                f"AND d.channel_id = {channel} ORDER BY m.id"
            )
        )
        .mappings()
        .all()
    )
    # A rejected record has no delivery: only its own columns on ``messages`` are its.
    found = [
        {k: v for k, v in row.items() if k in messages.c} if row["rejected"] else row
        for row in found
    ]
    cursors = (
        c.execute(
            sa.text(
                "SELECT a.kind, a.aggregate, "
                + ", ".join(f"ca.{name}" for name in CURSOR_OF_AGGREGATE)
                + " FROM aggregates a LEFT JOIN channel_aggregates ca ON ca.aggregate_id = a.id "
                f"AND ca.channel_id = {channel} ORDER BY a.kind, a.aggregate"
            )
        )
        .mappings()
        .all()
    )
    return list(found), list(cursors)


def snapshot(engine: Engine) -> dict[str, Any]:
    """Everything of the one-target service's data that an upgrade must keep, by message_id
    and by key (never by surrogate id, which a migration may renumber): after migration 0026,
    the one channel's deliveries and cursors stand for the old columns (``_one_target``)."""
    with transaction(engine, read_only=True) as c:
        out: dict[str, Any] = {}
        by_pk: dict[int, str] = {}
        rows: dict[str, dict[str, Any]] = {}
        found, cursors = _one_target(c)
        for row in found:
            by_pk[row["id"]] = row["message_id"]
            kept = [k for k in MESSAGE_COLUMNS if k in row]  # a record's after 0026: its own
            rows[row["message_id"]] = {k: _text(_typed(k, row[k])) for k in kept}
            rows[row["message_id"]]["history"] = []
        for row in c.execute(select(history).order_by(history.c.id)).mappings():
            rows[by_pk[row["message_pk"]]]["history"].append(
                {k: _text(row[k]) for k in HISTORY_COLUMNS}
            )
        out["messages"] = rows
        out["aggregates"] = {
            f"{r['kind']} {r['aggregate']}": {
                "done_version": r["done_version"],
                "lease_owner": r["lease_owner"],
                "lease_token": r["lease_token"],
                "lease_until": _text(_typed("lease_until", r["lease_until"])),
            }
            for r in cursors
        }
        out["workers"] = {
            r.worker_id: {
                "started_at": _text(r.started_at),
                "heartbeat_at": _text(r.heartbeat_at),
                "stopped_at": _text(r.stopped_at),
                "paused_reason": r.paused_reason,
                "breaker_state": r.breaker_state,
                "pace": json.loads(r.pace) if r.pace else None,
            }
            for r in c.execute(select(workers).order_by(workers.c.worker_id))
        }
        out["pause"] = {
            r.name: {"operator": r.operator, "note": r.note, "paused_at": _text(r.paused_at)}
            for r in c.execute(select(delivery_pause).order_by(delivery_pause.c.name))
        }
        out["cml_packages"] = {
            r.digest: {"version": r.version, "source_ref": r.source_ref, "intents": r.intents}
            for r in c.execute(select(cml_packages).order_by(cml_packages.c.id))
        }
        out["price_owners"] = {
            f"{r.sku} {r.price_type}": r.aggregate
            for r in c.execute(
                select(price_owners).order_by(price_owners.c.sku, price_owners.c.price_type)
            )
        }
        out["cml_package_repeats"] = c.execute(
            select(func.count()).select_from(cml_package_repeats)
        ).scalar_one()
        out["staging"] = {
            "rows": c.execute(select(func.count()).select_from(staging)).scalar_one(),
            "untaken": c.execute(
                select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
            ).scalar_one(),
        }
    return out


def summary(snap: dict[str, Any]) -> dict[str, Any]:
    """Counts a reader of the manifest sees first: messages per state, history rows."""
    states: dict[str, int] = {}
    for row in snap["messages"].values():
        states[row["state"]] = states.get(row["state"], 0) + 1
    return {
        "messages": len(snap["messages"]),
        "states": dict(sorted(states.items())),
        "history_rows": sum(len(r["history"]) for r in snap["messages"].values()),
        "aggregates": len(snap["aggregates"]),
        "workers": sorted(snap["workers"]),
        "cml_packages": len(snap["cml_packages"]),
    }


def differences(expected: dict[str, Any], found: dict[str, Any], path: str = "") -> list[str]:
    """Where ``found`` differs from ``expected`` (one line each; empty: the same)."""
    if isinstance(expected, dict) and isinstance(found, dict):
        lines: list[str] = []
        for key in sorted(set(expected) | set(found), key=str):
            where = f"{path}/{key}"
            if key not in found:
                lines.append(f"{where}: missing")
            elif key not in expected:
                lines.append(f"{where}: not in the manifest")
            else:
                lines.extend(differences(expected[key], found[key], where))
        return lines
    if expected != found:
        return [f"{path}: {expected!r} became {found!r}"]
    return []


# -- loading the fixture -------------------------------------------------------------------


def load_pg_dump(url: str, dump: Path) -> None:
    """Run the plain-SQL dump ``dump`` (``pg_dump --format=plain``) into the empty database at
    ``url`` (libpq form), as ``psql -f`` would, in this process: the statements between the
    ``COPY … FROM stdin`` blocks go as one simple query each, the blocks through COPY. psql's
    own meta-commands (``\\restrict``/``\\unrestrict``, which pg_dump writes since 15.14 to
    stop a hostile dump's meta-commands) are psql's, not the server's: skipped."""
    import psycopg

    lines = dump.read_text(encoding="utf-8").splitlines(keepends=True)
    with psycopg.connect(url, autocommit=True) as connection:
        pending: list[str] = []
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            if line.startswith("\\"):
                continue
            if not (line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;")):
                pending.append(line)
                continue
            if "".join(pending).strip():
                connection.execute("".join(pending).encode())
            pending = []
            data: list[str] = []
            while lines[index] != "\\.\n":
                data.append(lines[index])
                index += 1
            index += 1  # the block's end, \.
            statement = line.rstrip().removesuffix(";").encode()
            with connection.cursor() as cursor, cursor.copy(statement) as copy:
                copy.write("".join(data))
        if "".join(pending).strip():
            connection.execute("".join(pending).encode())
