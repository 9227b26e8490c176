"""The demo shows every kind of outcome it promises, and its site ends consistent."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from rich.console import Console

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
    assert "site holds the latest delivered price of every SKU: yes" in text
    # The demo's shop takes 150 requests/s and answers 429 beyond: the worker finds its pace.
    words = " ".join(text.split())  # the console wraps long lines
    assert "the shop takes 150 requests/s: refused with 429 " in words
    assert "none charged to a message); the worker's pace at the end: " in words
