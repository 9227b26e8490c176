"""One CommerceML file -> staged ``price`` rows (contract 9, 9a).

The file is read (``reading.py``) into a spool beside the upload, in frames of rows (memory
stays flat in the file's size). The publishing transaction gives the package its version,
stages the rows with it through ``stage_many()`` (executemany of tuples on SQLite, COPY on
PostgreSQL) and records the package's digest, so a package is staged whole or not at all and
the same file sent again stages nothing new. ``exchange serve`` reads in a process of its own
(``ReaderPool``); on PostgreSQL the transaction stages each frame as soon as it is written,
so parse and stage overlap (the transaction is open while the file is read: MVCC, and the
advisory lock only orders packages). On SQLite, whose one writer's lock would stop every
other write that long (the workers' intake, the JSON intake, the exchange log), serve takes
each frame as it is written into a scratch SQLite file beside the upload (``<file>.rows.db``,
no journal, no sync; ``_into_scratch``), so unpickling and inserting the rows overlap the read
without any lock of the service's database; after the read one short transaction attaches
that file (before its ``BEGIN IMMEDIATE``, detached after it: ``transaction(attach=...)``)
and copies the rows in one ``INSERT ... SELECT`` that SQLite runs without Python per row
(``stage_attached``); the file is deleted whatever the outcome. Timed apart at 100,000
offers (median of 3, against the bare parse of the same moment): the copy into the scratch
file 0.17×, the publishing transaction from it 0.19× (from the spool by ``executemany`` it
was 0.52×); the import, round by round, takes 0.79–0.95 of the time it took with
``executemany`` after the read (through serve 1.63–1.65× the bare parse against 1.82–1.97×,
without serve's HTTP 1.35–1.70× against 1.54–2.06×: docs/benchmarks/README.md). The
version is above every ``price`` version of the queue and the staging table, known before
the package's aggregates are.

Staging in a database of its own (``EXCHANGE_STAGING_URL``, contract 1 and 7): the publishing
transaction runs there, and the package's record (``cml_packages``: digest and version) is
written in it with the rows, so the rows and "this file was staged" commit together or not at
all. The versions already used by the queue are read from the service's database. What
operators see (``cml_exchanges``, and the catalogue's price types and articles, in the
service's database) is written after that commit: a crash between the two leaves an
unfinished entry, and the same file sent again is answered "staged before" with the package's
version, never staged twice. A serve process renews the heartbeat of the entries it works on;
an unfinished entry whose heartbeat stopped is closed as ``interrupted`` by any serve process
(``close_interrupted``), so the operators never see a dead import as one in progress.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    and_,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    channels,
    cml_catalog,
    cml_exchanges,
    cml_package_repeats,
    cml_packages,
    messages,
    price_owners,
    staging,
)
from exchange.db.wake import announce_staged
from exchange.domain.identity import MAX_VERSION, PACKAGE_VERSIONS_FROM
from exchange.domain.search_key import search_key_or_none
from exchange.intake.commerceml.mapping import Counts, SkuMode
from exchange.intake.commerceml.parse import CmlError, PriceType
from exchange.intake.commerceml.reading import (
    Read,
    ReaderCrashed,
    ReaderPool,
    frames,
    read_into_spool,
)
from exchange.intake.contracts import STAGING_TEXT_LIMITS, same_payload, shortened
from exchange.intake.stage import Row, stage_attached, stage_many

CHUNK = 5000
SOURCE_REF_CHARS = STAGING_TEXT_LIMITS["source_ref"]
log = logging.getLogger(__name__)
PUBLISH_LOCK = 0x1C0E  # PostgreSQL advisory lock: one package gets its version at a time
SPOOL_SUFFIX = ".spool"  # beside the upload: the frames the reader writes
SCRATCH_SUFFIX = ".rows.db"  # beside the upload: the rows read, a SQLite file (SQLite staging)
NAMES_SUFFIX = ".names.json"  # in an exchange's folder: the products' names it has sent
SESSION_NAMES = "products" + NAMES_SUFFIX  # that file's name
# names 1C may not upload (exchange/web/files.py)
WORK_SUFFIXES = (SPOOL_SUFFIX, SCRATCH_SUFFIX, NAMES_SUFFIX)
SCRATCH = "scratch"  # the scratch database's name while attached
SCRATCH_TABLE = "price_rows"


@dataclass(frozen=True, slots=True)
class Published:
    """What ``publish`` staged: the package's version; ``fresh``: False when the same file was
    staged before (nothing staged now); ``repeated``: the earlier offers of an aggregate a
    later offer of the package maps to, of another price (not sent, «повтор в пакете»);
    ``owned``: the prices whose (sku, price type) another aggregate owns (contract 15: intake
    refuses them)."""

    version: int
    fresh: bool
    repeated: int = 0
    owned: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str  # staged | nothing-new | catalogue | nothing | failure
    detail: str
    intents: int = 0
    not_sent: int = 0
    version: int | None = None


def _now() -> datetime:
    return datetime.now(UTC)


# -- what catalogue files said ---------------------------------------------------------------


def load_catalogue(
    engine: Engine, *, articles: bool
) -> tuple[dict[str, PriceType], dict[str, str]]:
    types: dict[str, PriceType] = {}
    known: dict[str, str] = {}
    with transaction(engine, read_only=True) as connection:
        kinds = ["price_type", "article"] if articles else ["price_type"]
        rows = connection.execute(
            select(
                cml_catalog.c.kind, cml_catalog.c.key, cml_catalog.c.name, cml_catalog.c.value
            ).where(cml_catalog.c.kind.in_(kinds))
        )
        for kind, key, name, value in rows:
            if kind == "price_type":
                types[key] = PriceType(key, name or "", value or "")
            else:
                known[key] = value or ""
    return types, known


def save_catalogue(
    connection: Connection, types: Mapping[str, PriceType], articles: Mapping[str, str]
) -> None:
    now = _now()
    rows = [
        {"kind": "price_type", "key": t.id[:200], "name": t.name[:500], "value": t.currency[:200]}
        for t in types.values()
    ] + [
        {"kind": "article", "key": k[:200], "name": None, "value": v[:200]}
        for k, v in articles.items()
    ]
    # Folded as search compares them (the workbench finds a product by its article).
    rows = [
        {
            **row,
            "key_key": search_key_or_none(row["key"]),
            "value_key": search_key_or_none(row["value"]),
        }
        for row in rows
    ]
    dialect: Any = postgresql if is_postgres(connection) else sqlite
    for start in range(0, len(rows), CHUNK):
        statement = dialect.insert(cml_catalog)
        statement = statement.on_conflict_do_update(
            index_elements=["kind", "key"],
            set_={
                "name": statement.excluded.name,
                "value": statement.excluded.value,
                "value_key": statement.excluded.value_key,
                "updated_at": statement.excluded.updated_at,
            },
        )
        connection.execute(
            statement, [{**row, "updated_at": now} for row in rows[start : start + CHUNK]]
        )


def load_session_names(path: Path | None) -> dict[str, str]:
    """The products' names an exchange's catalogue files gave (``save_session_names``): by
    product ``Ид``; none without the file (no catalogue file yet, or no exchange at all)."""
    if path is None:
        return {}
    try:
        names = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # our own file, damaged: names are for people only
        log.warning("1C exchange: the products' names in %s are not readable: %s", path, exc)
        return {}
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


def save_session_names(path: Path, names: Mapping[str, str]) -> None:
    """Keep ``names`` for the exchange's next files, in its folder (gone with the exchange:
    ``complete``, or the next ``init``): written whole, then renamed over the last."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(names, ensure_ascii=False), "utf-8")
    os.replace(part, path)


