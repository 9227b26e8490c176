"""One CommerceML file -> staged ``price`` rows: parsed outside any transaction, published in
one short one (contract 9, 9a).

The parse writes its rows to a spool file beside the upload, in pickled chunks of ``CHUNK``
rows (memory stays flat in the file's size; the spool is this process's own file, never one
received); the publishing transaction gives the package its version, stages every row with it
through ``stage_many()`` and records the package's digest, so a package is staged whole or not
at all and the same file sent again stages nothing new.

Staging in a database of its own (``EXCHANGE_STAGING_URL``, contract 1 and 7): the publishing
transaction runs there, and the package's record (``cml_packages``: digest and version) is
written in it with the rows, so the rows and "this file was staged" commit together or not at
all. The versions already used by the queue are read from the service's database first. What
operators see (``cml_exchanges``, in the service's database) is written after that commit: a
crash between the two leaves an unfinished entry, and the same file sent again is answered
"staged before" with the package's version, never staged twice.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import Connection, Engine, func, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import (
    aggregates,
    cml_catalog,
    cml_exchanges,
    cml_packages,
    messages,
    staging,
)
from exchange.intake.commerceml.mapping import Counts, Mapper, SkuMode
from exchange.intake.commerceml.parse import CmlError, Header, PriceType, parse
from exchange.intake.stage import Row, stage_many

CHUNK = 5000
LOOKUP_CHUNK = 5000
PUBLISH_LOCK = 0x1C0E  # PostgreSQL advisory lock: one package gets its version at a time


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
    dialect: Any = postgresql if is_postgres(connection) else sqlite
    for start in range(0, len(rows), CHUNK):
        statement = dialect.insert(cml_catalog)
        statement = statement.on_conflict_do_update(
            index_elements=["kind", "key"],
            set_={
                "name": statement.excluded.name,
                "value": statement.excluded.value,
                "updated_at": statement.excluded.updated_at,
            },
        )
        connection.execute(
            statement, [{**row, "updated_at": now} for row in rows[start : start + CHUNK]]
        )


# -- the exchanges operators see -------------------------------------------------------------


def exchange_started(engine: Engine, exchange: str, filename: str) -> int:
    with transaction(engine) as connection:
        row_id = connection.execute(
            insert(cml_exchanges)
            .values(exchange=exchange, filename=filename[:500], started_at=_now())
            .returning(cml_exchanges.c.id)
        ).scalar_one()
    return int(row_id)


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
                filename=filename[:500],
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
) -> Outcome:
    """Parse ``path`` (``name`` as 1C called it) and stage what it carries, into
    ``staging_engine`` when staging has a database of its own. Never raises for bad data: a
    file that cannot be read is a ``failure`` Outcome with a one-line reason."""
    spool = path.with_name(path.name + ".spool")
    types, articles = load_catalogue(engine, articles=sku_mode == "article")
    try:
        with spool.open("wb") as out:
            buffer: list[tuple[str, str]] = []
            append = buffer.append

            def write(aggregate: str, payload: str) -> None:
                append((aggregate, payload))
                if len(buffer) >= CHUNK:
                    pickle.dump(buffer, out, pickle.HIGHEST_PROTOCOL)
                    buffer.clear()

            mapper = Mapper(
                price_types=price_types,
                sku_mode=sku_mode,
                known_types=types,
                articles=articles,
                out=write,
            )
            with path.open("rb") as raw:
                stream = _Hashing(raw)  # the digest in the same pass as the parse
                header = parse(stream, mapper, progress=progress)
                digest = stream.hexdigest()
            if buffer:
                pickle.dump(buffer, out, pickle.HIGHEST_PROTOCOL)
        if not header.offers_package and not header.catalogue:
            return Outcome("failure", "not a CommerceML offers or catalogue file: nothing to read")
        if mapper.new_types or mapper.new_articles:
            with transaction(engine) as connection:
                save_catalogue(connection, mapper.new_types, mapper.new_articles)
        if not header.offers_package:
            return Outcome(
                "catalogue",
                f"catalogue read: {len(mapper.new_types)} price types, "
                f"{len(mapper.new_articles)} articles kept",
            )
        reason = mapper.failure()
        if reason is not None:
            return Outcome("failure", reason, not_sent=mapper.counts.prices)
        counts = mapper.counts
        not_sent = counts.not_base_unit + sum(counts.unmapped.values())
        if counts.intents == 0:
            return Outcome("nothing", counts.summary(), not_sent=not_sent)
        source_ref = _source_ref(name, header)
        version, fresh = publish(
            engine, spool, digest, source_ref, counts.intents, staging_engine=staging_engine
        )
        if not fresh:
            return Outcome(
                "nothing-new",
                f"this file was staged before (package version {version}): nothing new",
                not_sent=not_sent,
                version=version,
            )
        return Outcome("staged", counts.summary(), counts.intents, not_sent, version)
    except CmlError as exc:
        return Outcome("failure", str(exc))
    finally:
        spool.unlink(missing_ok=True)


def _source_ref(name: str, header: Header) -> str:
    when = f" {header.generated_at}" if header.generated_at else ""
    return f"1C exchange {name}{when}"[:500]


def _spooled(spool: Path) -> Iterator[list[tuple[str, str]]]:
    """The spool's chunks of (aggregate, payload), as ``import_file`` wrote them."""
    with spool.open("rb") as chunks:
        while True:
            try:
                yield pickle.load(chunks)  # our own spool, written just now
            except EOFError:
                return


