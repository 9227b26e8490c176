"""What every broker source does alike (contract 12), whatever the broker.

A broker message (a RabbitMQ body, a stream entry's field ``intent``) is one intent, a list of
intents, or ``{"intents": [...]}`` in the shape of 9b, at most ``EXCHANGE_INTAKE_MAX_ITEMS``.
``take`` handles a batch of them in two short transactions, then the source acknowledges:

1. the valid intents of every message are judged and staged through ``intake.intents`` (the
   JSON intake's code): an intent already received, a redelivery after a crash between the
   commit and the acknowledgement among them, is a ``duplicate`` and is staged nothing twice;
2. what cannot be staged (a body that is not intents, an intent the contract refuses) is
   recorded as a quarantine record whose id is the message's own key (the broker's
   ``message_id``, else a digest of the body, or the stream entry's id) and the intent's place
   in it: recorded again, it is the same record, never a second. A producer that reuses an id
   for another body (RabbitMQ's ``message_id`` is the producer's to choose; a stream created
   again numbers its entries anew) gets a second record, ``<key>#<digest of the body>``: every
   refused message leaves a record, and each redelivered one stays one.

Only then may the source acknowledge: a crash before leaves the message to be delivered again.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import StatementError

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import messages
from exchange.domain.policy import Policy
from exchange.domain.reasons import Reason
from exchange.domain.states import Event, State
from exchange.intake.intents import BodyError, intent_row, items_of, parse_body, stage_intents
from exchange.queue.transitions import Change, apply

# What a quarantine record keeps of a body: enough for a person to see what was sent, bounded
# so that a hostile 100 MB body does not become a 100 MB row.
BODY_CAP = 65_536
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")
# What no database holds as text: NUL (PostgreSQL) and a lone UTF-16 surrogate (no UTF-8 for it;
# JSON's "\\ud800" makes one). A surrogate pair in JSON arrives joined, as one code point.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

log = logging.getLogger(__name__)
# What the database (or its driver, before sending) says of one record it will not take.
_REFUSED = (StatementError, UnicodeError, ValueError)
# A pull takes no new message once the bodies it holds pass this many times
# EXCHANGE_SOURCE_MAX_BYTES (contract 15).
MEMORY_FACTOR = 4
# The sources' names (``Source.name``): each record of a source's begins with "<name>-".
SOURCE_NAMES = ("rabbitmq", "redis")


@dataclass(slots=True)
class Received:
    """One broker message: its body and the key its quarantine record is idempotent on."""

    key: str
    body: bytes
    where: str  # for people: the queue or stream, and the broker's id of the message
    # Why the source refuses the message whatever its body says (a field twice), or None.
    refused: str | None = None


@dataclass
class Taken:
    """What ``take`` made of a batch."""

    messages: int = 0
    staged: int = 0
    duplicates: int = 0
    refused: int = 0  # quarantine records (bodies that are not intents, intents refused)
    bad: set[int] = field(default_factory=set)  # indexes of messages that were not intents
    # Indexes of messages whose refusal could not be recorded (logged): never acknowledged, so
    # the broker keeps them, and the rest of the batch goes on.
    unrecorded: set[int] = field(default_factory=set)

    def add(self, more: Taken) -> None:
        """Count ``more`` (one batch of a pull) in this pull's total."""
        self.messages += more.messages
        self.staged += more.staged
        self.duplicates += more.duplicates
        self.refused += more.refused


def log_taken(logger: logging.Logger, source: str, unit: str, total: Taken) -> None:
    """The one line a pull that took anything writes, the same for every source:
    ``rabbitmq: 3 messages: 2 intents staged, 0 duplicates, 1 refused``."""
    if total.messages:
        logger.info(
            "%s: %d %s: %d intents staged, %d duplicates, %d refused",
            source,
            total.messages,
            unit,
            total.staged,
            total.duplicates,
            total.refused,
        )


