"""The JSON intake (contract 9b): POST /api/v1/intents.

Each intent is judged by ``intake.contracts.validate``, the very code that judges a staging
row; the valid ones are staged in one transaction through ``intake.stage``
(``intake.intents``, shared with the brokers' sources). Rules that need the queue's state (a
version conflict, an aggregate's sku or price type) are left to intake, as for a staging row.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from aiohttp import web
from sqlalchemy import Engine

from exchange.intake.intents import (
    BodyError,
    BodyTooLarge,
    parse_body,
    rows_of,
    stage_intents,
)
from exchange.ops.sign_ins import INTAKE as INTAKE_DOOR
from exchange.web.config import WebConfig
from exchange.web.door import client_address
from exchange.web.sign_ins import SignIns
from exchange.web.throttle import Guesses

PATH = "/api/v1/intents"


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _is_json(content_type: str) -> bool:
    """application/json, with or without parameters (a charset)."""
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


class _TooMany(Exception):
    """More intents in one body than intake_max_items."""


class JsonIntake:
    def __init__(
        self, config: WebConfig, engine: Engine, staging_engine: Engine | None = None
    ) -> None:
        self.config = config
        self.engine = engine
        # staging_intents in a database of its own (EXCHANGE_STAGING_URL): the valid intents
        # are staged there in one transaction; messages are read in the service's database.
        self.staging_engine = staging_engine if staging_engine is not engine else None
        self.guesses = Guesses("intake", config.monotonic)
        # Refused sign-ins as a summary a minute (contract 15; ``server.build_app`` shares one).
        self.sign_ins = SignIns(engine, config.clock, config.monotonic)

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self.handle)]

    def _authorized(self, request: web.Request) -> bool:
        token = self.config.intake_token or ""
        scheme, _, value = request.headers.get("Authorization", "").strip().partition(" ")
        if not token or scheme.lower() != "bearer":  # a scheme is case-insensitive (RFC 9110)
            return False
        return hmac.compare_digest(value.strip().encode(), token.encode())

    async def handle(self, request: web.Request) -> web.Response:
        if not self.config.intake_token:
            return _error(403, "the JSON intake is closed: EXCHANGE_INTAKE_TOKEN is not set")
        if not request.headers.get("Authorization", ""):
            return _error(401, "missing or wrong bearer token")
        address = client_address(request, self.config.behind_proxy)
        verdict = self.guesses.admit(address)
        if not verdict.allowed:
            await self.sign_ins.refused(INTAKE_DOOR)
            response = _error(429, "too many wrong tokens from this address: try again later")
            response.headers["Retry-After"] = verdict.retry_after_header
            return response
        right = self._authorized(request)
        hold = self.guesses.judged(address, right=right)
        await self.sign_ins.judged(INTAKE_DOOR, right=right)
        if not right:
            await asyncio.sleep(hold)
            return _error(401, "missing or wrong bearer token")
        if not _is_json(request.headers.get("Content-Type", "")):
            return _error(415, "the body must be JSON, sent with Content-Type: application/json")
        raw = await request.read()
        # Judged and staged in a thread: measuring, parsing and judging a body of up to
        # client_max_size is CPU work that, on the event loop, would keep every other request
        # (/healthz included) waiting for it (R3-1).
        try:
            results = await asyncio.to_thread(self._take, raw)
        except BodyTooLarge as exc:  # too much to parse for the items it may carry: as _TooMany
            return _error(413, f"at most {self.config.intake_max_items} intents per request: {exc}")
        except BodyError as exc:
            return _error(400, str(exc))
        except _TooMany:
            return _error(413, f"at most {self.config.intake_max_items} intents per request")
        return web.json_response({"results": results})

    def _take(self, raw: bytes) -> list[dict[str, Any]]:
        """The body's intents judged and the valid ones staged; BodyError or _TooMany."""
        body = parse_body(raw, self.config.intake_max_items)
        intents = body.get("intents") if isinstance(body, dict) else None
        if isinstance(intents, list) and len(intents) > self.config.intake_max_items:
            raise _TooMany
        rows = rows_of(body)
        return stage_intents(self.engine, self.staging_engine, self.config.kinds, rows)
