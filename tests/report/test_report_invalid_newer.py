"""Seller review 35, the exported report: a price ``invalid-for-channel`` of which 1C has since
sent a newer version is advised cancel (a retry would only end superseded by the newer one), in
the file ``exchange quarantine export`` writes, as the workbench's message page advises: its
row's «Что сделать» and command say cancel, the reason's summary row says so of it alone (the
reason's bulk retry stays for the others), and JSON says why (``newer_version_sent``). A price
invalid for its channel with no newer version keeps correct-and-retry."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import openpyxl
from clitools import Cli, describe
from reporttools import parse_csv, parse_html
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row
from exchange.report.words import label
from tests.support.invalid_newer_scene import invalid_newer_scene
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


GOES = "та уйдёт вместо неё"
HELD = "но и та в карантине"
DELIVERED_THERE = "на площадку уже доставлена более новая версия"


def _said(text: str) -> str:
    return " ".join(text.split())


def test_the_report_says_what_a_newer_version_does_and_counts_those_it_says_it_of(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Review 36: a newer version in quarantine too was said to go in the price's place (item
    4: nothing goes, buyers keep 1000); the summary's «Из них N» counted the rows superseded
    after quarantine, which say another advice (item 5); and that advice said «на сайт» on a
    Yandex Market channel (item 6). In every format the command line exports."""
    ids = invalid_newer_scene(engine, NOW)
    cli = Cli(tmp_path)
    for name in ("report.csv", "report.json", "report.html", "report.xlsx"):
        result = cli("quarantine", "export", "--output", name, db=db_url)
        assert 0 == result.returncode, describe(result)

    csv_report = parse_csv((tmp_path / "report.csv").read_bytes(), ";")
    said = {row["Код сообщения"]: row[label("next_check", "ru")] for row in csv_report.rows}
    held, goes, superseded = said[ids["V-2 v2"]], said[ids["V-3 v1"]], said[ids["V-1 v2"]]
    assert HELD in held and GOES not in held, held  # item 4: v3 is in quarantine too
    assert f'exchange quarantine cancel {ids["V-2 v2"]} --note "…"' in held, held
    assert GOES in goes and HELD not in goes, goes  # v2 is on its way: it goes
    assert DELIVERED_THERE in superseded and "сайт" not in superseded, superseded  # item 6
    assert GOES not in superseded and HELD not in superseded, superseded
    # item 5: each «Из них N» counts the rows that say its advice, no superseded one (V-3 v1
    # and V-6 v1 go; V-2 v2 held; V-5 v2 withheld by the marketplace: rev36b)
    (summary,) = [row[2] for row in csv_report.reasons if row[0] == REASON]
    lines = summary.split("\n")
    counted = [line.split(":", 1)[0] for line in lines[1:]]
    assert counted == ["Из них 2", "Из них 1", "Из них 1"], summary
    assert GOES in lines[1] and HELD in lines[2], summary
    assert GOES not in lines[0] and HELD not in lines[0], summary

    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    by_id = {entry["message_id"]: entry for entry in report["entries"]}
    assert by_id[ids["V-2 v2"]]["newer_version_held"] is True
    assert by_id[ids["V-3 v1"]]["newer_version_held"] is False
    assert HELD in by_id[ids["V-2 v2"]]["next_check"]

    page = _said(parse_html((tmp_path / "report.html").read_bytes()).all_text)
    book = openpyxl.load_workbook(io.BytesIO((tmp_path / "report.xlsx").read_bytes()))
    cells = _said(
        " ".join(
            str(cell.value)
            for sheet in book
            for row in sheet.iter_rows()
            for cell in row
            if cell.value is not None
        )
    )
    for text in (page, cells):
        assert text.count("Из них 1: ") == 2 and text.count("Из них 2: ") == 1, text
        assert "Из них 3" not in text, text
        assert HELD in text and DELIVERED_THERE in text, text
        assert "на сайт уже доставлена" not in text, text


WITHHELD = "но площадка придерживает её в собственном карантине цен"
WITHHELD_EN = "but the marketplace withholds that one in its own price quarantine"


def _cells(path: Path) -> str:
    book = openpyxl.load_workbook(io.BytesIO(path.read_bytes()))
    return _said(
        " ".join(
            str(cell.value)
            for sheet in book
            for row in sheet.iter_rows()
            for cell in row
            if cell.value is not None
        )
    )


