"""Reading a CommerceML file in a process of its own (issue 14, item 8): ``exchange serve``
reads each file in a ``ReaderPool`` process while what it has read is staged (PostgreSQL: by
the publishing transaction; SQLite: into a scratch file, copied by the transaction after the
read, the service's database free meanwhile); the intents are the very ones read in serve's
own process, a file that cannot be read is a ``failure`` with nothing staged, and a reader that
dies is a ``failure`` too, never a hang, after which the next file is read by a new process.
No spool, no scratch file and no attached database is left behind."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, delete, select
from web_helpers import PASSWORD, USER

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import cml_packages, staging
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.intake.commerceml import publish
from exchange.intake.commerceml.publish import Outcome, import_file
from exchange.intake.commerceml.reading import CHUNK, Read, ReaderPool, read_into_spool
from exchange.intake.stage import stage_many

RETAIL = CmlType("t-retail", "Розничная", "руб")
WHOLESALE = CmlType("t-wholesale", "Оптовая", "USD")
PURCHASE = CmlType("t-purchase", "Закупочная", "руб")
MAP = {"Розничная": "retail", "t-wholesale": "wholesale"}


def varied(offers: int) -> bytes:
    """Offers with every case the mapping has: two mapped types (one by name, one by Ид), an
    unmapped one, another unit, a decimal comma with a non-breaking space, a currency of its
    own, an offer without prices, a characteristic, a name that needs JSON escaping."""
    return offers_xml(
        Package(
            types=[RETAIL, WHOLESALE, PURCHASE],
            offers=[
                CmlOffer(
                    f"p{n}#c{n % 3}" if n % 5 else f'p"{n}\\',
                    [
                        CmlPrice("t-retail", f"1\u00a0{n % 1000:03d},{n % 100:02d}", "руб"),
                        CmlPrice("t-wholesale", f"{n}.5"),
                        CmlPrice("t-purchase", "1"),
                        CmlPrice("t-retail", "9", coefficient="10"),
                    ],
                    with_prices=n % 7 != 0,
                )
                for n in range(offers)
            ],
        )
    )


def staged(engine: Engine) -> list[tuple[Any, ...]]:
    with transaction(engine, read_only=True) as connection:
        return [
            tuple(r)
            for r in connection.execute(
                select(
                    staging.c.kind,
                    staging.c.aggregate,
                    staging.c.aggregate_version,
                    staging.c.payload,
                    staging.c.schema_version,
                    staging.c.source_ref,
                ).order_by(staging.c.id)
            )
        ]


def stored(engine: Engine) -> list[tuple[Any, ...]]:
    """How each staged row is stored besides its values (SQLite keeps a type per value): the
    storage classes, whether it has a creation time and whether it is untaken."""
    if engine.dialect.name != "sqlite":
        return []
    with transaction(engine, read_only=True) as connection:
        return [
            tuple(r)
            for r in connection.exec_driver_sql(
                "SELECT DISTINCT typeof(id), typeof(kind), typeof(aggregate), "
                "typeof(aggregate_version), typeof(payload), typeof(schema_version), "
                "typeof(source_ref), typeof(created_at), created_at IS NOT NULL, taken_at IS NULL "
                "FROM staging_intents"
            )
        ]


def attached(engine: Engine) -> list[str]:
    """The databases attached to any of ``engine``'s pooled connections (SQLite; ``main`` and
    ``temp`` are every connection's own)."""
    if engine.dialect.name != "sqlite":
        return []
    pooled = engine.pool.checkedin()  # type: ignore[attr-defined]
    held = [engine.raw_connection() for _ in range(max(pooled, 1))]
    try:
        return [
            row[1]
            for c in held
            for row in c.cursor().execute("PRAGMA database_list")
            if row[1] not in ("main", "temp")
        ]
    finally:
        for c in held:
            c.close()


def leftovers(folder: Path) -> list[str]:
    """What an import leaves beside the upload: its spool and scratch rows must be gone."""
    return sorted(p.name for p in folder.iterdir() if ".spool" in p.name or ".rows.db" in p.name)


def forget(engine: Engine) -> None:
    with transaction(engine) as connection:
        connection.execute(delete(staging))
        connection.execute(delete(cml_packages))


@pytest.fixture
def pool() -> Iterator[ReaderPool]:
    readers = ReaderPool(1)
    yield readers
    readers.close()


def load(engine: Engine, path: Path, pool: ReaderPool | None) -> Outcome:
    return import_file(engine, path, name="offers.xml", price_types=MAP, sku_mode="id", pool=pool)


