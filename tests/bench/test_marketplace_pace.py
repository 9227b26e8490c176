"""The bench's marketplace-pace section (issue 32 item 6) at a tiny scale: each marketplace's
simulator with its limits lowered delivers every price, nothing is quarantined, and Ozon's hour
(another sender's updates, twelve versions of a product) lands every latest price within 61
scaled minutes, the check run. What it promises, not its speed (the figures are the bench's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import marketplace_pace


@pytest.mark.timeout(600)  # Ozon's hour at ×60 is a real minute per database, and three runs
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_tiny_run_delivers_everything_and_ozons_latest_prices_land(
    database: str, tmp_path: Path
) -> None:
    found = marketplace_pace.measure(
        40, databases=(database,), limit_skus=2, windows=4, hour_scale=60.0
    )
    rows = {row["marketplace"]: row for row in found["rows"]}
    assert set(rows) == {"ozon", "wildberries", "yandex-market"}
    for name, row in rows.items():
        assert row["checks"] == {
            "settled": True,
            "all_delivered": True,
            "nothing_quarantined": True,
        }, (name, row["states"])
        assert row["accepted_prices"] == 40, name
        assert row["quarantined"] == 0 and row["ok"], name
        assert row["windows"] > 1 and row["ratio"] > 0, name
    (hour,) = found["ozon_hour"]
    assert hour["checks"]["ozon_refused_the_used_ones"], hour
    assert hour["checks"]["target_held_the_busy_ones"], hour
    assert hour["checks"]["every_latest_price_landed"], hour
    assert hour["checks"]["refused_landed_within_61_min"], hour
    assert hour["checks"]["held_landed_within_61_min"], hour
    assert hour["ok"] and hour["states"].get("quarantined", 0) == 0, hour
    out = tmp_path / "out"
    marketplace_pace.write(found, out)
    text = (out / "marketplaces.md").read_text(encoding="utf-8")
    assert "<!-- marketplace-pace:start -->" in text and "| wildberries |" in text
    assert "Ozon's hour" in text and (out / "marketplace-pace.json").exists()