def test_the_report_says_a_newer_version_the_marketplace_withholds_goes_nowhere_until_released(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Review rev36b, item 1: where the newer version is not on its way but withheld by the
    marketplace (its own price quarantine holds it), the advice said «та уйдёт вместо неё»,
    though buyers do not see it until someone releases it. Its own advice: cancel this one,
    then decide on the newer one in the withheld list; the summary counts exactly its rows,
    on a line of its own. In every format the command line exports, Russian and English."""
    ids = invalid_newer_scene(engine, NOW)
    cli = Cli(tmp_path)
    for lang in ("ru", "en"):
        for fmt in ("csv", "json", "html", "xlsx"):
            name = f"report-{lang}.{fmt}"
            result = cli("quarantine", "export", "--output", name, "--lang", lang, db=db_url)
            assert 0 == result.returncode, describe(result)

    csv_report = parse_csv((tmp_path / "report-ru.csv").read_bytes(), ";")
    said = {row["Код сообщения"]: row[label("next_check", "ru")] for row in csv_report.rows}
    withheld, goes, alone = said[ids["V-5 v2"]], said[ids["V-6 v1"]], said[ids["V-5 v4"]]
    # V-5 v2: v3 withheld by the marketplace, v4 in quarantine too: nothing goes in its place
    assert WITHHELD in withheld and GOES not in withheld and HELD not in withheld, withheld
    assert "покупатели видят цену, доставленную раньше, пока новую не выпустят" in withheld
    assert "список придержанных цен (exchange withheld list)" in withheld, withheld
    assert f'exchange quarantine cancel {ids["V-5 v2"]} --note "…"' in withheld, withheld
    assert "quarantine retry" not in withheld and "сайт" not in withheld, withheld
    # V-6 v1: v2 withheld, but v3 on its way: that one goes
    assert GOES in goes and WITHHELD not in goes, goes
    assert NEWER not in alone and f"quarantine retry {ids['V-5 v4']}" in alone, alone
    # the summary: a line of its own, counting V-5 v2 alone
    (summary,) = [row[2] for row in csv_report.reasons if row[0] == REASON]
    ours = [line for line in summary.split("\n") if WITHHELD in line]
    assert len(ours) == 1 and ours[0].startswith("Из них 1: "), summary
    assert GOES not in ours[0] and HELD not in ours[0], summary
    assert "--reason" not in ours[0], summary  # the reason's command would cancel the others

    report = json.loads((tmp_path / "report-ru.json").read_text(encoding="utf-8"))
    by_id = {entry["message_id"]: entry for entry in report["entries"]}
    assert by_id[ids["V-5 v2"]]["newer_version_withheld"] is True
    assert by_id[ids["V-5 v2"]]["newer_version_held"] is False
    assert by_id[ids["V-5 v2"]]["newer_version_sent"] is True
    for other in ("V-2 v2", "V-3 v1", "V-6 v1", "V-5 v4", "V-1 v2"):
        assert by_id[ids[other]]["newer_version_withheld"] is False, other
    assert WITHHELD in by_id[ids["V-5 v2"]]["next_check"]

    page = _said(parse_html((tmp_path / "report-ru.html").read_bytes()).all_text)
    for text in (page, _cells(tmp_path / "report-ru.xlsx")):
        # once in its row, once in the summary's «Из них 1»
        assert text.count(WITHHELD) == 2, text
        assert "exchange withheld list" in text, text

    english = json.loads((tmp_path / "report-en.json").read_text(encoding="utf-8"))
    advice = {entry["message_id"]: entry["next_check"] for entry in english["entries"]}
    assert WITHHELD_EN in advice[ids["V-5 v2"]], advice[ids["V-5 v2"]]
    assert "which goes in its place" not in advice[ids["V-5 v2"]], advice[ids["V-5 v2"]]
    assert "the withheld list (exchange withheld list)" in advice[ids["V-5 v2"]]
    assert "which goes in its place" in advice[ids["V-6 v1"]], advice[ids["V-6 v1"]]
    en_csv = parse_csv((tmp_path / "report-en.csv").read_bytes(), ",")
    en_said = {row["Message ID"]: row[label("next_check", "en")] for row in en_csv.rows}
    assert WITHHELD_EN in en_said[ids["V-5 v2"]], en_said[ids["V-5 v2"]]
    en_page = _said(parse_html((tmp_path / "report-en.html").read_bytes()).all_text)
    for text in (en_page, _cells(tmp_path / "report-en.xlsx")):
        assert text.count(WITHHELD_EN) == 2, text
