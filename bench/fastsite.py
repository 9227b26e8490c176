"""A fast site simulator for the benchmarks: asyncio + aiohttp (uvloop when installed), one process.

It keeps the same promises as ``exchange.sitesim`` (contract 5 and 5b) without its faults, so that
the site is not what a benchmark measures:

    POST /api/v1/updates        one update; ``Idempotency-Key`` must equal the body's message_id
    POST /api/v1/updates:batch  ``{"items": [...]}``, one result per item (404 with --no-batch)
    GET  /api/v1/health         200 when the bearer token is accepted

Per update: 401 unless the token matches (``--token``; none given accepts any), 400 for a body
that is not a valid update, the stored answer again for a key already answered 200 with the same
body (no effect), 422 ``idempotency-key-reuse`` for the same key with another body, 409
``{"error": "stale", "current_version": N}`` for a version at or below the one held, else the
effect: held version := version, 200 ``{"receipt": "R-<n>"}``.

Bookkeeping for the bench (not part of the contract):

    GET  /bench/stats   effects, distinct message_ids with an effect, the most effects any one
                        message_id had (1 unless the site is broken), requests by status,
                        batch requests, replays, and the wall-clock times of the first and last
                        effect
    POST /bench/reset   forget everything (held versions, stored answers, counters)

Run: ``python bench/fastsite.py --port 0 [--token T]``; it prints ``listening on URL`` when
ready and serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hmac
import json
import signal
import sys
import time
from decimal import Decimal
from typing import Any

from aiohttp import web

UPDATES_PATH = "/api/v1/updates"
BATCH_PATH = "/api/v1/updates:batch"
HEALTH_PATH = "/api/v1/health"
MAX_BODY = 10 * 1024 * 1024
JSON = "application/json"


class BadRequest(ValueError):
    pass


def _dumps(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), default=str).encode()


def parse_update(document: Any, key: str | None) -> tuple[str, str, str, int]:
    """(message_id, kind, aggregate, version) of a valid update, else BadRequest."""
    if not isinstance(document, dict):
        raise BadRequest("the body must be a JSON object")
    for name in ("message_id", "kind", "aggregate", "version", "payload", "created_at"):
        if name not in document:
            raise BadRequest(f"missing field: {name}")
    for name in ("message_id", "kind", "aggregate", "created_at"):
        if not isinstance(document[name], str) or not document[name]:
            raise BadRequest(f"{name} must be a non-empty string")
    version = document["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadRequest("version must be an integer of 1 or more")
    if not isinstance(document["payload"], dict):
        raise BadRequest("payload must be a JSON object")
    if key is not None and key != document["message_id"]:
        raise BadRequest("Idempotency-Key must equal the body's message_id")
    return document["message_id"], document["kind"], document["aggregate"], version


class Site:
    """The site's state. Everything runs on one event loop thread: no locks needed."""

    def __init__(self, token: str | None, *, batch_enabled: bool = True) -> None:
        self.token = token
        self.batch_enabled = batch_enabled
        self.reset()

    def reset(self) -> None:
        self.held: dict[tuple[str, str], int] = {}
        # key -> (the parsed body, the stored answer): same body (as parsed, Decimal-exact)
        # means a replay of that answer.
        self.answers: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.effects_by_key: collections.Counter[str] = collections.Counter()
        self.effects = 0
        self.by_status: collections.Counter[int] = collections.Counter()
        self.requests = 0
        self.batch_requests = 0
        self.replays = 0
        self.first_effect: float | None = None
        self.last_effect: float | None = None

    def authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        given = request.headers.get("Authorization", "").encode()
        return hmac.compare_digest(given, f"Bearer {self.token}".encode())

    def process(self, document: Any, key: str | None) -> tuple[int, bytes]:
        """One update (a single request or a batch item): its status and answer body."""
        try:
            message_id, kind, aggregate, version = parse_update(document, key)
        except BadRequest as exc:
            return 400, _dumps({"error": str(exc)})
        stored = self.answers.get(message_id)
        if stored is not None:
            if stored[0] == document:
                self.replays += 1
                return 200, stored[1]
            return 422, b'{"error":"idempotency-key-reuse"}'
        held = self.held.get((kind, aggregate))
        if held is not None and version <= held:
            return 409, _dumps({"error": "stale", "current_version": held})
        self.effects += 1
        self.effects_by_key[message_id] += 1
        now = time.time()
        if self.first_effect is None:
            self.first_effect = now
        self.last_effect = now
        self.held[(kind, aggregate)] = version
        answer = _dumps({"receipt": f"R-{self.effects}"})
        self.answers[message_id] = (document, answer)
        return 200, answer

    def count(self, status: int) -> None:
        self.requests += 1
        self.by_status[status] += 1

    def stats(self) -> dict[str, Any]:
        return {
            "effects": self.effects,
            "distinct_effect_keys": len(self.effects_by_key),
            "max_effects_per_key": max(self.effects_by_key.values(), default=0),
            "requests": self.requests,
            "batch_requests": self.batch_requests,
            "replays": self.replays,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "first_effect": self.first_effect,
            "last_effect": self.last_effect,
        }


