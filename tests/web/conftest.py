"""``exchange serve`` in the tests: a real aiohttp server on a loopback port, in a thread of
its own, built by the composition root from settings; the samples read from ../shared."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from web_helpers import PASSWORD, TOKEN, USER

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "samples" / "commerceml"


@pytest.fixture
def samples() -> Path:
    """The real CommerceML files of ../shared (never copied into the repository)."""
    if not SAMPLES.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SAMPLES} is missing: CI must provide ../shared")
        pytest.skip(f"{SAMPLES} is absent (the shared samples are not checked out here)")
    return SAMPLES


def web_settings(db_url: str, folder: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
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
def running(settings: Settings, *, progress_wait: float | None = None) -> Iterator[str]:
    """Serve ``settings`` until the block ends; yields the base URL."""
    engine = make_engine(settings.database_url)
    box: dict[str, Any] = {}
    ready = threading.Event()
    failed: list[BaseException] = []

    def main() -> None:
        async def go() -> None:
            stop = asyncio.Event()
            box["stop"], box["loop"] = stop, asyncio.get_running_loop()

            def started(port: int) -> None:
                box["port"] = port
                ready.set()

            await bootstrap.http_server(settings, engine, started=started, stop=stop)

        try:
            asyncio.run(go())
        except BaseException as exc:  # shown by the test that waits for the server
            failed.append(exc)
            ready.set()

    if progress_wait is not None:
        original = bootstrap.web_config

        def patched(s: Settings) -> Any:
            from dataclasses import replace

            return replace(original(s), progress_wait=progress_wait)

        bootstrap.web_config = patched  # type: ignore[assignment]
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    try:
        assert ready.wait(20), "serve did not start"
        if failed:
            raise failed[0]
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        if progress_wait is not None:
            bootstrap.web_config = original
        if "loop" in box and not box["loop"].is_closed():
            box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)
        engine.dispose()


@pytest.fixture
def serve(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``serve(**settings) -> base URL``: a running ``exchange serve`` on the test's database."""
    stack: list[Any] = []

    def start(progress_wait: float | None = None, **overrides: Any) -> str:
        context = running(
            web_settings(db_url, tmp_path / "1c", **overrides), progress_wait=progress_wait
        )
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()
