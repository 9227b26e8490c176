"""The bench's fan-out section (issue 31 item 9): a tiny real run delivers every price once to
every channel's own site and reports per price per channel; each extra channel's cost is set
against the first channel's; the table lands between its markers in fanout.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import fanout


def _row(database: str, channels: int, cpu: float, wall: float) -> dict[str, Any]:
    return {"database": database, "channels": channels, "cpu_s": cpu, "wall_s": wall}


def test_each_extra_channel_is_set_against_the_first_channels_cost() -> None:
    rows = [
        _row("sqlite", 1, 10.0, 20.0),
        _row("sqlite", 2, 16.0, 30.0),
        _row("sqlite", 4, 40.0, 90.0),
        _row("postgresql", 1, 8.0, 10.0),
        _row("postgresql", 2, 18.0, 30.0),
    ]
    fanout.extra_channel_cost(rows)
    assert "extra_cpu_ratio" not in rows[0]
    assert (rows[1]["extra_cpu_ratio"], rows[1]["extra_wall_ratio"]) == (0.6, 0.5)
    assert (rows[2]["extra_cpu_ratio"], rows[2]["extra_wall_ratio"]) == (1.0, 1.167)
    assert rows[2]["meets_goal"] is True  # at most what the first channel costs
    assert rows[4]["extra_cpu_ratio"] == 1.25 and rows[4]["meets_goal"] is False


def test_a_tiny_run_delivers_every_price_once_to_each_channel(tmp_path: Path) -> None:
    found = fanout.measure(40, (1, 2), ("sqlite",), scratch=tmp_path)
    rows = found["rows"]
    assert [(r["channels"], r["deliveries"], r["ok"]) for r in rows] == [
        (1, 40, True),
        (2, 80, True),
    ]
    assert all(r["checks"]["one_effect_per_price_per_site"] for r in rows)
    assert rows[1]["cpu_us_per_delivery"] > 0 and "extra_cpu_ratio" in rows[1]
    page = tmp_path / "out" / "fanout.md"
    page.parent.mkdir()
    page.write_text("# Fan-out\n\nwords\n\n<!-- fanout:start -->\nold\n<!-- fanout:end -->\n")
    fanout.write(found, tmp_path / "out")
    text = page.read_text()
    assert text.startswith("# Fan-out\n\nwords\n") and "old" not in text
    assert "| sqlite | 2 | 80 |" in text
    assert (tmp_path / "out" / "fanout.json").exists()
