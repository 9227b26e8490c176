"""Seller review 35, the exported report: a price ``invalid-for-channel`` of which 1C has since
sent a newer version is advised cancel (a retry would only end superseded by the newer one), in
the file ``exchange quarantine export`` writes, as the workbench's message page advises: its
row's «Что сделать» and command say cancel, the reason's summary row says so of it alone (the
reason's bulk retry stays for the others), and JSON says why (``newer_version_sent``). A price
invalid for its channel with no newer version keeps correct-and-retry."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from clitools import Cli, describe
from reporttools import parse_csv
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row
from exchange.report.words import label
from tests.support.second_channel import on_the_one, taken

messages = one_channel_messages()
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
NEWER = "1С с тех пор прислала более новую версию этой цены"
REASON = "invalid-for-channel"


def _ids(engine: Engine) -> dict[str, str]:
    """The first version's message id of each SKU."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.message_id).where(messages.c.version == 1)
        ).all()
    return {aggregate.split("/")[0]: message_id for aggregate, message_id in rows}


def test_the_exported_report_advises_cancel_for_an_invalid_price_with_a_newer_version(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    taken(
        engine,
        [
            price_row("SKU-1", 1, "10.50", aggregate="SKU-1/retail"),
            price_row("SKU-2", 1, "20.50", aggregate="SKU-2/retail"),
        ],
        NOW,
    )
    for aggregate in ("SKU-1/retail", "SKU-2/retail"):
        on_the_one(engine, aggregate, state="quarantined", reason=REASON)
    taken(engine, [price_row("SKU-1", 2, "11.00", aggregate="SKU-1/retail")], NOW)  # newer
    ids = _ids(engine)

    cli = Cli(tmp_path)
    for name in ("report.csv", "report.json"):
        result = cli("quarantine", "export", "--output", name, db=db_url)
        assert 0 == result.returncode, describe(result)

    csv_report = parse_csv((tmp_path / "report.csv").read_bytes(), ";")
    said = {row["Код сообщения"]: row[label("next_check", "ru")] for row in csv_report.rows}
    newer, alone = said[ids["SKU-1"]], said[ids["SKU-2"]]
    assert NEWER in newer, newer
    assert f'exchange quarantine cancel {ids["SKU-1"]} --note "…"' in newer, newer
    assert "quarantine retry" not in newer, newer
    # no newer version: correct it, then retry, as before
    assert NEWER not in alone and f"quarantine retry {ids['SKU-2']}" in alone, alone
    # the reason's summary row: the bulk retry for the others, the newer one cancelled alone
    (summary,) = [row[2] for row in csv_report.reasons if row[0] == REASON]
    assert f"exchange quarantine retry --reason {REASON}" in summary, summary
    first, second = summary.split("\n")
    assert NEWER not in first, summary
    assert second.startswith("Из них 1: ") and NEWER in second, summary
    assert "отмените каждую командой из её строки" in second, summary
    assert "--reason" not in second, summary  # the reason's command would cancel the others

    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    by_id = {entry["message_id"]: entry for entry in report["entries"]}
    assert by_id[ids["SKU-1"]]["newer_version_sent"] is True
    assert by_id[ids["SKU-2"]]["newer_version_sent"] is False
    assert NEWER in by_id[ids["SKU-1"]]["next_check"]