# -- the exchanges operators see -------------------------------------------------------------


def exchange_started(engine: Engine, exchange: str, filename: str) -> int:
    now = _now()
    with transaction(engine) as connection:
        row_id = connection.execute(
            insert(cml_exchanges)
            .values(
                exchange=exchange,
                filename=shortened(filename, SOURCE_REF_CHARS),
                started_at=now,
                heartbeat_at=now,
            )
            .returning(cml_exchanges.c.id)
        ).scalar_one()
    return int(row_id)


INTERRUPTED = (
    "interrupted: the serve process running this import stopped before it finished; if 1C's "
    "exchange failed, 1C sends the file again, and a package staged before the stop is "
    "recognised and not staged twice"
)


def exchanges_alive(engine: Engine, row_ids: list[int], now: datetime) -> None:
    """The heartbeat of the imports this process runs: one UPDATE for all of them."""
    if not row_ids:
        return
    with transaction(engine) as connection:
        connection.execute(
            update(cml_exchanges)
            .where(cml_exchanges.c.id.in_(row_ids), cml_exchanges.c.finished_at.is_(None))
            .values(heartbeat_at=now)
        )


def close_interrupted(engine: Engine, now: datetime, silent_for: float) -> int:
    """Close as ``interrupted`` the unfinished entries whose heartbeat (or start, for entries
    older than the heartbeat) is older than ``silent_for`` seconds: their serve process died.
    Any serve process may do it for all: a live one renews its imports' heartbeats well
    within that time. Returns how many were closed."""
    since = now - timedelta(seconds=silent_for)
    beat = func.coalesce(cml_exchanges.c.heartbeat_at, cml_exchanges.c.started_at)
    with transaction(engine) as connection:
        closed = connection.execute(
            update(cml_exchanges)
            .where(cml_exchanges.c.finished_at.is_(None), beat < since)
            .values(finished_at=now, outcome="interrupted", detail=INTERRUPTED)
        ).rowcount
    return int(closed or 0)