def test_a_package_read_in_a_process_of_its_own_stages_the_intents_read_here(
    db: Engine, tmp_path: Path, pool: ReaderPool
) -> None:
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(2 * CHUNK + 123))  # several frames, the last one short
    here = load(db, path, None)
    rows_here, stored_here = staged(db), stored(db)
    forget(db)
    there = load(db, path, pool)
    assert here.outcome == "staged" and there == here
    assert staged(db) == rows_here
    assert stored(db) == stored_here  # SQLite: copied from the scratch file, the same rows
    assert leftovers(tmp_path) == [] == attached(db)
    assert len(rows_here) == here.intents > 2 * CHUNK
    payloads = [json.loads(row[3]) for row in rows_here]
    assert {p["price_type"] for p in payloads} == {"retail", "wholesale"}
    assert any('"' in p["sku"] for p in payloads)


def test_a_file_sent_again_is_not_read_twice(db: Engine, tmp_path: Path, pool: ReaderPool) -> None:
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(10))
    first = load(db, path, pool)
    again = load(db, path, pool)
    assert (again.outcome, again.version) == ("nothing-new", first.version)
    assert len(staged(db)) == first.intents


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html><body>hi</body></html>", "not a CommerceML file"),
        (varied(3)[:-40], "not well-formed XML"),
        (
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]>'
            b"<\xd0\x9a\xd0\x98>&a;</\xd0\x9a\xd0\x98>",
            "document type declaration",
        ),
    ],
)
def test_a_file_that_cannot_be_read_in_the_pool_is_a_failure_with_nothing_staged(
    db: Engine, tmp_path: Path, pool: ReaderPool, data: bytes, reason: str
) -> None:
    path = tmp_path / "offers.xml"
    path.write_bytes(data)
    outcome = load(db, path, pool)
    assert outcome.outcome == "failure" and reason in outcome.detail
    assert [] == staged(db)
    assert leftovers(tmp_path) == [] == attached(db)


def die_after_one_frame(path: Path, spool: Path, *args: Any) -> Read:
    """A reader that writes one frame of rows, then dies as a crash would (no answer)."""
    read_into_spool(path.with_name("first.xml"), spool, *args)
    os._exit(3)


def test_a_reader_that_dies_is_a_failure_not_a_hang_and_the_next_file_is_read(
    db: Engine, tmp_path: Path
) -> None:
    (tmp_path / "first.xml").write_bytes(varied(20))
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(30))
    crashing = ReaderPool(1, target=die_after_one_frame)
    try:
        outcome = load(db, path, crashing)
        assert outcome.outcome == "failure" and "stopped unexpectedly" in outcome.detail
        assert [] == staged(db)  # nothing of what it wrote (rolled back, or never staged)
        assert leftovers(tmp_path) == [] == attached(db)
        crashing.target = read_into_spool  # the same pool, a new process
        assert load(db, path, crashing).outcome == "staged"
        assert len(staged(db)) > 0
    finally:
        crashing.close()


def test_serve_reads_in_a_process_of_its_own(serve: Any, db: Engine) -> None:
    before = {p.pid for p in multiprocessing.active_children()}
    base = serve(**{"1c_price_types": MAP})  # its reading process starts with it
    c = OneCClient(base, USER, PASSWORD, use_zip=False)
    try:
        assert c.checkauth().status == "success"
        c.init()
        assert c.upload("offers.xml", varied(50)).status == "success"
        assert c.import_file("offers.xml")[0].status == "success"
        readers = {p.pid for p in multiprocessing.active_children()} - before
        assert readers and os.getpid() not in readers
        assert len(staged(db)) > 0
        c.complete()
    finally:
        c.close()
    assert httpx.get(f"{base}/healthz").status_code == 200


def read_then_wait_for_a_staged_frame(path: Path, spool: Path, *args: Any) -> Read:
    """A reader that writes every frame, then answers only once the publisher said it staged
    one (or after 10 s), leaving ``answered`` beside the file when it does."""
    read = read_into_spool(path, spool, *args)
    deadline = time.monotonic() + 10
    while not path.with_name("staged-one").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    path.with_name("answered").touch()
    return read


