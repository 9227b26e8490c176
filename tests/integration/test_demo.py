"""The demo shows every kind of outcome it promises, and its site ends consistent."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.demo import fitted, progress_bar, progress_states, run_demo
from exchange.i18n import Lang
from exchange.ops.status import worker_rows


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
    # The one gap the demo stages (DOC-GAP: versions 1, 2 and 4) is its only sequence-gap: a
    # posting of a whole sequence quarantined for a gap is named here with its history.
    gaps = [e for e in report["entries"] if e["reason"] == "sequence-gap"]
    assert [("DOC-GAP", 4)] == [(e["aggregate"], e["version"]) for e in gaps], [
        (e["aggregate"], e["version"], e["history"]) for e in gaps
    ]
    text = output.getvalue()
    # The settings it used, the token masked (issue 24 item 14).
    assert "  EXCHANGE_SITE_TOKEN=***\n" in text and "demo-token" not in text, text
    assert "  EXCHANGE_SITE_URL=http://127.0.0.1:" in text
    assert "effects applied twice at the site 0" in text
    assert "old prices applied over newer ones at the site 0" in text
    assert "site holds the latest delivered price of every SKU and price type: yes" in text
    refused = [e for e in report["entries"] if e["aggregate"] == "SKU-PLAIN"]
    assert [(2, "invalid-contract")] == [(e["version"], e["reason"]) for e in refused]
    # The demo's shop takes 150 requests/s and answers 429 beyond: the worker finds its pace.
    words = " ".join(text.split())  # the console wraps long lines
    assert "the shop takes 150 requests/s: refused with 429 " in words
    assert "none charged to a message); the worker's pace at the end: " in words
    assert_the_worker_retired(tmp_path / "demo.db")


def assert_the_worker_retired(database: Path) -> None:
    """The new operator's review: a worker that ended normally is shown stopped, with when,
    as a SIGTERM'd one is (never «молчит… (ещё считается работающим)» nor a day of «not live»
    with its last pace left over)."""
    engine = make_engine(f"sqlite:///{database}")
    try:
        with transaction(engine, read_only=True) as connection:
            shown = worker_rows(connection, datetime.now(UTC))
    finally:
        engine.dispose()
    assert [("stopped", False)] == [(w["state"], w["live"]) for w in shown], shown
    assert shown[0]["stopped_at"] is not None


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
        # The purchase price is mapped to null: left out on purpose, never quarantined.
        assert "cancelled    not-for-this-shop      3" in text, text
        assert_the_rehearsal_is_told(tmp_path, target, text)
        assert_the_worker_retired(tmp_path / f"demo-{target}.db")


def assert_the_rehearsal_is_told(directory: Path, target: str, text: str) -> None:
    """The shop owner's rehearsal (issue 24 item 14): the EXCHANGE_* settings it used, secrets
    masked, and its report written beside its database."""
    settings = dict(
        line.strip().split("=", 1) for line in text.splitlines() if line.startswith("  EXCHANGE_")
    )
    assert target == settings["EXCHANGE_TARGET"], text
    assert settings["EXCHANGE_DATABASE_URL"].endswith(f"demo-{target}.db")
    for secret in ("demo-password", "cs_demo_secret", "ck_demo_key", "guest:guest"):
        assert secret not in text
    if target == "woocommerce":
        assert "***" == settings["EXCHANGE_WOO_SECRET"]
        assert '"purchase": null' in settings["EXCHANGE_WOO_PRICE_FIELDS"]
    if target == "bitrix":
        assert "***" == settings["EXCHANGE_BITRIX_PASSWORD"]
    report = json.loads((directory / f"quarantine-{target}.json").read_text(encoding="utf-8"))
    assert sum(report["summary"]["by_reason"].values()) == len(report["entries"]) > 0
    assert (directory / f"quarantine-{target}.html").is_file()
    assert f"quarantine-{target}.html" in text


def test_the_rabbitmq_demo_publishes_to_the_real_broker_and_postings_come_back_unroutable(
    tmp_path: Path,
) -> None:
    from brokerkit import require

    from exchange.dev.demo_targets import run_target_demo

    require("RabbitMQ", "127.0.0.1", 5672)
    output = StringIO()
    code = run_target_demo(
        tmp_path, target="rabbitmq", skus=40, console=Console(file=output, width=200)
    )
    text = output.getvalue()
    assert 0 == code, text
    assert "the shop holds the newest delivered price of every SKU: yes" in text
    assert "quarantined  unroutable             3" in text, text
    assert "amqp://guest:***@127.0.0.1:5672/" in text
    assert_the_rehearsal_is_told(tmp_path, "rabbitmq", text)


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_progress_line_fits_80_columns_with_its_count_whole(lang: Lang) -> None:
    """A fresh user's 80-column terminal cut the line at "delivering ━━━━━━━ 3990/39…": the
    label, the bar, the count and the time always fit; the states take what is left."""
    output = StringIO()
    console = Console(file=output, width=80)
    states = {"delivered": 2480, "quarantined": 1014, "cancelled": 1215, "delayed": 1100}
    states |= {"in_progress": 3200, "new": 1031}
    bar, room = progress_bar(console, 3990, lang)
    with bar as progress:
        task = progress.add_task("run", total=3990, states="")
        progress.update(task, completed=3990, states=fitted(progress_states(states, lang), room))
    line = output.getvalue().rstrip("\n")
    assert "\n" not in line and cell_len(line) <= 80, line
    assert " 3990/3990 " in line and re.search(r" \d:\d\d:\d\d ", line), line
    assert line.endswith(", …"), line  # the states that did not fit: said to be left out


def test_the_states_fitted_to_the_room_left_are_whole_states_and_never_wider() -> None:
    parts = ["delivered 2480", "quarantined 14", "cancelled 1215"]
    assert "delivered 2480, quarantined 14, cancelled 1215" == fitted(parts, 80)
    for room in range(0, 50):
        shown = fitted(parts, room)
        assert cell_len(shown) <= max(room, 0), (room, shown)
        assert all(p in parts for p in shown.removesuffix("…").removesuffix(", ").split(", ") if p)