def exchange_finished(engine: Engine, row_id: int, outcome: Outcome) -> None:
    with transaction(engine) as connection:
        connection.execute(
            update(cml_exchanges)
            .where(cml_exchanges.c.id == row_id)
            .values(
                finished_at=_now(),
                outcome=outcome.outcome,
                detail=outcome.detail[:2000],
                intents=outcome.intents,
                not_sent=outcome.not_sent,
                version=outcome.version,
            )
        )


def exchange_refused(engine: Engine, exchange: str, filename: str, detail: str) -> None:
    """A request refused before any file work (wrong password, unknown mode, a name that
    leaves the exchange's folder, an oversized upload): one finished ``failure`` entry."""
    now = _now()
    with transaction(engine) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange=exchange[:64],
                filename=shortened(filename, SOURCE_REF_CHARS),
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail=detail[:2000],
            )
        )


# -- one file ------------------------------------------------------------------------------


class _Hashing:
    """A binary stream that hashes what is read from it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        block = self.stream.read(size)
        self.sha.update(block)
        return block

    def hexdigest(self) -> str:
        while self.read(1 << 20):  # what the parser left unread, if anything
            pass
        return self.sha.hexdigest()


def digest_of(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def import_file(
    engine: Engine,
    path: Path,
    *,
    name: str,
    price_types: Mapping[str, str],
    sku_mode: SkuMode,
    progress: Callable[[int, int], None] | None = None,
    staging_engine: Engine | None = None,
    pool: ReaderPool | None = None,
    session_names: Path | None = None,
    exchange: str | None = None,
) -> Outcome:
    """Parse ``path`` (``name`` as 1C called it) and stage what it carries, into ``staging_engine``
    when staging has a database of its own. ``session_names``: the file that keeps the products'
    names (``Товар``/``Наименование``) of the catalogue files of this 1C exchange
    (``import.xml``, which 1C sends before ``offers.xml``), for the offers that carry no name of
    their own; read before, and added to after, this file. ``exchange``: the 1C exchange
    (session) it belongs to, for ``publish``'s order of packages. With a ``pool`` the file is
    read in a process of its own while what it has read so far is staged (PostgreSQL: by the
    publishing transaction; SQLite: into the scratch file, the transaction after the read): the
    one place that chooses; without, it is read here first. Never raises for bad data: a file
    that cannot be read is a ``failure`` Outcome with a one-line reason."""
    spool = path.with_name(path.name + SPOOL_SUFFIX)
    spool.unlink(missing_ok=True)
    spool.touch()
    scratch = path.with_name(path.name + SCRATCH_SUFFIX)
    scratch.unlink(missing_ok=True)
    types, articles = load_catalogue(engine, articles=sku_mode == "article")
    names = load_session_names(session_names)
    target = staging_engine if staging_engine is not None else engine
    found: list[Read] = []
    try:
        if pool is None:
            with path.open("rb") as raw:
                stream = _Hashing(raw)  # the digest in the same pass as the parse
                read = read_into_spool(
                    path, spool, price_types, sku_mode, types, articles, names, progress, stream
                )
                digest = stream.hexdigest()
            found.append(read)
            early = _judge(read)
            if early is not None:
                return early
            result = publish(
                engine,
                spool,
                digest,
                name,
                staging_engine=staging_engine,
                read=lambda: read,
                exchange=exchange,
            )
        else:
            digest = digest_of(path)
            with transaction(target, read_only=True) as connection:
                before = _staged_before(connection, digest)
            if before is not None:
                return _nothing_new(before)
            future = pool.submit(path, spool, price_types, sku_mode, types, articles, names)

            def finish() -> Read:
                found.append(pool.result(future))
                return found[-1]

            if is_postgres(target):  # stage each frame while the rest is read
                result = publish(
                    engine,
                    spool,
                    digest,
                    name,
                    staging_engine=staging_engine,
                    read=finish,
                    exchange=exchange,
                    done=future.done,
                    progress=progress,
                )
            else:  # SQLite: the rows into a scratch file while the rest is read, its one
                # writer's lock only for the short transaction that copies them, after
                _into_scratch(spool, scratch, future.done, progress)
                read = finish()
                early = _judge(read)
                if early is not None:
                    return early
                result = publish(
                    engine,
                    spool,
                    digest,
                    name,
                    staging_engine=staging_engine,
                    read=lambda: read,
                    exchange=exchange,
                    scratch=scratch,
                )
        if isinstance(result, Outcome):
            return result
        if not result.fresh:
            return _nothing_new(result.version, found[-1] if found else None)
        counts = found[-1].counts
        counts.repeated = result.repeated
        counts.owned_elsewhere = result.owned
        return Outcome(
            "staged", counts.summary(), counts.intents, _not_sent(counts), result.version
        )
    except CmlError as exc:
        return Outcome("failure", str(exc))
    except ReaderCrashed as exc:
        log.error("1C import of %s: %s", name, exc)
        return Outcome("failure", str(exc))
    finally:
        spool.unlink(missing_ok=True)
        scratch.unlink(missing_ok=True)
        if found and (found[-1].new_types or found[-1].new_articles):
            with transaction(engine) as connection:  # after the staging transaction ended
                save_catalogue(connection, found[-1].new_types, found[-1].new_articles)
        if found and found[-1].new_names and session_names is not None:
            save_session_names(session_names, {**names, **found[-1].new_names})


def _into_scratch(
    spool: Path,
    scratch: Path,
    done: Callable[[], bool],
    progress: Callable[[int, int], None] | None,
) -> None:
    """The spool's rows, frame by frame as the reader writes them (until ``done()``), into
    ``scratch``: a SQLite file of this import's own, never the service's database, so no lock
    of the service's is held meanwhile. No journal, no sync: it is thrown away after the
    publishing transaction, or when this import fails."""
    with contextlib.closing(sqlite3.connect(scratch, isolation_level=None)) as rows:
        rows.execute("PRAGMA journal_mode=OFF")
        rows.execute("PRAGMA synchronous=OFF")
        rows.execute(
            f"CREATE TABLE {SCRATCH_TABLE} "
            "(aggregate TEXT NOT NULL, payload TEXT NOT NULL, name TEXT)"
        )
        rows.execute("BEGIN")
        for _, chunk in frames(spool, done, progress):
            rows.executemany(f"INSERT INTO {SCRATCH_TABLE} VALUES (?, ?, ?)", chunk)
        rows.execute("COMMIT")


def _not_sent(counts: Counts) -> int:
    return counts.not_sent()


def _nothing_new(version: int, read: Read | None = None) -> Outcome:
    return Outcome(
        "nothing-new",
        f"this file was staged before (package version {version}): nothing new",
        not_sent=_not_sent(read.counts) if read is not None else 0,
        version=version,
    )


def _judge(read: Read) -> Outcome | None:
    """The outcome of a file that stages nothing; None for one that stages its rows."""
    header = read.header
    if not header.offers_package and not header.catalogue:
        return Outcome("failure", "not a CommerceML offers or catalogue file: nothing to read")
    if not header.offers_package:
        return Outcome(
            "catalogue",
            f"catalogue read: {len(read.new_types)} price types, "
            f"{len(read.new_articles)} articles kept",
        )
    if read.failure is not None:
        return Outcome("failure", read.failure, not_sent=read.counts.prices)
    if read.counts.intents == 0:
        return Outcome("nothing", read.counts.summary(), not_sent=_not_sent(read.counts))
    return None


def _source_ref(name: str, generated_at: str) -> str:
    """The package's own source_ref: its file name shortened with «…» to fit (contract 15),
    the date it was made kept whole."""
    when = f" {generated_at}" if generated_at else ""
    room = SOURCE_REF_CHARS - len("1C exchange ") - len(when)
    return shortened(f"1C exchange {shortened(name, max(room, 1))}{when}", SOURCE_REF_CHARS)


def _next_version(connection: Connection, queue: Engine | None) -> tuple[int, int]:
    """The package's version and the mark to keep with it: above every package before and
    every ``price`` version the queue and the staging table hold (the whole sequence, so it is
    known before the package's aggregates are read). ``connection`` is the staging database's;
    ``queue`` the service's database when it is another one.

    The queue's part is read incrementally, never by a scan of ``messages`` (it grows with the
    history): the newest package keeps ``messages_mark``, and every price message with an id at
    or below it has a version at or below that package's version (proved in
    docs/architecture.md, "A package's version"), so only ``messages.id > mark`` is read, a range
    of the primary key. The order of the three reads is what makes the mark safe: the new mark
    is read first, then the untaken staging rows, then the messages above the old mark. A
    message whose id is at or below the new mark but that commits later was taken from a staging
    row that the second read still sees untaken, or it has committed before the third read sees
    it. Without a mark (the first package, or packages staged before the mark existed), or when
    the service's ids went back below it (another database), ``messages`` is read whole,
    once.

    Versions from PACKAGE_VERSIONS_FROM up that older releases let in through the table or the
    JSON intake are not counted (one at 2^63-1 would leave no number for any package, ever:
    ``exchange migrate`` names the aggregates that hold one), nor a package that already holds
    the largest BIGINT; a package's own number from 2^62 up is counted, for such numbers are
    the packages'."""
    highest = (
        connection.execute(
            select(func.max(cml_packages.c.version)).where(cml_packages.c.version < MAX_VERSION)
        ).scalar()
        or 0
    )
    previous = connection.execute(
        select(cml_packages.c.messages_mark).order_by(cml_packages.c.id.desc()).limit(1)
    ).scalar()
    if queue is None:
        mark = _messages_mark(connection)
        untaken = _untaken_version(connection)
        known = _queue_version(connection, _usable(previous, mark))
    else:
        with transaction(queue, read_only=True) as main:
            mark = _messages_mark(main)
        untaken = _untaken_version(connection)
        with transaction(queue, read_only=True) as main:  # a snapshot after the staging read
            known = _queue_version(main, _usable(previous, mark))
    return max(highest, untaken, known) + 1, mark