def test_on_postgresql_the_frames_are_staged_while_the_reader_has_not_answered(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlap of reading and staging on PostgreSQL (SQLite's: the test below):
    the publishing transaction stages the first frame before the reading process answers."""
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(2 * CHUNK + 123))
    answered_at_stage: list[bool] = []

    def observed(connection: Any, rows: Any) -> Any:
        answered_at_stage.append((tmp_path / "answered").exists())
        (tmp_path / "staged-one").touch()
        return stage_many(connection, rows)

    monkeypatch.setattr(publish, "stage_many", observed)
    engine = make_engine(pg_url)
    readers = ReaderPool(1, target=read_then_wait_for_a_staged_frame)
    try:
        outcome = load(engine, path, readers)
        rows = staged(engine)
    finally:
        readers.close()
        engine.dispose()
    assert outcome.outcome == "staged"
    assert len(rows) == outcome.intents > 2 * CHUNK
    assert len(answered_at_stage) >= 3  # a frame per CHUNK rows
    assert answered_at_stage[0] is False  # staged while the reader was still at work


def test_a_file_judged_after_the_read_stages_nothing_and_leaves_nothing(
    db: Engine, tmp_path: Path, pool: ReaderPool
) -> None:
    """A file whose offers map to no intent: the rows read are none, the outcome ``nothing``,
    and the scratch file of the read is gone."""
    path = tmp_path / "offers.xml"
    path.write_bytes(offers_xml(Package(types=[PURCHASE], offers=[CmlOffer("p", [])])))
    assert load(db, path, pool).outcome == "nothing"
    assert [] == staged(db)
    assert leftovers(tmp_path) == [] == attached(db)


def read_then_wait_for_a_copied_frame(path: Path, spool: Path, *args: Any) -> Read:
    """A reader that writes every frame, then answers only once serve said it took one (or
    after 10 s), leaving ``answered`` beside the file when it does."""
    read = read_into_spool(path, spool, *args)
    deadline = time.monotonic() + 10
    while not path.with_name("took-one").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    path.with_name("answered").touch()
    return read


def test_on_sqlite_the_rows_are_taken_while_the_reader_reads_and_no_write_lock_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: serve takes the frames into its scratch file while the reader has not answered,
    and meanwhile the service's database is free to write: another connection begins a write
    transaction at once (no busy wait) and commits. Its one writer's lock is taken only for
    the publishing transaction, after the read."""
    url = f"sqlite:///{tmp_path / 'exchange.db'}"
    engine = make_engine(url)
    upgrade(engine)
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(2 * CHUNK + 123))
    seen: list[tuple[bool, str]] = []
    taking = publish.frames

    def observed(*args: Any) -> Any:
        for frame in taking(*args):
            if not seen:
                other = sqlite3.connect(tmp_path / "exchange.db", timeout=0, isolation_level=None)
                try:
                    other.execute("BEGIN IMMEDIATE")
                    other.execute("DELETE FROM cml_packages WHERE id = -1")
                    other.execute("COMMIT")
                    wrote = "committed"
                except sqlite3.OperationalError as exc:
                    wrote = str(exc)
                finally:
                    other.close()
                seen.append(((tmp_path / "answered").exists(), wrote))
                (tmp_path / "took-one").touch()
            yield frame

    monkeypatch.setattr(publish, "frames", observed)
    readers = ReaderPool(1, target=read_then_wait_for_a_copied_frame)
    try:
        outcome = load(engine, path, readers)
        rows = staged(engine)
    finally:
        readers.close()
        engine.dispose()
    assert outcome.outcome == "staged"
    assert len(rows) == outcome.intents > 2 * CHUNK
    assert seen == [(False, "committed")]  # taken while the reader read, the database free


def test_staging_in_another_sqlite_file_stages_there_the_rows_read_here(
    db: Engine, tmp_path: Path, pool: ReaderPool
) -> None:
    """EXCHANGE_STAGING_URL naming another SQLite file: the package read in a process of its
    own is staged there, as the same rows as read in serve's own process, none in the
    service's database, and neither database keeps the scratch file attached."""
    url = f"sqlite:///{tmp_path / 'staging.db'}"
    staging_db = make_engine(url)
    upgrade(staging_db)
    path = tmp_path / "offers.xml"
    path.write_bytes(varied(CHUNK + 7))

    def into_staging(pool: ReaderPool | None) -> Outcome:
        return import_file(
            db,
            path,
            name="offers.xml",
            price_types=MAP,
            sku_mode="id",
            pool=pool,
            staging_engine=staging_db,
        )

    try:
        here = into_staging(None)
        rows_here, stored_here = staged(staging_db), stored(staging_db)
        forget(staging_db)
        there = into_staging(pool)
        assert here.outcome == "staged" and there == here
        assert staged(staging_db) == rows_here and len(rows_here) == here.intents > CHUNK
        assert stored(staging_db) == stored_here
        assert [] == staged(db)
        assert leftovers(tmp_path) == []
        assert attached(staging_db) == [] == attached(db)
    finally:
        staging_db.dispose()
