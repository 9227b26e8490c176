"""The JSON intake (contract 9b): POST /api/v1/intents.

Each intent is judged by ``intake.contracts.validate``, the very code that judges a staging
row; the valid ones are staged in one transaction through ``intake.stage``
(``intake.intents``, shared with the brokers' sources). Rules that need the queue's state (a
version conflict, an aggregate's sku or price type) are left to intake, as for a staging row.

Its codes stay English (``status``, ``reason``, and ``error`` on a refused request: programs
read them); ``detail`` is said in the language the request's ``Accept-Language`` asks for,
Russian by default (contract 15): 1C's programmer writes it into 1C's log.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from sqlalchemy import Engine

from exchange.i18n import N_, Lang, _, lang_of_request
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
from exchange.web.keys import same_secret
from exchange.web.sign_ins import SignIns
from exchange.web.throttle import Guesses
from exchange.words import error_words

PATH = "/api/v1/intents"


def _refused(status: int, error: str, detail: str) -> web.Response:
    """A refused request: ``error`` in English (a program's), ``detail`` in the reader's
    language."""
    return web.json_response({"error": error, "detail": detail}, status=status)


def _error(status: int, message: str, lang: Lang, **values: Any) -> web.Response:
    """A refused request with a message of this module (marked ``N_``, said from the
    catalogs)."""
    return _refused(status, message.format(**values), _(message, lang).format(**values))


def _said(result: dict[str, Any], lang: Lang) -> dict[str, Any]:
    """One intent's result with its ``detail`` in ``lang``; ``status`` and ``reason`` as
    they are."""
    detail = result.get("detail")
    return {**result, "detail": error_words(detail, lang)} if detail else result


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
        return same_secret(value.strip(), token)

    async def handle(self, request: web.Request) -> web.Response:
        lang = lang_of_request(request.headers.get("Accept-Language"))
        if not self.config.intake_token:
            closed = N_("the JSON intake is closed: EXCHANGE_INTAKE_TOKEN is not set")
            return _error(403, closed, lang)
        if not request.headers.get("Authorization", ""):
            return _error(401, N_("missing or wrong bearer token"), lang)
        address = client_address(request, self.config.behind_proxy)
        verdict = self.guesses.admit(address)
        if not verdict.allowed:
            await self.sign_ins.refused(INTAKE_DOOR)
            too_many = N_("too many wrong tokens from this address: try again later")
            response = _error(429, too_many, lang)
            response.headers["Retry-After"] = verdict.retry_after_header
            return response
        right, hold = self.guesses.judge(address, lambda: self._authorized(request))
        await self.sign_ins.judged(INTAKE_DOOR, right=right)
        if not right:
            await asyncio.sleep(hold)
            return _error(401, N_("missing or wrong bearer token"), lang)
        if not _is_json(request.headers.get("Content-Type", "")):
            not_json = N_("the body must be JSON, sent with Content-Type: application/json")
            return _error(415, not_json, lang)
        raw = await request.read()
        # Judged and staged in a thread: measuring, parsing and judging a body of up to
        # client_max_size is CPU work that, on the event loop, would keep every other request
        # (/healthz included) waiting for it (R3-1).
        try:
            results = await asyncio.to_thread(self._take, raw)
        except BodyTooLarge as exc:  # too much to parse for the items it may carry: as _TooMany
            limit = self.config.intake_max_items
            message = N_("at most {limit} intents per request: {why}")
            return _refused(
                413,
                message.format(limit=limit, why=exc),
                _(message, lang).format(limit=limit, why=error_words(str(exc), lang)),
            )
        except BodyError as exc:
            return _refused(400, str(exc), error_words(str(exc), lang))
        except _TooMany:
            limit = self.config.intake_max_items
            return _error(413, N_("at most {limit} intents per request"), lang, limit=limit)
        return web.json_response({"results": [_said(result, lang) for result in results]})

    def _take(self, raw: bytes) -> list[dict[str, Any]]:
        """The body's intents judged and the valid ones staged; BodyError or _TooMany."""
        body = parse_body(raw, self.config.intake_max_items)
        intents = body.get("intents") if isinstance(body, dict) else None
        if isinstance(intents, list) and len(intents) > self.config.intake_max_items:
            raise _TooMany
        rows = rows_of(body)
        return stage_intents(self.engine, self.staging_engine, self.config.kinds, rows)
