"""The bench report's goals (issue 13, item 7) from one run's figures: the floor, the worker's
CPU as × the floor against 1.25, the batch API's rate against 12,000, and what the report
prints of them. Figures are made up so that every ratio is exact."""

from __future__ import annotations

from typing import Any

import pytest

from bench.report import goal_lines, goals, tables

MESSAGES = 20_000


def ceiling(best_rate: float = 10_000.0) -> dict[str, Any]:
    """A ceiling whose best client does a request in 1e6 / best_rate µs (100 µs)."""
    return {
        "messages": 5_000,
        "repeats": 1,
        "rows": [
            {"client": "aiohttp+uvloop", "site": "fast", "rate": best_rate, "runs": [best_rate]},
            {"client": "siteclient+uvloop", "site": "fast", "rate": 8_000.0, "runs": [8_000.0]},
        ],
        "best": {"client": "aiohttp+uvloop", "rate": best_rate},
        "httpx": 1_000.0,
    }


def budget(claim_record_us: float = 50.0) -> dict[str, Any]:
    return {
        "messages": MESSAGES,
        "outcome_line_us": 10.0,
        "judge_us": 5.0,
        "body_us": 3.0,
        "batch_item_us": 7.0,
        "claim_record_us_sqlite": claim_record_us,
        "claim_record_us_postgresql": 120.0,
    }


def row(
    database: str,
    batch: bool,
    *,
    cpu_us: float = 300.0,
    window_us: float | None = 180.0,
    site_rate: float = 4_000.0,
    ok: bool = True,
    batch_requests: int | None = None,
) -> dict[str, Any]:
    """A service row: the worker spent cpu_us per message in all, window_us in the window."""
    return {
        "label": f"{database}, {'batch 100' if batch else 'single'}",
        "database": database,
        "workers": 1,
        "site_batch_size": 100 if batch else 1,
        "batch_requests": (200 if batch else 0) if batch_requests is None else batch_requests,
        "messages": MESSAGES,
        "wall_s": 6.0,
        "rate": 3_000.0,
        "site_window_s": MESSAGES / site_rate,
        "site_rate": site_rate,
        "peak_rss_mb": 140.0,
        "peak_rss_mb_each": [140.0],
        "worker_cpu_s": cpu_us * MESSAGES / 1e6,
        "worker_cpu_window_s": None if window_us is None else window_us * MESSAGES / 1e6,
        "site_cpu_s": 1.0,
        "machine_cpu_s": 8.0,
        "cores": 2,
        "checks": {"all_delivered": ok},
        "ok": ok,
    }


def service(**single: Any) -> list[dict[str, Any]]:
    return [
        row("sqlite", False, **single),
        row("postgresql", False, cpu_us=999.0, window_us=999.0),  # never the goal's row
        row("sqlite", True, site_rate=12_500.0),
        row("postgresql", True, site_rate=5_000.0),
    ]


def test_the_floor_is_the_best_request_plus_claim_and_record_on_sqlite() -> None:
    g = goals(ceiling(10_000.0), budget(50.0), service())
    assert g["request_us"] == pytest.approx(100.0)
    assert g["request_client"] == "aiohttp+uvloop"
    assert g["claim_record_us_sqlite"] == 50.0
    assert g["floor_us"] == pytest.approx(150.0)


@pytest.mark.parametrize(
    ("cpu_us", "ratio", "met"),
    [
        (300.0, 2.0, False),
        (187.5, 1.25, True),  # exactly the goal: at most 1.25 × is met
        (188.0, 188.0 / 150.0, False),
        (150.0, 1.0, True),
    ],
)
def test_the_worker_s_cpu_per_message_as_times_the_floor(
    cpu_us: float, ratio: float, met: bool
) -> None:
    g = goals(ceiling(), budget(), service(cpu_us=cpu_us, window_us=cpu_us))
    for part in ("worker_cpu_whole", "worker_cpu_window"):
        assert g[part]["us"] == pytest.approx(cpu_us)
        assert g[part]["ratio"] == pytest.approx(ratio)
        assert g[part]["met"] is met


def test_whole_process_and_window_are_judged_apart() -> None:
    g = goals(ceiling(), budget(), service(cpu_us=300.0, window_us=180.0))
    assert g["worker_cpu_whole"]["ratio"] == pytest.approx(2.0)
    assert g["worker_cpu_whole"]["met"] is False
    assert g["worker_cpu_window"]["ratio"] == pytest.approx(1.2)
    assert g["worker_cpu_window"]["met"] is True


