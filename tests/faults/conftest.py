"""Fixtures of the fault tests: the project's site simulator on loopback and a SQLite database
(the cases that also run on PostgreSQL use the shared ``db_url``/``engine`` fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import Faults, SiteSimulator


@pytest.fixture
def sim() -> Iterator[SiteSimulator]:
    """The site on loopback, accepting the token ``test-token`` (what fast_settings sends) and
    keeping every request it read (``received()``)."""
    with SiteSimulator(token="test-token", faults=Faults(seed=1), keep_requests=True) as simulator:
        yield simulator


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite database, for the cases that do not depend on the database engine."""
    return sqlite_copy(tmp_path / "faults.db")


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()
