"""The workbench's find says a channel's wait counted from now (words item 3, as ``exchange
find``): Ozon's hold wrote «уйдёт через 3600 с» when the wait began; the page counts the
seconds left to the delivery's due time (``next_try_at``) instead."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, update
from workbench_helpers import add_operator, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage

TOKEN = "test-token"
HELD = (
    "held: 10 price updates of this product sent within the hour (Ozon's limit); goes in "
    "3600 s, not charged"
)


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


def test_the_find_page_counts_a_waits_seconds_from_now(
    serve: Callable[..., Any], db_url: str, db: Engine, site: SiteSimulator
) -> None:
    stage(db, [price_row("SKU-W", 1, "100.00")])
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    with transaction(db) as connection:
        connection.execute(
            update(deliveries).values(
                state="delayed",
                last_error=HELD,
                next_try_at=datetime.now(UTC) + timedelta(seconds=100),
            )
        )
    base = serve(site_url=site.url, site_token=TOKEN)
    add_operator(db, "olga", "operator")
    page = html.unescape(signed_in(base, "olga").get("/find", params={"q": "SKU-W"}).text)
    # Said in minutes from a minute up (human_age): «уйдёт через 1 мин 39 с».
    left = [int(m) * 60 + int(s) for m, s in re.findall(r"уйдёт через (\d+) мин (\d+) с", page)]
    assert left and all(80 <= n <= 100 for n in left), left
