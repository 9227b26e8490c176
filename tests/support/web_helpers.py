"""Shared helpers of the web tests: the credentials the served settings carry, and a real
``exchange serve`` run in a thread of its own on a loopback port."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.httpsim import LoopThread
from exchange.settings import Settings, load_settings

USER, PASSWORD, TOKEN = "1c-node", "pa55-Word!", "intake-token-123"


def web_settings(db_url: str, folder: Path, *, readers: int = 0, **overrides: Any) -> Settings:
    """``readers``: serve's CommerceML reading processes. 0 (serve reads in its own process)
    unless the test is about them: each one is a Python process started with serve, which a
    test of the door, the sessions or the throttle would pay for nothing (and `make test-fast`
    refuses to start)."""
    values: dict[str, Any] = {
        "1c_reader_processes": readers,
        "database_url": db_url,
        "http_port": 0,
        "1c_user": USER,
        "1c_password": PASSWORD,
        "1c_dir": str(folder),
        "intake_token": TOKEN,
    }
    values.update(overrides)
    return load_settings(**values)


@contextmanager
def running(
    settings: Settings, *, progress_wait: float | None = None, **config: Any
) -> Iterator[str]:
    """Serve ``settings`` until the block ends; yields the base URL. ``config``: fields of the
    ``WebConfig`` that settings do not reach (e.g. ``door``, the connection limits)."""
    if progress_wait is not None:
        config["progress_wait"] = progress_wait
    engine = make_engine(settings.database_url)
    port: list[int] = []
    ready = threading.Event()
    stop = asyncio.Event()

    def started(bound: int) -> None:
        port.append(bound)
        ready.set()

    original = bootstrap.web_config
    if config:

        def patched(s: Settings) -> Any:
            return replace(original(s), **config)

        bootstrap.web_config = patched  # type: ignore[assignment]
    thread = LoopThread("serve").start()
    try:
        serving = thread.submit(_serve(settings, engine, started, stop))
        serving.add_done_callback(lambda _: ready.set())  # a failure is shown by the test
        assert ready.wait(20), "serve did not start"
        if not port:
            serving.result()  # raises what stopped serve before it listened
            raise AssertionError("serve ended before it listened")
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        if config:
            bootstrap.web_config = original
        thread.call(stop.set)
        concurrent.futures.wait([serving], timeout=30)
        thread.stop()
        engine.dispose()


async def _serve(
    settings: Settings, engine: Any, started: Callable[[int], None], stop: asyncio.Event
) -> None:
    await bootstrap.http_server(settings, engine, started=started, stop=stop)


@contextmanager
def serving(db_url: str, folder: Path) -> Iterator[Callable[..., str]]:
    """``start(progress_wait=None, **settings) -> base URL``: running ``exchange serve``s on
    ``db_url`` with their 1C files in ``folder``, all stopped when the block ends (the ``serve``
    fixture of the web and security tests)."""
    stack: list[Any] = []

    def start(progress_wait: float | None = None, **overrides: Any) -> str:
        settings = web_settings(db_url, folder, readers=1, **overrides)
        context = running(settings, progress_wait=progress_wait)
        stack.append(context)
        base: str = context.__enter__()
        return base

    try:
        yield start
    finally:
        for context in reversed(stack):
            context.__exit__(None, None, None)
