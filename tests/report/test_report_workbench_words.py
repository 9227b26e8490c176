"""A report in Russian says the service's English cause as the workbench's pages do, and an
export made on the workbench says «Что сделать» with the pages' buttons, not commands; the
command line's report keeps its commands, and English and JSON keep the stored text."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import openpyxl
from reporttools import NOW, parse_csv, parse_html

from exchange.report.collect import render
from exchange.report.model import Entry, Report
from exchange.report.words import COLUMNS, label
from exchange.words import file_steps, word

ENGLISH = "price payload: price: must be at least 0 and below 10^12"
RUSSIAN = "цена (price): значение должно быть от 0 и меньше 10^12"
COMMAND = re.compile(r"exchange quarantine (?:retry|cancel)")

REJECTED = Entry(
    message_id="rejected-139",
    kind="price",
    aggregate="SKU-139",
    version=1,
    reason="invalid-contract",
    attempts=0,
    last_status=None,
    last_error=ENGLISH,
    source_ref="Установка цен номенклатуры 000139",
    first_seen=NOW,
    quarantined_at=NOW,
    rejected_row=True,
    staging_id=139,
    payload='{"sku": "SKU-139", "price": "-1"}',
)
# A site's refusal: the status stays as it is, the shop's answer too.
REFUSED = replace(
    REJECTED,
    message_id="price:SKU-7:1",
    reason="http-422",
    last_status=422,
    last_error='HTTP 422: {"code": "rest_invalid_param"}',
    rejected_row=False,
    staging_id=None,
)
CLI = Report(generated_at=NOW, entries=(REJECTED, REFUSED))
WORKBENCH = replace(CLI, steps=file_steps("ru"))  # what the workbench's export uses


def _csv_rows(report: Report, lang: str = "ru") -> list[dict[str, str]]:
    return parse_csv(render(report, "csv", lang), ";" if lang == "ru" else ",").rows  # type: ignore[arg-type]


def test_the_russian_report_says_the_cause_in_russian_and_keeps_the_http_status() -> None:
    for report in (CLI, WORKBENCH):
        rows = _csv_rows(report)
        column = label("last_result", "ru")
        assert rows[0][column] == RUSSIAN
        assert rows[1][column] == 'HTTP 422: {"code": "rest_invalid_param"}'
        sheet = openpyxl.load_workbook(io.BytesIO(render(report, "xlsx", "ru")))[
            label("detail_sheet", "ru")
        ]
        cells = [[c.value for c in row] for row in sheet.iter_rows()]
        at = COLUMNS.index("last_result")
        assert cells[1][at] == RUSSIAN, cells[1]
        page = parse_html(render(report, "html", "ru")).all_text
        assert RUSSIAN in page and "must be at least" not in page


def test_english_and_json_keep_the_stored_text() -> None:
    assert _csv_rows(CLI, "en")[0][label("last_result", "en")] == ENGLISH
    entries = json.loads(render(WORKBENCH, "json", "ru"))["entries"]
    assert entries[0]["last_error"] == ENGLISH


def test_a_workbench_export_names_the_pages_buttons_and_no_command() -> None:
    cancel = word("cancel", "ru")
    for fmt in ("csv", "html", "xlsx", "json"):
        data = render(WORKBENCH, fmt, "ru")  # type: ignore[arg-type]
        text = (
            "\n".join(
                str(c.value)
                for ws in openpyxl.load_workbook(io.BytesIO(data)).worksheets
                for row in ws.iter_rows()
                for c in row
            )
            if fmt == "xlsx"
            else data.decode("utf-8-sig")
        )
        assert not COMMAND.search(text), (fmt, COMMAND.search(text))
        assert "Команда:" not in text, fmt
        assert f"«{cancel}»" in text, fmt


def test_the_html_report_says_reasons_in_the_workbench_words_and_where_the_buttons_are() -> None:
    """The new operator's review: the HTML report said bare codes («http-422») where the
    workbench says «сайт отклонил (http-422)», and «нажмите «Снять с отправки навсегда»» in a
    file with no buttons. Each reason in the workbench's words with its code beside, and each
    button named with the page it is on."""
    for report in (CLI, WORKBENCH):
        page = parse_html(render(report, "html", "ru")).all_text
        assert "сайт отклонил (http-422)" in page, page
        assert "(invalid-contract)" in page, page
        table = re.search(
            r'<table class="reasons">.*?</table>', render(report, "html", "ru").decode()
        )
        assert table and ">http-422<" not in table.group(0), table
    page = parse_html(render(WORKBENCH, "html", "ru")).all_text
    cancel = word("cancel", "ru")
    assert f"нажмите «{cancel}»" in page and "на странице «Карантин» рабочего места" in page
    english = parse_html(render(replace(CLI, steps=file_steps("en")), "html", "en")).all_text
    assert "rejected by the site (http-422)" in english
    assert "on the workbench's Quarantine page" in english


def test_the_command_lines_report_keeps_its_commands() -> None:
    rows = _csv_rows(CLI)
    said = rows[0][label("next_check", "ru")]
    assert said.endswith('Команда: exchange quarantine cancel rejected-139 --note "…"'), said


def _summary_advice(report: Report, fmt: str) -> dict[str, str]:
    """«Что сделать» of each reason's row in the summary of ``fmt`` (Russian)."""
    data = render(report, fmt, "ru")  # type: ignore[arg-type]
    if fmt == "xlsx":
        sheet = openpyxl.load_workbook(io.BytesIO(data)).worksheets[0]
        rows = [[c.value for c in row] for row in sheet.iter_rows()]
    else:
        rows = [line.split(";", 2) for line in data.decode("utf-8-sig").splitlines()]
    said = {
        str(r[0]): str(r[2])
        for r in rows
        if len(r) > 2 and r[0] in ("http-422", "invalid-contract")
    }
    return {k: v.strip('"').replace('""', '"') for k, v in said.items()}


