"""``exchange serve`` in the tests: a real aiohttp server on a loopback port, in a thread of
its own, built by the composition root from settings; the samples read from ../shared."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import ARGS, CHROMIUM, need_browser
from sqlalchemy import Engine
from web_helpers import serving
from workbench_helpers import add_operator, close_all

from exchange.db.engine import make_engine
from exchange.dev.sitesim import Faults, SiteSimulator

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


@pytest.fixture
def serve(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``serve(**settings) -> base URL``: a running ``exchange serve`` on the test's database."""
    with serving(db_url, tmp_path / "1c") as start:
        yield start


@pytest.fixture
def olga(serve: Callable[..., Any], db: Engine) -> Iterator[str]:
    """A served workbench with one operator, «olga» (role operator): its base URL; the
    clients the test signed in with closed after it."""
    base: str = serve()
    add_operator(db, "olga", "operator")
    yield base
    close_all()


@pytest.fixture
def db(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module (a launch costs seconds); each test opens its own context."""
    need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as simulator:
        yield simulator