@pytest.mark.parametrize(
    ("site_rate", "met"), [(12_000.0, True), (11_999.0, False), (13_000.0, True)]
)
def test_the_batch_api_on_sqlite_against_12000(site_rate: float, met: bool) -> None:
    rows = [row("sqlite", False), row("sqlite", True, site_rate=site_rate)]
    g = goals(ceiling(), budget(), rows)
    assert g["batch_rate"] == site_rate
    assert g["batch_ratio"] == pytest.approx(site_rate / 12_000)
    assert g["batch_met"] is met


def test_a_run_that_failed_its_checks_meets_no_goal() -> None:
    rows = [
        row("sqlite", False, cpu_us=100.0, window_us=100.0, ok=False),
        row("sqlite", True, site_rate=20_000.0, ok=False),
    ]
    g = goals(ceiling(), budget(), rows)
    assert g["worker_cpu_whole"]["met"] is False
    assert g["worker_cpu_window"]["met"] is False
    assert g["batch_met"] is False
    text = goal_lines(g)
    assert text.count("not met (the run's checks failed)") == 3


def test_what_was_not_measured_is_said_so_and_never_met() -> None:
    g = goals(None, None, [row("sqlite", False, window_us=None)])
    assert g["floor_us"] is None
    assert g["worker_cpu_whole"]["ratio"] is None
    assert g["worker_cpu_window"]["us"] is None
    assert g["batch_rate"] is None
    assert not (g["worker_cpu_whole"]["met"] or g["worker_cpu_window"]["met"] or g["batch_met"])
    assert goal_lines(g).count("not measured") == 3


def test_a_batch_row_without_batch_requests_is_not_the_batch_api() -> None:
    rows = [row("sqlite", False), row("sqlite", True, site_rate=20_000.0, batch_requests=0)]
    g = goals(ceiling(), budget(), rows)
    assert g["batch_rate"] is None
    assert g["batch_met"] is False


def test_the_report_prints_the_goals_with_their_figures() -> None:
    results = {
        "machine": {
            "cpu": "test",
            "cores": 2,
            "ram_gb": 1,
            "python": "3.11",
            "postgresql": "15",
            "sqlite": "3.40",
            "date": "today",
            "commit": "abc",
            "load_at_start": [0.0, 0.0, 0.0],
        },
        "parameters": {
            "messages": MESSAGES,
            "concurrency": 8,
            "log_level": "INFO",
            "ceiling_messages": 5_000,
            "ceiling_repeats": 1,
            "repeats": 1,
            "intake_rows": 1_000_000,
            "quick": False,
        },
        "ceiling": ceiling(),
        "service": service(cpu_us=300.0, window_us=180.0),
        "budget": budget(),
    }
    text = tables(results)
    goals_text = text.split("### Against the goals (issue 13, item 7)", 1)[1]
    assert "100.0 + 50.0 = 150.0 µs" in goals_text
    assert "whole process | 300.0 µs = 2.00 × the floor | ≤ 1.25 × the floor | not met |" in (
        goals_text
    )
    assert "first to last effect | 180.0 µs = 1.20 × the floor | ≤ 1.25 × the floor | met |" in (
        goals_text
    )
    assert "| 12,500 = 1.04 × the goal | ≥ 12,000 | met |" in goals_text
    assert "1.25 × the floor is 187.5 µs" in goals_text
    # the service table carries the window's CPU: 180 µs × 20,000 = 3.6 s
    assert "| 6.0 | 3.6 |" in text


def test_the_floor_in_cpu_is_given_beside_the_goal_s_and_judges_nothing() -> None:
    c, b = ceiling(), budget()
    c["best"]["cpu_us"] = 60.0  # the client's CPU per request
    b["claim_record_cpu_us_sqlite"] = 40.0
    g = goals(c, b, service(cpu_us=300.0, window_us=180.0))
    assert g["cpu_floor_us"] == pytest.approx(100.0)
    assert g["worker_cpu_window"]["ratio_cpu_floor"] == pytest.approx(1.8)
    assert g["worker_cpu_window"]["met"] is True  # 1.2 × the (wall) floor, the goal's
    text = goal_lines(g)
    assert "60.0 + 40.0 = 100.0 µs" in text
    assert "180.0 µs = 1.20 × the floor (1.80 × the floor in CPU) | ≤ 1.25 × the floor | met" in (
        text
    )