def _usable(previous: int | None, mark: int) -> int | None:
    """The previous package's mark, unless the service's ids are now below it (its database
    was replaced or restored): then nothing is known about them."""
    return previous if previous is not None and previous <= mark else None


def _messages_mark(connection: Connection) -> int:
    """The highest id in ``messages`` (the primary key's last entry)."""
    return int(connection.execute(select(func.max(messages.c.id))).scalar() or 0)


def _untaken_version(connection: Connection) -> int:
    """The highest ``price`` version waiting in staging (the untaken rows' partial index)."""
    untaken = connection.execute(
        select(func.max(staging.c.aggregate_version)).where(
            staging.c.taken_at.is_(None),
            staging.c.kind == "price",
            staging.c.aggregate_version < PACKAGE_VERSIONS_FROM,
        )
    ).scalar()
    return int(untaken or 0)


def _queue_version(connection: Connection, after: int | None) -> int:
    """The highest ``price`` version of the messages above ``after`` (every message when
    ``after`` is None) and of every price's ``done_version`` on every channel in use (contract
    13: each channel has its own cursor, and the second shop may be ahead of the first): a
    message above the mark may have been delivered and pruned since, and its version lives on
    only there. That read is of ``channel_aggregates``, one row per price and channel, which
    grows with the catalogue, not the history. The messages first: one pruned before that read
    had its cursor committed before the prune, so before the second read."""
    query = select(func.max(messages.c.version)).where(
        messages.c.kind == "price", messages.c.version < PACKAGE_VERSIONS_FROM
    )
    if after is not None:
        query = query.where(messages.c.id > after)
    sent = connection.execute(query).scalar()
    cursor = channel_aggregates.c
    done = connection.execute(
        select(func.max(cursor.done_version))
        .join(aggregates, aggregates.c.id == cursor.aggregate_id)
        .join(channels, channels.c.id == cursor.channel_id)
        .where(
            aggregates.c.kind == "price",
            cursor.done_version < PACKAGE_VERSIONS_FROM,
            channels.c.dropped_at.is_(None),
        )
    ).scalar()
    return int(max(sent or 0, done or 0))