def _highest_version(connection: Connection, spool: Path, queue: Engine | None) -> int:
    """Above every package before and every version seen of the aggregates it touches.
    ``connection`` is the staging database's; ``queue`` the service's database when it is
    another one (its messages and aggregates are read there)."""
    highest = connection.execute(select(func.max(cml_packages.c.version))).scalar() or 0
    untaken = connection.execute(
        select(func.max(staging.c.aggregate_version)).where(
            staging.c.taken_at.is_(None), staging.c.kind == "price"
        )
    ).scalar()
    highest = max(highest, untaken or 0)
    if queue is None:
        return max(highest, _queue_version(connection, spool))
    with transaction(queue, read_only=True) as main:
        return max(highest, _queue_version(main, spool))


def _queue_version(connection: Connection, spool: Path) -> int:
    highest = 0
    for chunk in _spooled(spool):
        aggregates_ = sorted({aggregate for aggregate, _ in chunk})
        for start in range(0, len(aggregates_), LOOKUP_CHUNK):
            known = connection.execute(
                select(func.max(messages.c.version), func.max(aggregates.c.done_version))
                .select_from(
                    aggregates.outerjoin(messages, messages.c.aggregate_id == aggregates.c.id)
                )
                .where(
                    aggregates.c.kind == "price",
                    aggregates.c.aggregate.in_(aggregates_[start : start + LOOKUP_CHUNK]),
                )
            ).one()
            highest = max(highest, known[0] or 0, known[1] or 0)
    return int(highest)


def publish(
    engine: Engine,
    spool: Path,
    digest: str,
    source_ref: str,
    count: int,
    *,
    staging_engine: Engine | None = None,
) -> tuple[int, bool]:
    """Stage the spooled rows in one transaction of the staging database with one new version,
    recording the package's digest in it: ``(version, True)``. When a package with this digest
    was staged before: ``(its version, False)``, nothing staged."""
    target = staging_engine if staging_engine is not None else engine
    queue = engine if target is not engine else None
    try:
        with transaction(target) as connection:
            if is_postgres(connection):
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PUBLISH_LOCK})
            seen = _staged_before(connection, digest)
            if seen is not None:
                return seen, False
            version = _highest_version(connection, spool, queue) + 1
            for chunk in _spooled(spool):
                rows: list[Row] = [
                    ("price", aggregate, version, payload, "1", source_ref)
                    for aggregate, payload in chunk
                ]
                stage_many(connection, rows)
            connection.execute(
                insert(cml_packages).values(
                    digest=digest,
                    version=version,
                    source_ref=source_ref,
                    intents=count,
                    staged_at=_now(),
                )
            )
            return version, True
    except IntegrityError:  # another process staged the same file a moment ago
        with transaction(target, read_only=True) as connection:
            seen = _staged_before(connection, digest)
        if seen is None:
            raise
        return seen, False


def _staged_before(connection: Connection, digest: str) -> int | None:
    version = connection.execute(
        select(cml_packages.c.version).where(cml_packages.c.digest == digest)
    ).scalar()
    return None if version is None else int(version)


__all__ = ["Counts", "Outcome", "import_file", "load_catalogue", "publish"]