@dataclass
class Health:
    """Whether a source consumes, and since when it does not (contract 15): each worker tells
    it in its heartbeat (``as_json``), and ``status`` shows it in ``sources[]``; a source not
    consuming is a cause. ``warning`` is what a person should know though it consumes (the
    stream was recreated: entries may have been lost with it). The times are stamps, not
    decisions: the real clock."""

    consuming: bool | None = None  # None: no pull has tried yet
    cause: str | None = None
    since: datetime | None = None
    warning: str | None = None
    warned_at: datetime | None = None

    def stopped(self, cause: str) -> None:
        """Not consuming, because of ``cause`` (the first cause keeps its time)."""
        if self.consuming is not False:
            self.since = datetime.now(UTC)
        self.consuming, self.cause = False, cause

    def started(self) -> bool:
        """Consuming; True when it had stopped (the source says it is back)."""
        again = self.consuming is False
        self.consuming, self.cause, self.since = True, None, None
        return again

    def warn(self, text: str) -> None:
        self.warning, self.warned_at = text, datetime.now(UTC)

    def as_json(self) -> dict[str, Any]:
        return {
            "consuming": self.consuming,
            "cause": self.cause,
            "since": self.since.isoformat() if self.since else None,
            "warning": (
                {"text": self.warning, "since": self.warned_at.isoformat()}
                if self.warning and self.warned_at
                else None
            ),
        }


class Source(Protocol):
    """A broker that ``exchange run`` takes intents from at each cycle's intake."""

    name: str

    async def pull(self) -> Taken:
        """Take what is ready now: stage it, record what is bad, then acknowledge. Raises
        ``BrokerUnavailable`` when the broker cannot be reached (the next cycle tries again,
        after a backoff)."""
        ...

    @property
    def idle(self) -> bool:
        """The last pull found nothing ready (``--until-idle``)."""
        ...

    @property
    def health(self) -> Health:
        """Whether it consumes now (``status``'s ``sources[]``)."""
        ...

    async def figures(self) -> dict[str, Any]:
        """What the source has ready and pending, for ``status``."""
        ...

    async def check(self) -> str:
        """Reach the broker and the queue or stream; ``ConfigurationError`` when they are not
        there, ``BrokerUnavailable`` when the broker does not answer; else one line."""
        ...

    async def aclose(self) -> None: ...


def digest_key(body: bytes) -> str:
    return "sha256-" + hashlib.sha256(body).hexdigest()[:40]


def safe_key(value: str) -> str:
    """A broker's id as a part of a message_id (ASCII, bounded)."""
    readable = _UNSAFE.sub("_", value)[:100]
    if readable != value:
        readable += "-" + hashlib.sha256(value.encode()).hexdigest()[:12]
    return readable


def intents_of(body: bytes, max_items: int) -> list[dict[str, Any] | str]:
    """The intents a body carries, each a staging row or why it cannot be one; ``BodyError``
    when the body is not intents at all."""
    data = parse_body(body, max_items)
    if isinstance(data, dict) and set(data) == {"intents"}:
        data = data["intents"]
        if not isinstance(data, list):
            raise BodyError('"intents" must be a list')
    if isinstance(data, dict):
        return [intent_row(data)]
    if not isinstance(data, list):
        raise BodyError('the body must be an intent, a list of intents or {"intents": [...]}')
    if not data:
        raise BodyError("the body holds no intent")
    if len(data) > max_items:
        raise BodyError(f"at most {max_items} intents per message, not {len(data)}")
    return items_of(data)


@dataclass(slots=True)
class _Refusal:
    record_id: str
    where: str
    detail: str
    reason: str
    text: str
    row: dict[str, Any] | None = None
    index: int = 0  # the message's place in the batch
    # The record's id when ``record_id`` is already another body's (module docstring).
    other_id: str = ""


def _record_ids(source: str, message: Received, n: int | None) -> tuple[str, str]:
    """A refusal's record id, and the one it takes when that id holds another body's record:
    ``<source>-<key>[-<intent>]`` and ``<source>-<key>#<digest>[-<intent>]``, within the 200
    characters of a message id."""
    place = "" if n is None else f"-{n}"
    mark = "#" + hashlib.sha256(message.body).hexdigest()[:16]
    base = f"{source}-{message.key}"
    return base + place, base[: 200 - len(mark) - len(place)] + mark + place


