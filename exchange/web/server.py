"""The aiohttp application of ``exchange serve`` and the loop that runs it.

aiohttp's server: already a dependency (the shop client's default wire), a real asynchronous
server with streaming request bodies (1C's uploads are appended as they arrive, never held
whole in memory), TLS through the standard ``ssl`` module, and no second framework or ASGI
server to install, configure and keep patched (Starlette would need uvicorn beside it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from sqlalchemy import Engine

from exchange.web.config import WebConfig
from exchange.web.intents import JsonIntake
from exchange.web.keys import Signer, stored_key
from exchange.web.onec import OneCExchange
from exchange.web.workbench import Workbench

log = logging.getLogger(__name__)

# The largest request body read whole (the JSON intake); 1C's uploads are streamed instead.
MAX_JSON_BODY = 64 * 1024 * 1024
# With TLS (ours or the proxy's) a browser that came once never speaks plain HTTP to us again.
HSTS = "max-age=31536000"


ONEC = web.AppKey("onec", OneCExchange)


def build_app(
    config: WebConfig, engine: Engine, staging_engine: Engine | None = None
) -> web.Application:
    """``staging_engine``: the database of ``staging_intents`` when it is not ``engine``'s."""
    key = config.secret_key or stored_key(engine)
    app = web.Application(client_max_size=MAX_JSON_BODY)
    onec = OneCExchange(config, engine, Signer(key, "1c-session"), staging_engine)
    intake = JsonIntake(config, engine, staging_engine)
    workbench = Workbench(config, engine, key)
    app.add_routes(
        [*onec.routes(), *intake.routes(), *workbench.routes(), web.get("/healthz", _health)]
    )
    app[ONEC] = onec

    async def start_readers(_: web.Application) -> None:
        await asyncio.to_thread(onec.start)

    async def close_readers(_: web.Application) -> None:
        await asyncio.to_thread(onec.close)

    async def watch_imports(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(onec.watch())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def strict_transport(request: web.Request, response: web.StreamResponse) -> None:
        if request.secure or config.behind_proxy:
            response.headers["Strict-Transport-Security"] = HSTS

    async def close_workbench(_: web.Application) -> None:
        workbench.close()

    app.on_response_prepare.append(strict_transport)
    app.on_startup.append(start_readers)
    app.on_cleanup.append(close_readers)
    app.on_cleanup.append(close_workbench)
    app.cleanup_ctx.append(watch_imports)
    return app


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def serve(
    app: web.Application,
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext | None = None,
    started: Callable[[int], Awaitable[None] | None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen until ``stop`` is set (or SIGINT/SIGTERM), then finish the requests in flight."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    bound = port
    for address in runner.addresses:  # the port chosen when port is 0
        bound = int(address[1])
        break
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows; not main
            loop.add_signal_handler(sig, stop.set)
    if started is not None:
        result = started(bound)
        if result is not None:
            await result
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