class _Abandon(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


def publish(
    engine: Engine,
    spool: Path,
    digest: str,
    name: str,
    *,
    read: Callable[[], Read],
    staging_engine: Engine | None = None,
    done: Callable[[], bool] = lambda: True,
    progress: Callable[[int, int], None] | None = None,
    scratch: Path | None = None,
    exchange: str | None = None,
) -> Published | Outcome:
    """Stage the spool's rows in one transaction of the staging database with one new version
    as they are written (until ``done()``), then take ``read()`` (what the reader found; it
    raises for a file that cannot be read, and the transaction rolls back), record the
    package's digest and its repeated aggregates with them and commit: ``Published``. With
    ``scratch`` (SQLite: the rows already copied there by ``_into_scratch``) the spool is not
    read: the transaction copies the scratch file's rows, attached to its connection, in one
    statement. When a
    package with this digest was staged before: its version, not ``fresh``, nothing staged. A
    file that stages nothing: its ``Outcome``. A package formed (``ДатаФормирования``) before
    one another exchange than ``exchange`` already staged: a ``failure`` Outcome, nothing
    staged (``_formed_before``)."""
    target = staging_engine if staging_engine is not None else engine
    queue = engine if target is not engine else None
    attach = (SCRATCH, scratch) if scratch is not None else None
    try:
        with transaction(target, attach=attach) as connection:
            if is_postgres(connection):
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PUBLISH_LOCK})
            seen = _staged_before(connection, digest)
            if seen is not None:
                return Published(seen, False)
            version, mark = _next_version(connection, queue)
            # Every row this transaction stages gets an id above it (the sequence moves on).
            before = connection.execute(select(func.max(staging.c.id))).scalar() or 0
            if scratch is None:
                for generated_at, chunk in frames(spool, done, progress):
                    source_ref = _source_ref(name, generated_at)
                    rows: list[Row] = [
                        ("price", aggregate, version, payload, "1", source_ref, name)
                        for aggregate, payload, name in chunk
                    ]
                    stage_many(connection, rows)
            found = read()
            abandoned = _judge(found)
            if abandoned is not None:
                raise _Abandon(abandoned)
            formed = formed_at(found.header.generated_at)
            older = _formed_before(connection, formed, exchange)
            if older is not None:
                raise _Abandon(older)
            if scratch is not None:  # the header comes before any row: the frames' date
                stage_attached(
                    connection,
                    f"{SCRATCH}.{SCRATCH_TABLE}",
                    kind="price",
                    version=version,
                    schema_version="1",
                    source_ref=_source_ref(name, found.header.generated_at),
                )
            repeated = _record_repeats(connection, version, before, found.repeated, found.shadowed)
            owned = _owned_elsewhere(connection, queue, version, before)
            connection.execute(
                insert(cml_packages).values(
                    digest=digest,
                    version=version,
                    source_ref=_source_ref(name, found.header.generated_at),
                    intents=found.counts.intents,
                    staged_at=_now(),
                    messages_mark=mark,
                    formed_at=formed,
                    exchange=exchange[:64] if exchange else None,
                )
            )
            staged = Published(version, True, repeated, owned)
    except _Abandon as abandoned:  # rolled back: nothing of it staged
        return abandoned.outcome
    except IntegrityError:  # another process staged the same file a moment ago
        with transaction(target, read_only=True) as connection:
            seen = _staged_before(connection, digest)
        if seen is None:
            raise
        return Published(seen, False)
    announce_staged(engine)
    return staged