def take(
    engine: Engine,
    staging_engine: Engine | None,
    kinds: dict[str, Policy],
    batch: Sequence[Received],
    *,
    source: str,
    max_items: int,
    max_bytes: int,
) -> Taken:
    """Stage the intents of ``batch`` and record what cannot be staged (module docstring). A
    body over ``max_bytes`` (``EXCHANGE_SOURCE_MAX_BYTES``) is refused unread: never decoded,
    never parsed, its record keeps its size and first bytes."""
    taken = Taken(messages=len(batch))
    rows: list[dict[str, Any] | str] = []
    origin: list[tuple[int, int]] = []  # (message, intent) of each row
    refusals: list[_Refusal] = []
    for index, message in enumerate(batch):
        oversized = len(message.body) > max_bytes
        try:
            if oversized:
                raise BodyError(too_large(len(message.body), max_bytes))
            if message.refused is not None:
                raise BodyError(message.refused)
            found = intents_of(message.body, max_items)
        except BodyError as exc:
            taken.bad.add(index)
            record_id, other_id = _record_ids(source, message, None)
            refusals.append(
                _Refusal(
                    record_id,
                    message.where,
                    str(exc),
                    Reason.INVALID_CONTRACT.value,
                    _text(message.body, read=not oversized),
                    index=index,
                    other_id=other_id,
                )
            )
            continue
        rows += found
        origin += [(index, n) for n in range(len(found))]
    results = stage_intents(engine, staging_engine, kinds, rows) if rows else []
    for result, row, (index, n) in zip(results, rows, origin, strict=True):
        if result["status"] == "staged":
            taken.staged += 1
        elif result["status"] == "duplicate":
            taken.duplicates += 1
        else:
            message = batch[index]
            record_id, other_id = _record_ids(source, message, n)
            refusals.append(
                _Refusal(
                    record_id,
                    f"{message.where}, intent {n}",
                    result["detail"],
                    result["reason"],
                    _text(message.body),
                    row if isinstance(row, dict) else None,
                    index=index,
                    other_id=other_id,
                )
            )
    if refusals:
        taken.refused = _record_each(engine, refusals, source, taken.unrecorded)
    return taken


def _record_each(engine: Engine, refusals: list[_Refusal], source: str, failed: set[int]) -> int:
    """Records the refusals in one transaction; when the database refuses that (not a lost
    connection: that stops the pull, and the broker delivers again), each alone, so that one
    message the database will not take never holds up the others. The messages of a refusal
    that still fails are added to ``failed``, each said in one line."""
    try:
        with transaction(engine) as connection:
            return _record(connection, refusals, source, datetime.now(UTC))
    except _REFUSED as exc:
        if getattr(exc, "connection_invalidated", False):
            raise
    recorded = 0
    for refusal in refusals:
        try:
            with transaction(engine) as connection:
                recorded += _record(connection, [refusal], source, datetime.now(UTC))
        except _REFUSED as exc:
            if getattr(exc, "connection_invalidated", False):
                raise
            failed.add(refusal.index)
            log.error(
                "%s: could not record the refused message (%s: %s); it stays with the broker",
                source,
                storable(refusal.where),
                type(getattr(exc, "orig", None) or exc).__name__,
            )
    return recorded


def too_large(size: int, limit: int) -> str:
    """Why a message over ``EXCHANGE_SOURCE_MAX_BYTES`` is refused (said in Russian by
    ``words.detail_words``)."""
    return f"the message is {size} bytes, more than EXCHANGE_SOURCE_MAX_BYTES ({limit}): not read"


def storable(text: str) -> str:
    """``text`` as every database holds it: NUL and lone surrogates as U+FFFD (contract 15)."""
    return _UNSTORABLE.sub("\ufffd", text)