def _reply(status: int, body: bytes, **headers: str) -> web.Response:
    return web.Response(status=status, body=body, content_type=JSON, headers=headers or None)


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_float=Decimal)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}") from None


UNAUTHORIZED = b'{"error":"unauthorized"}'


def make_app(site: Site) -> web.Application:
    async def update(request: web.Request) -> web.Response:
        if not site.authorized(request):
            site.count(401)
            return _reply(401, UNAUTHORIZED, **{"WWW-Authenticate": "Bearer"})
        raw = await request.read()
        try:
            document = _parse_json(raw)
        except BadRequest as exc:
            site.count(400)
            return _reply(400, _dumps({"error": str(exc)}))
        key = request.headers.get("Idempotency-Key")
        if key is None:
            status, body = 400, b'{"error":"missing header: Idempotency-Key"}'
        else:
            status, body = site.process(document, key)
        site.count(status)
        return _reply(status, body)

    async def batch(request: web.Request) -> web.Response:
        if not site.batch_enabled:
            return _reply(404, b'{"error":"not found"}')
        if not site.authorized(request):
            site.count(401)
            return _reply(401, UNAUTHORIZED, **{"WWW-Authenticate": "Bearer"})
        site.batch_requests += 1
        try:
            document = _parse_json(await request.read())
            if not isinstance(document, dict) or not isinstance(document.get("items"), list):
                raise BadRequest('a batch must be {"items": [...]}')
        except BadRequest as exc:
            site.count(400)
            return _reply(400, _dumps({"error": str(exc)}))
        parts = []
        for item in document["items"]:
            status, body = site.process(item, None)
            site.count(status)
            message_id = item.get("message_id") if isinstance(item, dict) else None
            name = _dumps(message_id if isinstance(message_id, str) else None)
            parts.append(b'{"message_id":%s,"status":%d,"body":%s}' % (name, status, body))
        return _reply(200, b'{"results":[' + b",".join(parts) + b"]}")

    async def health(request: web.Request) -> web.Response:
        if not site.authorized(request):
            return _reply(401, UNAUTHORIZED, **{"WWW-Authenticate": "Bearer"})
        return _reply(200, b'{"status":"ok"}')

    async def stats(request: web.Request) -> web.Response:
        return _reply(200, _dumps(site.stats()))

    async def reset(request: web.Request) -> web.Response:
        site.reset()
        return _reply(200, b'{"reset":true}')

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(UPDATES_PATH, update)
    app.router.add_post(BATCH_PATH, batch)
    app.router.add_get(HEALTH_PATH, health)
    app.router.add_get("/bench/stats", stats)
    app.router.add_post("/bench/reset", reset)
    return app


async def serve(host: str, port: int, site: Site) -> None:
    runner = web.AppRunner(make_app(site), access_log=None, handle_signals=False)
    await runner.setup()
    tcp = web.TCPSite(runner, host, port, backlog=1024)
    await tcp.start()
    bound = runner.addresses[0][1]
    print(f"listening on http://{host}:{bound}", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    await stopped.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", default=None, help="bearer token required (default: any)")
    parser.add_argument("--no-batch", action="store_true", help="answer 404 to the batch API")
    parser.add_argument("--no-uvloop", action="store_true", help="the default asyncio loop")
    args = parser.parse_args(argv)
    site = Site(args.token, batch_enabled=not args.no_batch)
    if not args.no_uvloop:
        try:
            import uvloop
        except ImportError:
            print("uvloop not installed: the default asyncio loop", file=sys.stderr)
        else:
            uvloop.run(serve(args.host, args.port, site))
            return
    asyncio.run(serve(args.host, args.port, site))


if __name__ == "__main__":
    main()
