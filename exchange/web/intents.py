"""The JSON intake (contract 9b): POST /api/v1/intents.

Each intent is judged by ``intake.contracts.validate``, the very code that judges a staging
row; the valid ones are staged in one transaction through ``intake.stage``. Rules that need
the queue's state (a version conflict, an aggregate's sku or price type) are left to intake,
as for a staging row.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aiohttp import web
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import messages, staging
from exchange.domain.identity import message_id
from exchange.domain.policy import Policy
from exchange.intake.contracts import (
    MAX_NESTING,
    Accepted,
    Rejected,
    StagingRow,
    dump_json,
    nesting,
    validate,
)
from exchange.intake.stage import stage
from exchange.web.config import WebConfig

PATH = "/api/v1/intents"
# How deep a request body may nest before it is parsed at all: a payload's own limit
# (MAX_NESTING, judged per intent, with the staging rows' rules) and the envelope
# ({"intents": [{"payload": ...}]}), with room to spare; well below what Python's recursive
# JSON parser survives, so no body can make it raise RecursionError.
MAX_BODY_NESTING = 256
FIELDS = frozenset(
    {"kind", "aggregate", "aggregate_version", "payload", "schema_version", "source_ref"}
)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class BodyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise BodyError(f"the key {key[:40]!r} appears twice in one object")
        result[key] = value
    return result


def _is_json(content_type: str) -> bool:
    """application/json, with or without parameters (a charset)."""
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def parse_body(raw: bytes) -> Any:
    """The request body as JSON, or BodyError with one line: not UTF-8, nested beyond
    MAX_BODY_NESTING (measured on the text, before any parsing), not JSON, or a key twice."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("the body is not UTF-8 text") from None
    depth = nesting(text)
    if depth > MAX_BODY_NESTING:
        raise BodyError(
            f"the body nests {depth} levels deep; a payload may nest at most {MAX_NESTING}"
        )
    try:
        return json.loads(text, parse_float=Decimal, parse_int=int, object_pairs_hook=_unique_keys)
    except BodyError:
        raise
    except ValueError as exc:
        raise BodyError(f"the body is not JSON: {exc}") from None


def _rows(body: Any) -> list[dict[str, Any] | str]:
    """Each intent as a staging row (column -> value), or the reason it cannot be one."""
    if (
        not isinstance(body, dict)
        or set(body) != {"intents"}
        or not isinstance(body["intents"], list)
    ):
        raise BodyError('the body must be {"intents": [...]}')
    rows: list[dict[str, Any] | str] = []
    for index, item in enumerate(body["intents"]):
        if not isinstance(item, dict):
            raise BodyError(f"intents[{index}] is not an object")
        rows.append(_row(item))
    return rows


def _row(item: dict[str, Any]) -> dict[str, Any] | str:
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
    if not isinstance(schema_version, str) or len(schema_version) > 32:
        return "schema_version must be a string of at most 32 characters"
    if source_ref is not None and (not isinstance(source_ref, str) or len(source_ref) > 500):
        return "source_ref must be a string of at most 500 characters"
    return {
        "kind": kind,
        "aggregate": aggregate,
        "aggregate_version": version,
        "payload": payload,
        "schema_version": schema_version,
        "source_ref": source_ref,
    }


class JsonIntake:
    def __init__(
        self, config: WebConfig, engine: Engine, staging_engine: Engine | None = None
    ) -> None:
        self.config = config
        self.engine = engine
        # staging_intents in a database of its own (EXCHANGE_STAGING_URL): the valid intents
        # are staged there in one transaction; messages are read in the service's database.
        self.staging_engine = staging_engine if staging_engine is not engine else None

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self.handle)]

    def _authorized(self, request: web.Request) -> bool:
        token = self.config.intake_token or ""
        header = request.headers.get("Authorization", "")
        if not token or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), token.encode())

    async def handle(self, request: web.Request) -> web.Response:
        if not self.config.intake_token:
            return _error(403, "the JSON intake is closed: EXCHANGE_INTAKE_TOKEN is not set")
        if not self._authorized(request):
            return _error(401, "missing or wrong bearer token")
        if not _is_json(request.headers.get("Content-Type", "")):
            return _error(415, "the body must be JSON: Content-Type: application/json")
        try:
            body = parse_body(await request.read())
        except BodyError as exc:
            return _error(400, str(exc))
        intents = body.get("intents") if isinstance(body, dict) else None
        if isinstance(intents, list) and len(intents) > self.config.intake_max_items:
            return _error(413, f"at most {self.config.intake_max_items} intents per request")
        try:
            rows = _rows(body)
        except BodyError as exc:
            return _error(400, str(exc))
        results = await asyncio.to_thread(self._stage, rows)
        return web.json_response({"results": results})

    def _stage(self, rows: list[dict[str, Any] | str]) -> list[dict[str, Any]]:
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
                    self.config.kinds,
                )
            )
        to_stage: list[dict[str, Any]] = []
        accepted = [v for v in verdicts if isinstance(v, Accepted)]
        if self.staging_engine is not None:
            with transaction(self.engine, read_only=True) as main:
                known = _known_messages(main, accepted)
        with transaction(self.staging_engine or self.engine) as connection:
            if self.staging_engine is None:
                known = _known_messages(connection, accepted)
            _known_untaken(connection, accepted, self.config.kinds, known)
            for verdict, row in zip(verdicts, rows, strict=True):
                if isinstance(verdict, str):
                    results.append(
                        {"status": "rejected", "reason": "invalid-contract", "detail": verdict}
                    )
                elif isinstance(verdict, Rejected):
                    assert isinstance(row, dict)
                    result = {"status": "rejected"}
                    # No id for text that is not Unicode (a lone surrogate): it has no bytes
                    # to hash, and the reason says what is wrong.
                    with contextlib.suppress(UnicodeEncodeError):
                        result["message_id"] = message_id(
                            row["kind"], row["aggregate"], row["aggregate_version"]
                        )
                    results.append(
                        {**result, "reason": verdict.reason.value, "detail": verdict.detail}
                    )
                elif _identity(verdict.payload) in known.get(verdict.message_id, ()):
                    results.append({"status": "duplicate", "message_id": verdict.message_id})
                else:
                    assert isinstance(row, dict)
                    known.setdefault(verdict.message_id, set()).add(_identity(verdict.payload))
                    to_stage.append(row)
                    results.append({"status": "staged", "message_id": verdict.message_id})
            if to_stage:
                stage(connection, to_stage)
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