def _text(body: bytes, *, read: bool = True) -> str:
    """What a record keeps of a body, bounded: its text, or ``{"raw_base64": ...}`` when it is
    not UTF-8 (contract 15); a body refused unread (``read`` false: too large) keeps only its
    first bytes as base64 and its size, never decoded."""
    if read:
        head = body[: BODY_CAP * 4]
        try:  # incremental: a head cut inside a character is still UTF-8
            text = codecs.getincrementaldecoder("utf-8")().decode(head, final=head == body)
        except UnicodeDecodeError:
            pass
        else:
            text = storable(text)
            if len(text) <= BODY_CAP and len(head) == len(body):
                return text
            return f"{text[:BODY_CAP]} [cut, {digest_key(body)}]"
    raw = body[: (BODY_CAP * 3 // 4 - 128) if read else 1024]
    kept: dict[str, Any] = {"raw_base64": base64.b64encode(raw).decode("ascii")}
    if len(raw) < len(body):  # what is kept of two bodies may be alike: their digests differ
        kept["bytes"] = len(body)
        kept["sha256"] = digest_key(body).removeprefix("sha256-")
    return json.dumps(kept)


def _record(connection: Connection, refusals: list[_Refusal], source: str, now: datetime) -> int:
    """Records ``refusals``, each once (module docstring): a refusal whose id holds a record of
    another body (its payload differs: a body is kept whole, or cut with its digest) is recorded
    under its ``other_id``, which a redelivery of it then finds."""
    inserted = _insert(connection, refusals, [r.record_id for r in refusals], source, now)
    ids = [storable(r.record_id[:200]) for r in refusals]
    held = [(r, i) for r, i in zip(refusals, ids, strict=True) if i not in inserted]
    if held:
        found = connection.execute(
            select(messages.c.message_id, messages.c.payload).where(
                messages.c.message_id.in_(sorted({i for _, i in held}))
            )
        )
        payloads = {record_id: payload for record_id, payload in found}
        other = [r for r, i in held if payloads.get(i, r.text) != r.text]
        inserted |= _insert(connection, other, [r.other_id for r in other], source, now)
    return len(inserted)


def _insert(
    connection: Connection, refusals: list[_Refusal], ids: list[str], source: str, now: datetime
) -> dict[str, int]:
    """Inserts a record per refusal under ``ids`` where none is; their ids and keys."""
    if not refusals:
        return {}
    insert = postgresql.insert if is_postgres(connection) else sqlite.insert
    statement = (
        insert(messages)
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(messages.c.id, messages.c.message_id)
    )
    params = []
    for refusal, record_id in zip(refusals, ids, strict=True):
        row = refusal.row or {}
        version = row.get("aggregate_version", 0)
        params.append(
            {
                "message_id": storable(record_id[:200]),
                "aggregate_id": None,
                "rejected": True,
                "kind": storable(str(row.get("kind") or source)[:64]),
                "aggregate": storable(str(row.get("aggregate") or "")[:200]),
                "version": version if -(2**63) <= version < 2**63 else 0,
                "schema_version": storable(str(row.get("schema_version") or "")[:32]),
                "source_ref": storable(str(row.get("source_ref") or refusal.where)[:500]),
                "payload": refusal.text,
                "created_at": now,
                "staging_id": None,
                "taken_at": now,
                "state": State.QUARANTINED.value,
                "reason": refusal.reason,
                "last_error": storable(f"{refusal.where}: {refusal.detail}"),
                "updated_at": now,
            }
        )
    inserted = {mid: pk for pk, mid in connection.execute(statement, params)}
    details = {storable(i[:200]): r for r, i in zip(refusals, ids, strict=True)}
    apply(
        connection,
        [
            Change(
                pk,
                Event.REJECTED,
                None,
                State.QUARANTINED,
                detail=storable(
                    f"{details[mid].reason}: {details[mid].where}: {details[mid].detail}"
                ),
            )
            for mid, pk in inserted.items()
        ],
        now,
    )
    return inserted


def refused_records(connection: Connection, limit: int) -> list[dict[str, Any]]:
    """The bad messages the brokers delivered that wait in the quarantine, newest first: the
    records ``take`` wrote (``<source>-<key>``), for the workbench's exchanges page. Read by
    the state's index: the quarantine is small, the messages table is not."""
    m = messages.c
    rows = connection.execute(
        select(m.message_id, m.created_at, m.reason, m.last_error, m.kind)
        .where(m.state == State.QUARANTINED.value, m.rejected)
        .where(or_(*(m.message_id.startswith(f"{name}-") for name in SOURCE_NAMES)))
        .order_by(m.created_at.desc(), m.id.desc())
        .limit(limit)
    ).mappings()
    return [{**row, "source": row["message_id"].split("-", 1)[0]} for row in rows]
