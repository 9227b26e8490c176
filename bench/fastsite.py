"""A fast site simulator for the benchmarks: asyncio + aiohttp (uvloop when installed), one process.

It is the benchmarks' front end of the site model (``exchange.dev.sitemodel``, the same model as
``exchange.dev.sitesim`` and ``FakeSite``, checked by the same conformance table,
tests/dev/test_site_conformance.py): the same answers to every update (contract 5 and 5b),
without the simulator's faults, so that the site is not what a benchmark measures:

    POST /api/v1/updates        one update; ``Idempotency-Key`` must equal the body's message_id
    POST /api/v1/updates:batch  ``{"items": [...]}``, one result per item (404 with --no-batch)
    GET  /api/v1/health         200 when the bearer token is accepted

Per update: 401 unless the token matches (``--token``; none given accepts any), then the model's
answer: 400 for what is not an update, 422 for a price that breaks contract 1, the stored answer
again for a key already applied with the same body (equal decimals are the same body), 422
``idempotency-key-reuse`` for another body, 404 ``unknown-sku`` for a SKU outside
``--catalog FILE`` (one SKU a line; without it every SKU exists), 409
``{"error": "stale", "current_version": N}`` for a version at or below the one held, else the
effect: 200 ``{"receipt": "R-<n>"}``.

Bookkeeping for the bench (not part of the contract):

    GET  /bench/stats   effects, distinct message_ids with an effect, the most effects any one
                        message_id had (1 unless the site is broken), requests by status,
                        batch requests, replays, and the wall-clock times of the first and last
                        effect
    POST /bench/reset   forget everything (held versions, stored answers, counters)

``--latency MS`` holds every update and batch request that long before it is answered (the
event loop is not blocked: requests wait side by side), a shop across a network: with it the
site, not the machine's cores, is what limits a worker (issue 35, item 5; the ``scale`` section).

Run: ``python bench/fastsite.py --port 0 [--token T] [--latency MS]``; it prints ``listening on
URL`` when ready and serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from exchange.dev.sitemodel import (
    BATCH_PATH,
    HEALTH_PATH,
    HEALTHY,
    NO_BATCH,
    UPDATES_PATH,
    BadRequest,
    Reply,
    SiteModel,
    refuse_token,
    reply,
)

MAX_BODY = 10 * 1024 * 1024
JSON = "application/json"


def _dumps(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), default=str).encode()


class Site:
    """The model and the bench's counters. Everything runs on one event loop thread: no locks."""

    def __init__(
        self,
        token: str | None,
        *,
        batch_enabled: bool = True,
        catalog: frozenset[str] | None = None,
        latency: float = 0.0,
    ) -> None:
        self.token = token
        self.latency = latency  # seconds each update or batch request is held
        self.batch_enabled = batch_enabled
        self.catalog = catalog
        self.reset()

    def reset(self) -> None:
        self.model = SiteModel(catalog=self.catalog)
        self.by_status: collections.Counter[int] = collections.Counter()
        self.requests = 0
        self.batch_requests = 0
        self.first_effect: float | None = None
        self.last_effect: float | None = None

    def refusal(self, request: web.Request) -> Reply | None:
        return refuse_token(self.token, request.headers.get("Authorization"))

    def applied(self, count: int) -> None:
        if count:
            now = time.time()
            if self.first_effect is None:
                self.first_effect = now
            self.last_effect = now

    def count(self, status: int) -> None:
        self.requests += 1
        self.by_status[status] += 1

    def stats(self) -> dict[str, Any]:
        counts = self.model.effect_counts
        return {
            "effects": len(self.model.effects),
            "distinct_effect_keys": len(counts),
            "max_effects_per_key": max(counts.values(), default=0),
            "requests": self.requests,
            "batch_requests": self.batch_requests,
            "replays": self.model.replays,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "first_effect": self.first_effect,
            "last_effect": self.last_effect,
        }


def _reply(answer: Reply) -> web.Response:
    headers = dict(answer.headers) or None
    return web.Response(status=answer.status, body=answer.body, content_type=JSON, headers=headers)


def make_app(site: Site) -> web.Application:
    async def update(request: web.Request) -> web.Response:
        if site.latency:
            await asyncio.sleep(site.latency)
        refused = site.refusal(request)
        if refused is not None:
            site.count(refused.status)
            return _reply(refused)
        raw = await request.read()
        result = site.model.single(raw, request.headers.get("Idempotency-Key"))
        site.applied(result.applied)
        site.count(result.reply.status)
        return _reply(result.reply)

    async def batch(request: web.Request) -> web.Response:
        if not site.batch_enabled:
            return _reply(NO_BATCH)
        if site.latency:
            await asyncio.sleep(site.latency)
        refused = site.refusal(request)
        if refused is not None:
            site.count(refused.status)
            return _reply(refused)
        site.batch_requests += 1
        try:
            items = site.model.read_batch(await request.read())
        except BadRequest as exc:
            site.count(400)
            return _reply(reply(400, {"error": str(exc)}))
        result = site.model.answer_batch(items)
        site.applied(result.applied)
        for status in result.statuses:
            site.count(status)
        return _reply(result.reply)

    async def health(request: web.Request) -> web.Response:
        return _reply(site.refusal(request) or HEALTHY)

    async def stats(request: web.Request) -> web.Response:
        return _reply(Reply(200, _dumps(site.stats())))

    async def reset(request: web.Request) -> web.Response:
        site.reset()
        return _reply(Reply(200, b'{"reset":true}'))

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
    parser.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="a file of the SKUs the shop has, one a line (default: every SKU)",
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="milliseconds before each update is answered"
    )
    parser.add_argument("--no-uvloop", action="store_true", help="the default asyncio loop")
    args = parser.parse_args(argv)
    catalog = None
    if args.catalog is not None:
        lines = args.catalog.read_text(encoding="utf-8").splitlines()
        catalog = frozenset(line for line in lines if line)
    site = Site(
        args.token, batch_enabled=not args.no_batch, catalog=catalog, latency=args.latency / 1000
    )
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
