"""Fixtures of the operations tests (metrics, health, logs): the site, a clean logging state;
and of the operator's tests: settings over the parametrized database, the CLI runner.

The command-line helpers are those of tests/cli (``clitools``): the same controlled
environment, and the same checks that nothing printed a traceback or the site token.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import Cli
from opstools import TOKEN

from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings
from exchange.settings import Settings

GAP = 600.0


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN, faults=Faults(seed=1)) as simulator:
        yield simulator


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """``logs.configure`` changes the root logger and a few library loggers: put them back."""
    root = logging.getLogger()
    names = ("httpx", "httpcore", "apscheduler", "alembic")
    saved = (root.level, list(root.handlers), {n: logging.getLogger(n).level for n in names})
    yield
    level, handlers, levels = saved
    root.setLevel(level)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, gap_timeout=GAP)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``exchange`` run in the test's own directory (in this process: clitools.Cli)."""
    return Cli(tmp_path)
