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


def _row(ratio: float) -> dict[str, object]:
    meets = {"windows": True, "ratio": ratio >= marketplace_pace.RATIO_GOAL, "refused": True}
    return {
        "marketplace": "wildberries",
        "database": "sqlite",
        "limit": "10 requests / 6 sim s",
        "batch_size": 1000,
        "windows": 31.0,
        "allowed_rate": 333.33,
        "accepted_rate": round(333.33 * ratio, 2),
        "ratio": ratio,
        "requests": 756,
        "refused": 0,
        "refused_share": 0.0,
        "quarantined": 0,
        "load_before": [2.0, 2.0, 2.0],
        "ok": True,
        "meets": {**meets, "quarantined": True},
    }


@pytest.mark.parametrize(("ratio", "code"), [(0.83, 1), (0.95, 0)])
def test_a_pace_below_its_goal_says_no_in_the_table_and_fails_the_exit_code(
    ratio: float, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every price delivered (``ok``) at 0.83 of the allowed rate is still a missed goal
    (issue 32 item 6: ≥ 0.85): the table's «goals met» says NO with the ratio and the goal,
    and the exit code is 1, so a regression is seen (it read «yes» and exited 0)."""
    found = {"prices": 5000, "rows": [_row(ratio)], "ozon_hour": [], "goals": {}, "command": ""}
    monkeypatch.setattr(marketplace_pace, "measure", lambda *a, **k: found)

    assert code == marketplace_pace.main(["--only", "wildberries", "--no-limit-run"])

    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("| wildberries")]
    said = line.rstrip(" |").rsplit("|", 1)[1].strip()
    assert said == ("NO: ratio 0.83 < 0.85" if code else "yes"), line
