"""Fixtures of the operator tests: settings over the parametrized database, the CLI runner.

The command-line helpers are those of tests/cli (``clitools``): the same controlled
environment, and the same checks that nothing printed a traceback or the site token.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from exchange.dev.testing import fast_settings
from exchange.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

# Found through the path added just above.
from clitools import Cli

GAP = 600.0


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, gap_timeout=GAP)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``exchange`` run in the test's own directory (in this process: clitools.Cli)."""
    return Cli(tmp_path)
