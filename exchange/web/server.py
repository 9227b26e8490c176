"""The aiohttp application of ``exchange serve`` and the loop that runs it.

aiohttp's server: already a dependency (the shop client's default wire), a real asynchronous
server with streaming request bodies (1C's uploads are appended as they arrive, never held
whole in memory), TLS through the standard ``ssl`` module, and no second framework or ASGI
server to install, configure and keep patched (Starlette would need uvicorn beside it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from sqlalchemy import Engine

from exchange.errors import ExchangeError
from exchange.web import notfound
from exchange.web.config import FORM_BODY_LIMIT, WebConfig
from exchange.web.door import Door, DoorSite
from exchange.web.intents import PATH as INTAKE_PATH
from exchange.web.intents import JsonIntake
from exchange.web.keys import stored_key
from exchange.web.onec import PATHS as ONEC_PATHS
from exchange.web.onec import OneCExchange
from exchange.web.sign_ins import SignIns
from exchange.web.workbench import ACTION_PATHS, Workbench

log = logging.getLogger(__name__)

# With TLS (ours or the proxy's) a browser that came once never speaks plain HTTP to us again.
HSTS = "max-age=31536000"


ONEC = web.AppKey("onec", OneCExchange)
DOOR = web.AppKey("door", Door)


def body_limits(config: WebConfig) -> Callable[[web.Request], int]:
    """Each route's body limit (contract 9), in one place: the JSON intake its own, 1C's
    exchange the ``file_limit`` it announces (1C sends a larger file in parts of at most that
    size; its other requests carry no body), a bulk action its ids, anything else a form."""
    limits = {
        INTAKE_PATH: config.intake_body_limit,
        **dict.fromkeys(ONEC_PATHS, config.file_limit),
        **dict.fromkeys(ACTION_PATHS, config.action_body_limit),
    }
    return lambda request: limits.get(request.path, FORM_BODY_LIMIT)


def build_app(
    config: WebConfig, engine: Engine, staging_engine: Engine | None = None
) -> web.Application:
    """``staging_engine``: the database of ``staging_intents`` when it is not ``engine``'s."""
    key = config.secret_key or stored_key(engine)
    door = Door(config.door, body_limits(config), behind_proxy=config.behind_proxy)
    app = web.Application(
        client_max_size=FORM_BODY_LIMIT, middlewares=[door.middleware, notfound.in_words]
    )
    app[DOOR] = door
    onec = OneCExchange(config, engine, key, staging_engine)
    intake = JsonIntake(config, engine, staging_engine)
    # The dashboard shows what 1C handed over (the staging table, wherever it is); the
    # sign-ins refused, from the summary rows and this process's unwritten count (SignIns).
    workbench = Workbench(config, engine, key, staging_engine=staging_engine)
    app.add_routes(
        [*onec.routes(), *intake.routes(), *workbench.routes(), web.get("/healthz", _health)]
    )
    app[ONEC] = onec
    # One count of refused sign-ins for the process, written a minute at a time (contract 15).
    sign_ins = SignIns(engine, config.clock, config.monotonic)
    onec.sign_ins = intake.sign_ins = workbench.sign_ins = sign_ins

    async def flush_sign_ins(_: web.Application) -> AsyncIterator[None]:
        async with sign_ins.flushing():
            yield

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
    app.cleanup_ctx.append(flush_sign_ins)
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
    """Listen until ``stop`` is set (or SIGINT/SIGTERM), then finish the requests in flight.

    Through the app's door (``exchange.web.door``): aiohttp's ``keepalive_timeout`` is the
    time a request's head has to arrive."""
    door = app[DOOR]
    _enough_descriptors(door.limits.max_connections)
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=30,
        keepalive_timeout=door.limits.head_timeout,
    )
    await runner.setup()
    site = DoorSite(runner, door, host, port, ssl_context=tls)
    try:
        await site.start()
    except OSError as exc:  # the port taken, an address not this host's: one line, exit 2
        await runner.cleanup()
        raise ExchangeError(
            f"cannot serve on {host}:{port} (EXCHANGE_HTTP_HOST, EXCHANGE_HTTP_PORT): "
            f"{_os_reason(exc)}"
        ) from None
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


def _os_reason(exc: OSError) -> str:
    """The operating system's reason alone (``Address already in use``): uvloop's message
    repeats the address and is lower-case."""
    return os.strerror(exc.errno) if exc.errno else str(exc)


def addresses(
    *, scheme: str, host: str, port: int, public: str | None, onec: bool, intake: bool
) -> list[tuple[str, str]]:
    """What ``serve`` tells a person when it starts (issue 24 item 13, contract 15): where the
    workbench and, only when they are open (``onec``, ``intake``), 1C's exchange and the JSON
    intake answer, as (what, address). ``public`` (EXCHANGE_PUBLIC_URL: scheme, host, port and
    path by which 1C reaches serve, e.g. behind a proxy) wins; unset, the listen address, a
    wildcard host (``0.0.0.0``, ``::``) shown by this machine's name, an IPv6 address in
    brackets (``public_url_missing`` says why that is not 1C's address)."""
    if public:
        base = public.rstrip("/")
    else:
        shown = host
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if not host or (address is not None and address.is_unspecified):
            shown = socket.getfqdn()
        elif address is not None and address.version == 6:
            shown = f"[{host}]"
        base = f"{scheme}://{shown}:{port}"
    where = [("workbench", f"{base}/")]
    if onec:
        where.append(("1C exchange", f"{base}{ONEC_PATHS[0]}"))
    if intake:
        where.append(("JSON intake", f"{base}{INTAKE_PATH}"))
    return where


def public_url_missing(*, public: str | None, onec: bool, intake: bool) -> str | None:
    """The warning ``serve`` gives beside its listen address when EXCHANGE_PUBLIC_URL is unset
    and a way in for 1C is open: 1C runs on another machine and reaches serve by a name, a port
    and maybe a path of a proxy that serve cannot know (contract 15)."""
    if public or not (onec or intake):
        return None
    return (
        "EXCHANGE_PUBLIC_URL is not set: the addresses above are where serve listens; 1C "
        "needs the address it reaches serve by (scheme, host, port, path, e.g. "
        "https://exchange.shop.ru/): set EXCHANGE_PUBLIC_URL to it, and serve prints 1C's "
        "address from it"
    )


def _enough_descriptors(connections: int) -> None:
    """Raises the soft limit of open files to 8 per connection the door allows (4,096, as
    config/exchange-serve.service sets): a shell's usual 1,024 is close to 512 connections
    plus the database pool, uploads and the reading processes' pipes."""
    if sys.platform == "win32":
        return
    import resource

    wanted = 8 * connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft != resource.RLIM_INFINITY and soft < 2 * connections:
        log.warning(
            "only %d open files allowed (ulimit -n): %d connections may exhaust them; "
            "raise the hard limit (LimitNOFILE in the systemd unit)",
            soft,
            connections,
        )


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