# More aggregates read again than this are not named in the read (one parameter each): the
# package's rows are then grouped whole.
REPEATS_NAMED = 1000


# What ``cml_package_repeats`` keeps for an aggregate whose last offer in the package holds a
# price that is not sent (not of the base unit): no price intake accepts, so every offer of
# the aggregate before it is «повтор в пакете» (the later offer wins whatever it holds).
LATER_NOT_SENT = '{"later_offer":"not sent: not of the base unit"}'


def _record_repeats(
    connection: Connection,
    version: int,
    before: int,
    candidates: set[str],
    shadowed: AbstractSet[str],
) -> int:
    """Within one package, two offers that map to one aggregate (two goods sharing an
    Артикул, one Ид twice): the later in document order (the higher staging id) wins (contract
    15), whatever it holds. Records each such aggregate of the package with its last offer's
    payload (``cml_package_repeats``, which intake reads beside ``cml_packages``: an earlier
    offer of another price becomes an ``invalid-contract`` record, «повтор в пакете»; a later
    one intake refuses itself, e.g. currency ``XX``, leaves nothing of the aggregate sent) and
    returns how many earlier offers of another price are not sent. ``shadowed``: the
    aggregates whose last offer holds a price not sent and not written (``Mapper.shadowed``),
    recorded with ``LATER_NOT_SENT``, so none of their rows is sent. ``candidates``: the
    aggregates the reader wrote more than once (``Mapper.repeated``); none, the usual case,
    and nothing is read. Else one grouped read of the package's rows of those aggregates in
    the publishing transaction: a range of the primary key above ``before`` (the highest id
    before they were staged), whatever the table keeps of older rows."""
    if not candidates and not shadowed:
        return 0
    if shadowed:
        connection.execute(
            insert(cml_package_repeats),
            [
                {"version": version, "aggregate": aggregate, "payload": LATER_NOT_SENT}
                for aggregate in sorted(shadowed)
            ],
        )
    candidates = candidates | shadowed
    own = and_(
        staging.c.id > before,
        staging.c.taken_at.is_(None),
        staging.c.kind == "price",
        staging.c.aggregate_version == version,
    )
    if len(candidates) <= REPEATS_NAMED:
        own = and_(own, staging.c.aggregate.in_(sorted(candidates)))
    last = (
        select(func.max(staging.c.id).label("id"))
        .where(own)
        .group_by(staging.c.aggregate)
        .having(func.count() > 1)
        .subquery()
    )
    connection.execute(
        insert(cml_package_repeats).from_select(
            ["version", "aggregate", "payload"],
            select(literal(version, BigInteger()), staging.c.aggregate, staging.c.payload).where(
                staging.c.id.in_(select(last.c.id)),
                staging.c.aggregate.not_in(sorted(shadowed)),
            ),
        )
    )
    earlier = connection.execute(
        select(staging.c.payload, cml_package_repeats.c.payload)
        .join_from(
            staging,
            cml_package_repeats,
            and_(
                cml_package_repeats.c.version == version,
                cml_package_repeats.c.aggregate == staging.c.aggregate,
            ),
        )
        .where(own, staging.c.payload != cml_package_repeats.c.payload)
    )
    return sum(1 for mine, winner in earlier if not same_payload("price", winner, mine))


