"""Fixtures of the report tests; the quarantine they build is in tests/support/reportdb.py."""

from __future__ import annotations

import pytest
from reportdb import MASK_FIELDS, Built, build_quarantine
from sqlalchemy import Engine

from exchange.dev.testing import fast_settings
from exchange.domain.clock import FakeClock
from exchange.settings import Settings


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, report_mask_fields=MASK_FIELDS)


@pytest.fixture
def quarantine(engine: Engine, settings: Settings, clock: FakeClock) -> Built:
    """Six quarantined entries built by the real pipeline (see ``build_quarantine``)."""
    return build_quarantine(engine, settings, clock)
