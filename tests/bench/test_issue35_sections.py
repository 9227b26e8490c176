"""The bench sections of issue 35 (bench/run.py: ``peer``, ``scale``, ``growth``): a tiny run of
each measures, checks and reports; their goals are read as the issue sets them; a bad size is
one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.report import peer_table, scale_table
from bench.run import arguments

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(600)
def test_a_tiny_run_of_each_section_measures_checks_and_reports(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--sections",
            "peer,scale,growth",
            "--peer-skus",
            "30",
            "--peer-versions",
            "3",
            "--scale-messages",
            "60",
            "--scale-latency-ms",
            "5",
            "--growth-sizes",
            "10000,20000",
            "--growth-messages",
            "100",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
        cwd=ROOT,
    )
    assert 0 == out.returncode, out.stdout[-1500:] + out.stderr[-1500:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert "errors" not in results
    peer = results["peer"]
    assert [30, 30, 30] == [r["messages"] for r in peer["service"]] + [peer["peer"]["jobs"]]
    assert all(r["ok"] for r in peer["service"]) and peer["peer"]["ok"]
    assert {"cancelled": 60, "delivered": 30} == peer["service"][1]["states"]
    assert peer["ratio"] == pytest.approx(peer["service"][1]["rate"] / peer["peer"]["rate"])
    scale = results["scale"]
    assert [1, 2, 4] == [r["workers"] for r in scale["rows"]]
    assert all(r["ok"] and r["messages"] == 60 for r in scale["rows"])
    assert 1.0 == scale["rows"][0]["ratio"]
    growth = results["growth"]
    assert [("sqlite", 10_000), ("sqlite", 20_000), ("postgresql", 10_000)] == [
        (r["database"], r["already"]) for r in growth[:3]
    ]
    readme = (tmp_path / "README.md").read_text()
    for heading in (
        "### The peer: procrastinate on issue 35's job",
        "### PostgreSQL, several workers where the shop is the limit",
        "### Claim and record with a long history in the table",
    ):
        assert heading in readme


@pytest.mark.parametrize(
    "argv",
    [
        ["--growth-sizes", "5000"],
        ["--growth-sizes", "ten"],
        ["--scale-latency-ms", "-1"],
        ["--peer-skus", "0"],
    ],
)
def test_a_bad_size_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        arguments(argv)
    assert 2 == stopped.value.code
    assert "Traceback" not in capsys.readouterr().err


def service_row(label: str, rate: float, wall: float) -> dict[str, Any]:
    return {
        "label": label,
        "rate": rate,
        "site_rate": rate * 2,
        "wall_s": wall,
        "runs": [rate],
        "checks": {"all_delivered": True},
        "ok": True,
    }


def test_the_peer_ratio_meets_the_goal_at_five_times_and_misses_below() -> None:
    peer = {
        "skus": 5_000,
        "versions": 10,
        "service": [service_row("sqlite", 600.0, 8.0), service_row("postgresql", 500.0, 10.0)],
        "peer": {
            "peer": "procrastinate 3.10.0",
            "jobs": 5_000,
            "rate": 100.0,
            "site_rate": 100.0,
            "seconds": 50.0,
            "runs": [100.0],
            "checks": {"all_succeeded": True},
            "ok": True,
        },
        "ratio": 5.0,
        "ratio_at_site": 10.0,
        "postgresql_time_over_sqlite": 1.25,
        "load": [1.0, 1.0, 1.0],
    }
    assert "ran at 5.00x the peer's delivery alone (meets the goal of 5x)" in peer_table(peer)
    peer["ratio"] = 4.99
    assert "(misses the goal of 5x)" in peer_table(peer)


def test_two_and_four_workers_are_set_against_1_8_and_3_2_at_the_site() -> None:
    rows = []
    for workers, at_site in ((1, 1.0), (2, 1.8), (4, 3.1)):
        row = service_row(f"{workers} workers", 400.0 * at_site, 10.0)
        row.update(workers=workers, ratio=at_site, ratio_at_site=at_site, machine_cpu_s=None)
        row["cores"] = 2
        rows.append(row)
    text = scale_table({"messages": 20_000, "latency_ms": 20.0, "rows": rows, "load": [1.0]})
    assert "| 1.8x: meets |" in text
    assert "| 3.2x: misses |" in text