def _owned_elsewhere(
    connection: Connection, queue: Engine | None, version: int, before: int
) -> int:
    """How many of the package's rows name an (sku, price type) that another aggregate owns
    (contract 15, ``price_owners``: e.g. the JSON intake's ``SKU-17`` before 1C's
    ``SKU-17/retail``): intake refuses them, so 1C is told they are not sent. A package's
    aggregate is ``<sku>/<price type>``, so only the owners named otherwise can refuse one:
    those are read (the service's database), none in the usual case, and then nothing else
    is; else the package's rows (a range of the primary key above ``before``) are compared
    with them once. An owner that claims a pair after this read is still refused at intake,
    and the exchange's page shows it (``ops.exchanges.refused_by_document``)."""
    named = price_owners.c.sku + "/" + price_owners.c.price_type
    foreign = select(named).where(price_owners.c.aggregate != named)
    if queue is None:
        taken = {str(name) for (name,) in connection.execute(foreign)}
    else:
        with transaction(queue, read_only=True) as main:
            taken = {str(name) for (name,) in main.execute(foreign)}
    if not taken:
        return 0
    rows = connection.execute(
        select(staging.c.aggregate).where(
            staging.c.id > before,
            staging.c.kind == "price",
            staging.c.aggregate_version == version,
        )
    )
    return sum(1 for (aggregate,) in rows if aggregate in taken)


