"""bench/single_cost.py (issue 31 item 9): a tree's own code migrates, stages and reads back,
and a run can be the reload (several versions a SKU, the batch API)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bench import single_cost
from bench.harness import ROOT, SiteProcess


@pytest.mark.subprocess
def test_the_trees_own_code_stages_every_version_of_every_sku(tmp_path: Path) -> None:
    path = tmp_path / "staged.db"

    url = single_cost._tree_python(ROOT, single_cost._PREPARE, str(path), "7", "3")

    assert url == f"sqlite:///{path}"
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT aggregate, aggregate_version, payload FROM staging_intents ORDER BY id"
        ).fetchall()
    assert [(a, v) for a, v, _ in rows] == [
        (f"SKU-{n:07d}", v) for v in (1, 2, 3) for n in range(7)
    ]
    assert json.loads(rows[0][2]) == {
        "sku": "SKU-0000000",
        "price": "1.00",
        "currency": "RUB",
        "price_type": "retail",
    }
    assert json.loads(single_cost._tree_python(ROOT, single_cost._STATES, url)) == {}


@pytest.mark.subprocess
def test_a_tiny_reload_delivers_the_latest_version_of_each_sku_in_batches(
    tmp_path: Path,
) -> None:
    site = SiteProcess("fast", tmp_path)
    try:
        run = single_cost.one_run(
            ROOT, site, tmp_path, 30, None, "tiny", versions=3, site_batch_size=100
        )
    finally:
        site.stop()

    assert run["ok"], run
    assert run["states"] == {"delivered": 30, "cancelled": 60}
    assert run["batch_requests"] >= 1
    assert run["whole_us"] > 0 and run["worker_cpu_s"] > 0
    assert not list(tmp_path.glob("tiny.db*"))  # each run's database goes with it
