"""Fixtures of the command-line tests: the CLI runner, a site simulator, a quarantine scenario."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import TOKEN, Cli, Scenario, deliver_in_process
from sqlalchemy import Engine

from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import posting_row, price_row, raw_row


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``exchange`` run in the test's own directory (in this process: clitools.Cli)."""
    return Cli(tmp_path)


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    """The shop site on loopback, accepting ``Bearer test-token``."""
    with SiteSimulator(token=TOKEN, faults=Faults(seed=1)) as simulator:
        yield simulator


@pytest.fixture
def scenario(db_url: str, engine: Engine, site: SiteSimulator) -> Scenario:
    site.faults.reject = {"SKU-REJ", "DOC-1"}
    deliver_in_process(
        db_url,
        engine,
        site,
        [
            price_row("SKU-1", 1, "10.00"),
            price_row("SKU-1", 2, "11.00"),
            price_row("SKU-2", 1, "20.00"),
            price_row("SKU-REJ", 1, "30.00"),
            posting_row("DOC-1", 1),
            posting_row("DOC-1", 2),
            posting_row("DOC-1", 3),
            posting_row("DOC-2", 1),
            posting_row("DOC-2", 2),
            raw_row("price", "SKU-BAD", 1, "{not json", source_ref="Установка цен 000777"),
            raw_row("stock_level", "SKU-3", 1, '{"qty": 5}', source_ref="Остатки 000001"),
        ],
    )
    return Scenario()