def formed_at(generated_at: str) -> str | None:
    """The root's ``ДатаФормирования`` as ``YYYY-MM-DDTHH:MM:SS`` (text order is time order),
    None when there is none or it is not a date: such a package is numbered by its arrival,
    as before. 1C writes its local time without a zone, and it is compared as written; a time
    with a zone is taken to UTC."""
    try:
        when = datetime.fromisoformat(generated_at.strip())
    except ValueError:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


def _formed_before(
    connection: Connection, formed: str | None, exchange: str | None
) -> Outcome | None:
    """Contract 9a, versions: a later package wins, so a package 1C formed before one already
    staged by another exchange (an exchange that failed and is run again after a newer one,
    two nodes of one base) must not overwrite it: refused, with the newer package named.
    The files of one exchange (offers and prices, parts of one unload) are one unload and
    never compared with each other; a package without ``ДатаФормирования`` is not compared."""
    if formed is None:
        return None
    newer = and_(cml_packages.c.formed_at.is_not(None), cml_packages.c.formed_at > formed)
    if exchange:
        newer = and_(
            newer,
            (cml_packages.c.exchange.is_(None)) | (cml_packages.c.exchange != exchange[:64]),
        )
    found = connection.execute(
        select(cml_packages.c.formed_at, cml_packages.c.version)
        .where(newer)
        .order_by(cml_packages.c.formed_at.desc())
        .limit(1)
    ).first()
    if found is None:
        return None
    return Outcome(
        "failure",
        f"this package was formed at {formed.replace('T', ' ')}, before a package formed at "
        f"{str(found[0]).replace('T', ' ')} already staged (version {found[1]}): an older "
        "package never overwrites a newer one; nothing staged. Sending this file again changes "
        "nothing: export the current prices from 1C again (a new file, formed now)",
    )


def _staged_before(connection: Connection, digest: str) -> int | None:
    version = connection.execute(
        select(cml_packages.c.version).where(cml_packages.c.digest == digest)
    ).scalar()
    return None if version is None else int(version)


__all__ = [
    "Counts",
    "Outcome",
    "Published",
    "ReaderPool",
    "import_file",
    "load_catalogue",
    "load_session_names",
    "publish",
]
