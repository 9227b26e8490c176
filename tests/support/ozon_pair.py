"""An Ozon channel carrying two of 1C's price types as one pair (docs/marketplaces.md, the pair
rule): 1C's ``retail`` as Ozon's price and its ``old`` as old_price, on the simulator's clock.
The set-up tests/integration/test_marketplace_pair_quarantine.py and
tests/integration/test_pair_wait_words.py share."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import fast_settings, price_row
from exchange.domain.clock import FakeClock
from exchange.worker import Worker


def typed(version: int, price: str, price_type: str) -> dict[str, Any]:
    """1C's price of SKU-1 of ``price_type`` (``SKU-1/old`` for ``old``), as staged."""
    row = price_row("SKU-1", version, price)
    if price_type != "retail":
        row["aggregate"] = f"SKU-1/{price_type}"
        row["payload"] = row["payload"].replace('"retail"', f'"{price_type}"')
    return row


def pair_worker(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> tuple[FakeClock, Worker]:
    """The worker of the one channel on ``site`` (``retail`` -> price, ``old`` -> old_price)
    and its fake clock."""
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price", "old": "old_price"},
    )
    clock = FakeClock()
    return clock, bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))
