"""Intents handed in by another system (contract 9b and 12): their shape, judged and staged.

The JSON intake (``web/intents.py``) and the brokers' sources (``intake/sources/``) take the
same intents: each is judged by ``contracts.validate``, the very code that judges a staging
row, and the valid ones are staged in one transaction through ``stage``. Rules that need the
queue's state (a version conflict, an aggregate's sku or price type) are left to intake, as
for a staging row. An intent already received (a message, or a staged row not yet taken,
with the same payload) is a ``duplicate`` and is staged nothing twice.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import messages, staging
from exchange.db.wake import announce_staged
from exchange.domain.identity import message_id
from exchange.domain.policy import Policy
from exchange.intake.contracts import (
    MAX_NESTING,
    Accepted,
    DuplicateKey,
    Rejected,
    StagingRow,
    dump_json,
    measure,
    product_name,
    unique_keys,
    validate,
)
from exchange.intake.stage import stage
from exchange.intake.staging_store import settle_ids

FIELDS = frozenset(
    {"kind", "aggregate", "aggregate_version", "payload", "schema_version", "source_ref", "name"}
)


# How deep a body may nest before it is parsed at all: a payload's own limit (MAX_NESTING,
# judged per intent, with the staging rows' rules) and the envelope ({"intents": [{"payload":
# ...}]}), with room to spare; well below what Python's recursive JSON parser survives, so no
# body can make it raise RecursionError.
MAX_BODY_NESTING = 256
# How many arrays and objects, and values and keys (counted as the commas and colons between
# them), a body may hold per intent it may carry, counted on the text before it is parsed
# (R3-1): ``json.loads`` holds the GIL for a whole parse, and a body within the byte limit but
# of millions of tiny arrays or numbers takes seconds (mostly creating and collecting them),
# during which serve answers no one. A price intent holds 2 objects and about 20 values and
# keys; a financial posting's lines are an object of a few values each. The budget is the
# body's, shared by its intents, and never less than MIN_BODY_INTENTS intents' worth (16,384
# arrays and objects, 65,536 values: a posting of some 6,000 lines, as dense as the 1 MiB
# the byte limit allows at least). Parsing a full budget (1,000 intents) takes about 0.2 s.
CONTAINERS_PER_INTENT = 256
VALUES_PER_INTENT = 1024
MIN_BODY_INTENTS = 64


class BodyError(ValueError):
    """The body is not the shape that carries intents."""


class BodyTooLarge(BodyError):
    """The body holds more arrays, objects or values than its item limit allows."""


def parse_body(raw: bytes, max_items: int) -> Any:
    """A body of at most ``max_items`` intents as JSON, or BodyError with one line: not UTF-8,
    nested beyond MAX_BODY_NESTING, holding more arrays, objects or values than
    ``max_items`` intents may (BodyTooLarge; both measured on the text, before any parsing),
    not JSON, or a key twice."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("the body is not UTF-8 text") from None
    budget = max(max_items, MIN_BODY_INTENTS)
    max_containers = budget * CONTAINERS_PER_INTENT
    max_values = budget * VALUES_PER_INTENT
    shape = measure(text, max_containers, max_values)
    if shape.containers > max_containers:
        raise BodyTooLarge(
            f"the body holds more than {max_containers} arrays and objects, the most "
            f"{max_items} intents may ({CONTAINERS_PER_INTENT} per intent)"
        )
    if shape.values > max_values:
        raise BodyTooLarge(
            f"the body holds more than {max_values} values and keys, the most {max_items} "
            f"intents may ({VALUES_PER_INTENT} per intent)"
        )
    depth = shape.depth
    if depth > MAX_BODY_NESTING:
        raise BodyError(
            f"the body nests {depth} levels deep, more than the {MAX_BODY_NESTING} allowed (a "
            f"payload may nest at most {MAX_NESTING})"
        )
    try:
        return json.loads(text, parse_float=Decimal, parse_int=int, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise BodyError(f"the body names key {exc.key!r} twice in one object") from None
    except ValueError as exc:
        raise BodyError(f"the body is not JSON: {exc}") from None


def rows_of(body: Any) -> list[dict[str, Any] | str]:
    """Each intent of a 9b body (``{"intents": [...]}``) as a staging row (column -> value),
    or the reason it cannot be one."""
    if (
        not isinstance(body, dict)
        or set(body) != {"intents"}
        or not isinstance(body["intents"], list)
    ):
        raise BodyError('the body must be {"intents": [...]}')
    return items_of(body["intents"])


def items_of(items: list[Any]) -> list[dict[str, Any] | str]:
    rows: list[dict[str, Any] | str] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BodyError(f"intents[{index}] is not an object")
        rows.append(intent_row(item))
    return rows


def _too_large(payload: str) -> str | None:
    """Why a payload given as text holds too much to parse (one intent: at most what the
    smallest body's budget allows, MIN_BODY_INTENTS intents' worth), or None."""
    most_containers = MIN_BODY_INTENTS * CONTAINERS_PER_INTENT
    most_values = MIN_BODY_INTENTS * VALUES_PER_INTENT
    shape = measure(payload, most_containers, most_values)
    if shape.containers > most_containers:
        return f"payload holds more than {most_containers} arrays and objects"
    if shape.values > most_values:
        return f"payload holds more than {most_values} values and keys"
    return None


def intent_row(item: dict[str, Any]) -> dict[str, Any] | str:
    """One intent as a staging row, or why its fields cannot be one."""
    unknown = set(item) - FIELDS
    if unknown:
        return f"unknown fields: {', '.join(sorted(unknown))}"
    kind, aggregate = item.get("kind"), item.get("aggregate")
    version, payload = item.get("aggregate_version"), item.get("payload")
    schema_version, source_ref = item.get("schema_version", "1"), item.get("source_ref")
    if not isinstance(kind, str) or not kind or len(kind) > 64:
        return "kind must be a string of 1 to 64 characters"
    if not isinstance(aggregate, str) or len(aggregate) > 200:
        return "aggregate must be a string of at most 200 characters"
    if type(version) is not int or not -(2**63) <= version < 2**63:
        return "aggregate_version must be an integer"
    if isinstance(payload, dict):
        payload = dump_json(payload)  # safe: the body's nesting was bounded before parsing
    elif not isinstance(payload, str):
        return "payload must be a JSON object (or its text)"
    elif (refused := _too_large(payload)) is not None:  # parsed later, in one json.loads
        return refused
    if not isinstance(schema_version, str) or len(schema_version) > 32:
        return "schema_version must be a string of at most 32 characters"
    if source_ref is not None and (not isinstance(source_ref, str) or len(source_ref) > 500):
        return "source_ref must be a string of at most 500 characters"
    name = item.get("name")  # contract 1: the product's name, for people, never sent
    if name is not None and (not isinstance(name, str) or len(name) > 500):
        return "name must be a string of at most 500 characters"
    return {
        "kind": kind,
        "aggregate": aggregate,
        "aggregate_version": version,
        "payload": payload,
        "schema_version": schema_version,
        "source_ref": source_ref,
        "name": product_name(name),
    }


def stage_intents(
    engine: Engine,
    staging_engine: Engine | None,
    kinds: dict[str, Policy],
    rows: list[dict[str, Any] | str],
) -> list[dict[str, Any]]:
    """Judge ``rows`` (from ``rows_of`` / ``items_of``) and stage the valid new ones in one
    transaction; one result per row, in order: ``staged``, ``duplicate`` or ``rejected`` (with
    ``reason`` and ``detail``). ``staging_engine``: staging_intents in a database of its own
    (``EXCHANGE_STAGING_URL``); messages are read in ``engine``'s."""
    separate = staging_engine if staging_engine is not engine else None
    now = datetime.now(UTC)
    results: list[dict[str, Any]] = []
    verdicts: list[Accepted | Rejected | str] = []
    for row in rows:
        if isinstance(row, str):
            verdicts.append(row)
            continue
        verdicts.append(
            validate(
                StagingRow(
                    id=0,
                    kind=row["kind"],
                    aggregate=row["aggregate"],
                    aggregate_version=row["aggregate_version"],
                    payload=row["payload"],
                    schema_version=row["schema_version"],
                    source_ref=row["source_ref"],
                    created_at=now,
                ),
                kinds,
            )
        )
    to_stage: list[dict[str, Any]] = []
    if separate is not None:
        with transaction(engine, read_only=True) as main:
            verdicts = settle_ids(main, verdicts)  # an id made before 2026-12 stays its own
            known = _known_messages(main, [v for v in verdicts if isinstance(v, Accepted)])
    with transaction(separate or engine) as connection:
        if separate is None:
            verdicts = settle_ids(connection, verdicts)
            known = _known_messages(connection, [v for v in verdicts if isinstance(v, Accepted)])
        accepted = [v for v in verdicts if isinstance(v, Accepted)]
        _known_untaken(connection, accepted, kinds, known)
        for verdict, row in zip(verdicts, rows, strict=True):
            if isinstance(verdict, str):
                results.append(
                    {"status": "rejected", "reason": "invalid-contract", "detail": verdict}
                )
            elif isinstance(verdict, Rejected):
                assert isinstance(row, dict)
                result = {"status": "rejected"}
                # No id for text that is not Unicode (a lone surrogate): it has no bytes to
                # hash, and the reason says what is wrong.
                with contextlib.suppress(UnicodeEncodeError):
                    result["message_id"] = message_id(
                        row["kind"], row["aggregate"], row["aggregate_version"]
                    )
                results.append({**result, "reason": verdict.reason.value, "detail": verdict.detail})
            elif _identity(verdict.payload) in known.get(verdict.message_id, ()):
                results.append({"status": "duplicate", "message_id": verdict.message_id})
            else:
                assert isinstance(row, dict)
                known.setdefault(verdict.message_id, set()).add(_identity(verdict.payload))
                to_stage.append(row)
                results.append({"status": "staged", "message_id": verdict.message_id})
        if to_stage:
            stage(connection, to_stage)
    if to_stage:
        announce_staged(engine)
    return results


def _identity(payload: str) -> str:
    """What makes two canonical payloads the same: prices equal as decimals (contract 1)."""
    data = json.loads(payload, parse_float=Decimal)
    if isinstance(data, dict) and isinstance(data.get("price"), str):
        with contextlib.suppress(ArithmeticError):
            data["price"] = str(Decimal(data["price"]).normalize())
    return dump_json(data)


def _known_messages(connection: Any, accepted: list[Accepted]) -> dict[str, set[str]]:
    """Canonical payloads already received as messages, by message_id."""
    known: dict[str, set[str]] = {}
    ids = [a.message_id for a in accepted]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for mid, payload in connection.execute(
            select(messages.c.message_id, messages.c.payload).where(
                messages.c.message_id.in_(chunk), messages.c.rejected.is_(False)
            )
        ):
            known.setdefault(mid, set()).add(_identity(payload))
    return known


def _known_untaken(
    connection: Any, accepted: list[Accepted], kinds: dict[str, Policy], known: dict[str, set[str]]
) -> None:
    """Adds to ``known`` the canonical payloads staged and not yet taken, by message_id."""
    by_key = {(a.row.kind, a.row.aggregate, a.row.aggregate_version): a for a in accepted}
    aggregates = sorted({a.row.aggregate for a in accepted})
    for start in range(0, len(aggregates), 500):
        untaken = connection.execute(
            select(
                staging.c.kind,
                staging.c.aggregate,
                staging.c.aggregate_version,
                staging.c.payload,
                staging.c.schema_version,
            ).where(
                staging.c.taken_at.is_(None),
                staging.c.aggregate.in_(aggregates[start : start + 500]),
            )
        )
        for kind, aggregate, version, payload, schema_version in untaken:
            mine = by_key.get((kind, aggregate, version))
            if mine is None:
                continue
            verdict = validate(
                StagingRow(
                    0, kind, aggregate, version, payload, schema_version, None, mine.row.created_at
                ),
                kinds,
            )
            if isinstance(verdict, Accepted):
                known.setdefault(mine.message_id, set()).add(_identity(verdict.payload))
