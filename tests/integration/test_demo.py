"""The demo shows every kind of outcome it promises, and its site ends consistent."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from rich.console import Console

from exchange.dev.dbkit import sqlite_copy
from exchange.dev.demo import run_demo


def test_demo_ends_idle_with_every_promised_quarantine_reason_and_no_double_effect(
    tmp_path: Path,
) -> None:
    output = StringIO()
    assert 0 == run_demo(tmp_path, skus=100, console=Console(file=output, width=120))
    report = json.loads((tmp_path / "quarantine.json").read_text(encoding="utf-8"))
    assert {
        "http-422",
        "invalid-contract",
        "retry-limit",
        "sequence-gap",
        "unknown-kind",
        "unsupported-schema",
        "version-conflict",
    } == set(report["summary"]["by_reason"])
    text = output.getvalue()
    assert "effects applied twice at the site 0" in text
    assert "old prices applied over newer ones at the site 0" in text
    assert "site holds the latest delivered price of every SKU and price type: yes" in text
    refused = [e for e in report["entries"] if e["aggregate"] == "SKU-PLAIN"]
    assert [(2, "invalid-contract")] == [(e["version"], e["reason"]) for e in refused]
    # The demo's shop takes 150 requests/s and answers 429 beyond: the worker finds its pace.
    words = " ".join(text.split())  # the console wraps long lines
    assert "the shop takes 150 requests/s: refused with 429 " in words
    assert "none charged to a message); the worker's pace at the end: " in words


def test_the_demo_summary_fails_when_the_site_applied_an_old_price_over_a_newer_one(
    tmp_path: Path,
) -> None:
    # The figures come from what the site applied: a stale send shows as NO, not as "yes".
    import httpx

    from exchange.db.engine import make_engine
    from exchange.dev import demo
    from exchange.dev.sitesim import SiteSimulator

    engine = make_engine(sqlite_copy(tmp_path / "x.db"))
    with SiteSimulator(demo.TOKEN, check_versions=False) as site:
        with httpx.Client(
            base_url=site.url, headers={"Authorization": f"Bearer {demo.TOKEN}"}
        ) as c:
            for version in (5, 1):  # v1 after v5: what the service must never send
                key = f"price.SKU-1/retail.v{version}"
                document = {
                    "message_id": key,
                    "kind": "price",
                    "aggregate": "SKU-1/retail",
                    "version": version,
                    "payload": {"sku": "SKU-1", "price": "1.00"},
                    "created_at": "2026-08-23T07:20:00Z",
                }
                c.post("/api/v1/updates", json=document, headers={"Idempotency-Key": key})
        summary = demo._summary(engine, site, 0.0)
    engine.dispose()
    assert (1, False, False) == (summary["stale_writes"], summary["site_matches"], summary["ok"])


def test_the_target_demos_end_idle_with_the_newest_price_of_every_sku_at_the_shop(
    tmp_path: Path,
) -> None:
    from exchange.dev.demo_targets import run_target_demo

    for target, reasons in (
        ("woocommerce", ["unknown-sku", "unmapped-price-type"]),
        ("bitrix", ["unmapped-price-type"]),
    ):
        output = StringIO()
        code = run_target_demo(
            tmp_path, target=target, skus=60, console=Console(file=output, width=200)
        )
        text = output.getvalue()
        assert 0 == code, text
        assert "the shop holds the newest delivered price of every SKU: yes" in text
        assert all(f"quarantined  {reason}" in text for reason in reasons), text