def test_the_command_lines_summary_names_each_reasons_command_in_russian() -> None:
    """The translator's review: the summary rows of `exchange quarantine export --output q.csv`
    read «повторите отправку (retry)…; отмените эту запись»: an English word and no command,
    where the runbook promises the command. Each reason's advice names the command for all
    its entries, and no bare English word is left once the commands are taken out."""
    for fmt in ("csv", "xlsx"):
        said = _summary_advice(CLI, fmt)
        assert 'exchange quarantine retry --reason http-422 --note "…"' in said["http-422"], said
        assert 'exchange quarantine cancel --reason http-422 --note "…"' in said["http-422"], said
        assert (
            'exchange quarantine cancel --reason invalid-contract --note "…"'
            in said["invalid-contract"]
        ), said
        for advice in said.values():
            words = re.sub(r'exchange quarantine \w+ --reason \S+ --note "…"', "", advice)
            words = re.sub(r"\([a-z]+-[a-z0-9-]+\)", "", words)  # a reason's code beside its name
            assert not re.search(r"[A-Za-z]{2,}", words), (fmt, words)


def test_a_workbench_export_says_where_the_buttons_are_once_per_advice() -> None:
    """The operator's review: «…затем нажмите «Снять с отправки навсегда» на странице «Карантин»
    рабочего места или нажмите «Повторить» на странице «Карантин» рабочего места.» The place
    is said once, after the buttons, in the summary and in each entry."""
    place = "на странице «Карантин» рабочего места"
    advice = list(_summary_advice(WORKBENCH, "csv").values()) + [
        row[label("next_check", "ru")] for row in _csv_rows(WORKBENCH)
    ]
    two = [a for a in advice if "«Повторить»" in a]
    assert two and all("Кнопки — " + place in a for a in two), two
    for said in advice:
        assert said.count(place) == 1, said
