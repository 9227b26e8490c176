"""Fixtures of the operations tests (metrics, health, logs): the site, a clean logging state."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opstools import TOKEN

from exchange.dev.sitesim import Faults, SiteSimulator


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
