"""A marketplace's wait is said as a wait, never as a retry (mpwords item 1): a price Ozon
holds for its hourly limit (research/marketplaces.md §1.3: 10 updates of a product an hour;
the target waits, not charged) is ``delayed`` by an ``awaiting-outcome``, and ``find``,
``history`` and ``status`` under EXCHANGE_LANG=ru say it waits for the marketplace, not
«отложено (повтор)». Ozon's simulator keeps the hour as §1.3 says."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.ozonsim import Item as SimItem
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.worker import Worker

RU = {"EXCHANGE_LANG": "ru"}


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def held_for_the_hour(db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path) -> None:
    """SKU-1's hour is used by another sender; the service's price for it is held."""
    for n in range(10):
        site.import_prices(
            [SimItem("SKU-1", 0, {"price": Decimal(50 + n), "currency_code": "RUB"})]
        )
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price"},
    )
    worker = bootstrap.worker(settings, engine, clock=FakeClock(), rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "300.00")])
        for _ in range(3):
            await w.cycle()

    run_worker(worker, scenario)


def test_a_price_held_for_ozons_hour_reads_as_a_wait_in_find_history_and_status(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    from clitools import Cli

    held_for_the_hour(db_url, engine, site, tmp_path)
    cli = Cli(tmp_path)
    found = cli("find", "SKU-1", db=db_url, env=RU)
    assert found.returncode == 0, found.stderr
    line = " ".join(found.stdout.split())
    assert "ждёт площадку" in line and "(повтор)" not in line, line
    told = cli("history", "SKU-1", db=db_url, env=RU)
    assert told.returncode == 0, told.stderr
    headline = " ".join(told.stdout.split("\n")[1].split())
    assert "состояние: ждёт площадку" in headline, told.stdout
    # sellerwords 1: the table's transition into the wait says it the same way, not a retry
    table = told.stdout.split("\n", 2)[2]
    assert "(повтор)" not in table and "площадку" in table, told.stdout
    status = cli("status", db=db_url, env=RU)
    counted = re.search(r"из них ждут площадку \(не повтор\)\s*│\s*1\s*│", status.stdout)
    assert counted, status.stdout
    # review rev38b: the state's own row over it said «отложено (повтор)» of a wait
    assert "отложено (повтор)" not in status.stdout, status.stdout
    assert re.search(r"отложено: повторы и ожидания\s*│\s*1\s*│", status.stdout), status.stdout


def test_in_english_too_a_price_held_for_ozons_hour_reads_as_a_wait_not_delayed(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """docs: a price held by the marketplace is "waiting for the marketplace" (review ozon,
    item 5: English ``find`` and ``history`` said ``delayed`` while Russian said «ждёт
    площадку»)."""
    from clitools import Cli

    held_for_the_hour(db_url, engine, site, tmp_path)
    cli = Cli(tmp_path)
    found = cli("find", "SKU-1", db=db_url, env={"EXCHANGE_LANG": "en"})
    assert found.returncode == 0, found.stderr
    line = " ".join(found.stdout.split())
    assert "waiting for the marketplace" in line and "delayed" not in line, line
    told = cli("history", "SKU-1", db=db_url, env={"EXCHANGE_LANG": "en"})
    assert told.returncode == 0, told.stderr
    headline = " ".join(told.stdout.split("\n")[1].split())
    assert "state=waiting for the marketplace" in headline, told.stdout
