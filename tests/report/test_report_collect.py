"""What the report reads from the database (contract 8), on SQLite and on PostgreSQL: every
quarantined message with the contract's columns, its history, the superseded marker, the
deliveries per day, and the masking of what must not be shown.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime, timedelta

import openpyxl
from reportdb import MASK_FIELDS, PASSWORD, SENT_AFTER_S, Built
from reporttools import CYRILLIC, HYPERLINK, LONG, SCRIPT, TOKEN, parse_csv, parse_html
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.domain.clock import FakeClock
from exchange.ops.quarantine import Filters, list_quarantined
from exchange.report.collect import FORMATS, LANGS, Report, collect, known_secrets, render
from exchange.report.words import label
from exchange.settings import Settings, load_settings

START = datetime(2026, 1, 1, tzinfo=UTC)  # the FakeClock's start: the first intake


def report(engine: Engine, clock: FakeClock, filters: Filters | None = None) -> Report:
    with transaction(engine, read_only=True) as c:
        return collect(
            c,
            filters or Filters(),
            clock.now(),
            mask_fields=MASK_FIELDS,
            secrets=[TOKEN, PASSWORD],
        )


def test_the_report_lists_every_quarantined_message_with_the_contract_columns(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    r = report(engine, clock)

    by_id = {e.message_id: e for e in r.entries}
    assert {quarantine.superseded, quarantine.refused, quarantine.posting} < set(by_id)
    assert 6 == len(r.entries)
    refused = by_id[quarantine.refused]
    assert ("price", "SKU-2", 1, "http-422", 1) == (
        refused.kind,
        refused.aggregate,
        refused.version,
        refused.reason,
        refused.attempts,
    )
    assert START == refused.first_seen
    assert START + timedelta(seconds=SENT_AFTER_S) == refused.last_attempt
    assert START + timedelta(seconds=SENT_AFTER_S) == refused.quarantined_at
    assert f"HTTP 422 Unprocessable Entity: {SCRIPT}" == refused.last_result
    assert "Установка цен номенклатуры 000001" == refused.source_ref
    assert json.loads(refused.payload) == {
        "sku": "SKU-2",
        "price": "100.00",
        "currency": "RUB",
        "price_type": "retail",
    }
    # one row for the attempt: its lease (worker, attempt, start) and its outcome
    assert ["taken", "quarantined"] == [e.event for e in refused.history]
    attempt = refused.history[-1]
    assert ("w1", 1, START, 422) == (
        attempt.worker,
        attempt.attempt,
        attempt.leased_at,
        attempt.http_status,
    )
    rejected = [e for e in r.entries if e.rejected_row]
    assert {HYPERLINK, "+1", "-1"} == {e.aggregate for e in rejected}
    assert all(e.last_attempt is None and e.attempts == 0 for e in rejected)
    assert {"http-422": 3, "invalid-contract": 1, "unknown-kind": 2} == r.summary.by_reason
    assert (clock.now() - START - timedelta(seconds=SENT_AFTER_S)).total_seconds() == (
        r.summary.oldest_age_s
    )


def test_a_price_with_a_newer_version_delivered_since_is_marked_superseded_after_quarantine(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    r = report(engine, clock)

    marked = {e.message_id for e in r.entries if e.superseded_after_quarantine}
    assert {quarantine.superseded} == marked
    assert 1 == r.summary.superseded_after_quarantine
    page = parse_html(render(r, "html", "en"))
    rows = [a for a in page.named("tbody") if "superseded" in (a.get("class") or "")]
    assert [f"m-{quarantine.superseded}"] == [a["id"] for a in rows]
    detail = parse_csv(render(r, "csv", "en"), ",").rows
    assert {quarantine.superseded} == {
        row["Message ID"] for row in detail if row["Superseded after quarantine"] == "yes"
    }
    entries = json.loads(render(r, "json", "en"))["entries"]
    assert {quarantine.superseded} == {
        e["message_id"] for e in entries if e["superseded_after_quarantine"]
    }


def test_deliveries_and_failures_per_day_cover_the_last_fourteen_days(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    r = report(engine, clock)

    assert 14 == len(r.activity)
    assert clock.now().date() == r.activity[-1].day
    assert (1, 3) == (r.activity[-1].delivered, r.activity[-1].failed)
    assert all((d.delivered, d.failed) == (0, 0) for d in r.activity[:-1])
    clock.advance(15 * 86400)
    assert all((d.delivered, d.failed) == (0, 0) for d in report(engine, clock).activity)


def test_the_days_of_the_activity_are_the_display_zones(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    """Issue 34 item 7 («times in the display zone»): the events just after midnight UTC on
    1 January are on 31 December in New York, and the report's day is New York's."""
    with transaction(engine, read_only=True) as c:
        r = collect(c, Filters(), clock.now(), zone="America/New_York")
    assert date(2025, 12, 31) == r.activity[-1].day
    assert (1, 3) == (r.activity[-1].delivered, r.activity[-1].failed)
    assert all((d.delivered, d.failed) == (0, 0) for d in r.activity[:-1])
    assert "Day (America/New_York)" == label("day", "en", r.zone)


def test_the_report_honours_the_filters_of_quarantine_list(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    only = report(engine, clock, Filters(reason="http-422", kind="price"))

    assert {quarantine.superseded, quarantine.refused} == {e.message_id for e in only.entries}
    assert {"http-422": 2} == only.summary.by_reason
    superseded = report(engine, clock, Filters(superseded_after_quarantine=True))
    assert [quarantine.superseded] == [e.message_id for e in superseded.entries]


def test_the_aggregate_filter_takes_a_beginning_of_any_case_as_the_lists_search_does(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    """The report (``exchange quarantine export``, the workbench's export) and the lists agree
    on what an aggregate filter is: the beginning of an aggregate or its SKU, any case, as
    the workbench's search finds it (``find.aggregate_starts``, one condition)."""
    prefixed = report(engine, clock, Filters(aggregate="sku-"))
    assert {quarantine.superseded, quarantine.refused} == {e.message_id for e in prefixed.entries}
    with transaction(engine, read_only=True) as c:
        searched = list_quarantined(c, Filters(search="sku-"))
        listed = list_quarantined(c, Filters(aggregate="sku-"))
    assert {e["message_id"] for e in searched} == {e.message_id for e in prefixed.entries}
    assert listed == searched  # the CLI's list: the same entries, in order
    assert [quarantine.refused] == [
        e.message_id for e in report(engine, clock, Filters(aggregate="SKU-2")).entries
    ]


def test_masked_fields_the_site_token_and_the_password_appear_in_no_format(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    r = report(engine, clock)

    posting = next(e for e in r.entries if e.message_id == quarantine.posting)
    assert {
        "document": "D-1",
        "line": 1,
        "amount": "10.00",
        "api_key": "***",
        "auth": {"Password": "***"},
    } == json.loads(posting.payload)
    assert 'HTTP 422 Unprocessable Entity: {"api_key": "***"}' == posting.last_result
    for fmt in FORMATS:
        for lang in LANGS:
            data = render(r, fmt, lang)
            assert TOKEN.encode() not in data, fmt
            assert PASSWORD.encode() not in data, fmt
    book = openpyxl.load_workbook(io.BytesIO(render(r, "xlsx", "ru")))
    cells = [str(c.value) for ws in book.worksheets for row in ws.iter_rows() for c in row]
    assert not [c for c in cells if TOKEN in c or PASSWORD in c]


def test_the_report_never_holds_the_database_password_and_knows_what_to_hide(
    engine: Engine, clock: FakeClock, quarantine: Built, settings: Settings
) -> None:
    configured = load_settings(
        database_url=f"postgresql+psycopg://exchange:{PASSWORD}@db.internal/exchange",
        site_token=TOKEN,
    )
    assert {TOKEN, PASSWORD} == set(known_secrets(configured))
    assert [] == known_secrets(load_settings(database_url="sqlite:///x.db", site_token=None))

    with transaction(engine, read_only=True) as c:
        r = collect(c, Filters(), clock.now(), secrets=known_secrets(configured))
    for fmt in FORMATS:
        assert PASSWORD.encode() not in render(r, fmt, "en")  # even unmasked, it is scrubbed


def test_hostile_data_from_the_database_is_escaped_and_neutralised(
    engine: Engine, clock: FakeClock, quarantine: Built
) -> None:
    r = report(engine, clock)

    page = parse_html(render(r, "html", "ru"))
    assert not page.named("script")
    assert SCRIPT in page.all_text and CYRILLIC in page.all_text and LONG in page.all_text
    text = render(r, "csv", "ru").decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=";"))
    cells = [cell for row in rows for cell in row]
    assert "'" + HYPERLINK in cells and "'+1" in cells and "'-1" in cells and "'=1+1" in cells
    assert "'@SUM(A1:A9)" in cells
    book = openpyxl.load_workbook(io.BytesIO(render(r, "xlsx", "ru")))
    sheet = book[label("detail_sheet", "ru")]
    assert all(c.data_type != "f" for row in sheet.iter_rows() for c in row)
    assert HYPERLINK in [c.value for row in sheet.iter_rows() for c in row]


def test_no_doubled_http_prefix() -> None:
    """Issue 16: the site client already writes ``HTTP 422: {...}``; the report does not add a
    second ``HTTP 422:`` in front of it."""
    from dataclasses import fields

    from exchange.report.model import Entry

    defaults = {f.name: None for f in fields(Entry)}
    for written, shown in (
        ('HTTP 422: {"error":"rejected"}', 'HTTP 422: {"error":"rejected"}'),
        ("422 Unprocessable Entity", "HTTP 422 Unprocessable Entity"),
        ("rejected", "HTTP 422: rejected"),
    ):
        entry = Entry(**{**defaults, "last_status": 422, "last_error": written})  # type: ignore[arg-type]
        assert entry.last_result == shown


def test_the_concrete_cause_in_the_reports_language_and_a_command_to_run() -> None:
    """Issue 16: the Russian report says the concrete cause in Russian, and every entry offers
    a command ready to run (retry what may go again, cancel a rejected row)."""
    from dataclasses import fields

    from exchange.report.model import Entry
    from exchange.report.words import entry_next_check

    defaults = {f.name: None for f in fields(Entry)}
    rejected = Entry(  # type: ignore[arg-type]
        **{
            **defaults,
            "message_id": "price.SKU-1.v1.abc",
            "reason": "invalid-contract",
            "last_error": "price payload: price: must be written without an exponent",
            "rejected_row": True,
            "superseded_after_quarantine": False,
        }
    )
    ru = entry_next_check(rejected, "ru")
    assert "без экспоненты" in ru and "exponent" not in ru
    assert ru.endswith('Команда: exchange quarantine cancel price.SKU-1.v1.abc --note "…"')
    refused = Entry(  # type: ignore[arg-type]
        **{
            **defaults,
            "message_id": "price.SKU-2.v1.def",
            "reason": "http-422",
            "last_status": 422,
            "last_error": 'HTTP 422: {"error":"rejected"}',
            "rejected_row": False,
            "superseded_after_quarantine": False,
        }
    )
    en = entry_next_check(refused, "en")
    assert 'Cause: HTTP 422: {"error":"rejected"}' in en and "HTTP 422: HTTP 422" not in en
    assert en.endswith('Command: exchange quarantine retry price.SKU-2.v1.def --note "…"')


def test_an_unmapped_price_type_says_where_to_map_it_not_which_command_to_run() -> None:
    """The fresh review: «Что сделать» for unmapped-price-type sent a person on a web page to
    `exchange history`. It names the mapping settings, null for "not for this shop", and retry."""
    from exchange.report.words import next_check

    for lang in ("ru", "en"):
        words = next_check("unmapped-price-type", lang)
        assert "EXCHANGE_WOO_PRICE_FIELDS" in words and "EXCHANGE_BITRIX_PRICE_TYPES" in words
        retry = {"ru": "повторите отправку", "en": "retry"}[lang]
        assert "null" in words and retry in words and "exchange history" not in words


def test_next_check_parts_each_end_as_a_sentence_in_both_languages() -> None:
    """Words 38 item 1: «Что проверить» joins the advice, the cause and the command; a cause
    without a sentence end ran on into «Command: …» («Cause: HTTP 422: rejected Command: …»).
    Every part before the command now ends as a sentence, with no doubled full stop, and a
    sentence already ended inside quotes («…» or “…”) gets none added."""
    from dataclasses import fields

    from exchange.report.model import Entry
    from exchange.report.words import entry_next_check, sentence

    defaults = {f.name: None for f in fields(Entry)}
    refused = Entry(  # type: ignore[arg-type]
        **{
            **defaults,
            "message_id": "price.SKU-2.v1.def",
            "reason": "http-422",
            "last_status": 422,
            "last_error": 'HTTP 422: {"error":"rejected"}',
            "rejected_row": False,
            "superseded_after_quarantine": False,
        }
    )
    for lang, cmd in (("en", "Command:"), ("ru", "Команда:")):
        said = entry_next_check(refused, lang)  # type: ignore[arg-type]
        before, _, after = said.partition(f" {cmd} ")
        assert after, said
        assert before.endswith("."), said
        assert ".." not in before, said
        for part in before.split(" Cause: ") + before.split(" Причина: "):
            assert part.rstrip().endswith((".", "!", "?", "…")), (part, said)
    assert sentence("done.") == "done."
    assert sentence("wait…") == "wait…"
    assert sentence("it said “done.”") == "it said “done.”"
    assert sentence("it said «ждите»") == "it said «ждите»."
    assert sentence('HTTP 422: {"error":"rejected"}') == 'HTTP 422: {"error":"rejected"}.'


def test_a_russian_exports_last_error_says_a_rules_joined_words_in_russian() -> None:
    """Words 38 item 4: a rule's words followed by what a person's decision does («; a new
    old_price from 1C waits …»), on a channel named «channel ozon-main (Ozon)», stayed English
    in a Russian export's last error (only «Что проверить» was Russian): the rule's own
    pattern ended in «(…)» and took the joined words whole. Every part is Russian now."""
    from dataclasses import fields

    from exchange.report.model import Entry
    from exchange.report.words import result_words

    said = (
        "old_price 900 is below price 1000: Ozon refuses it (old_price_less_than_price: Цена до "
        "скидки должна быть выше текущей цены.); a new old_price from 1C waits for a person's "
        "decision on this price: retrying it sends both together, cancelling it leaves price "
        "1000 live on channel ozon-main (Ozon)"
    )
    defaults = {f.name: None for f in fields(Entry)}
    entry = Entry(**{**defaults, "reason": "invalid-for-channel", "last_error": said})  # type: ignore[arg-type]
    ru = result_words(entry, "ru")
    assert ru is not None
    assert "waits for a person's decision" not in ru and "live on" not in ru, ru
    assert "ждёт решения человека" in ru and "ниже price 1000" in ru, ru
    assert result_words(entry, "en") == said


def test_a_price_refused_by_a_marketplace_rule_offers_the_cancel_its_advice_says() -> None:
    """Review rev39 W2: a lone old price Ozon refused by its rule (``channel-rule``) is advised
    "correct the price in 1C and post it again, then cancel this record", and the command
    printed after it was ``retry``: each retry sent the refused pair again (two of the product's
    ten updates of the hour) to land back in quarantine. The command is the advice's cancel;
    where the last error says a new price from 1C waits for a person's decision on this one (a
    rule of two price types), the advice's retry sends both, and the command stays retry."""
    from dataclasses import fields

    from exchange.report.model import Entry
    from exchange.report.words import entry_next_check

    defaults = {f.name: None for f in fields(Entry)}
    refused = (
        "Ozon refused old_price 1000.00 by its rule (discount_for_average_price_is_too_small: "
        "the discount is too small)"
    )
    base = {
        **defaults,
        "message_id": "price.SKU-1_old.v2.abc",
        "reason": "channel-rule",
        "target": "ozon",
        "last_error": refused,
        "rejected_row": False,
        "superseded_after_quarantine": False,
    }
    for lang, said in (("en", "Command: "), ("ru", "Команда: ")):
        alone = entry_next_check(Entry(**base), lang)  # type: ignore[arg-type]
        assert alone.endswith(f'{said}exchange quarantine cancel price.SKU-1_old.v2.abc --note "…"')
        waits = Entry(  # type: ignore[arg-type]
            **{
                **base,
                "last_error": refused + "; a new price from 1C waits for a person's decision on "
                "this price: retrying it sends both together, cancelling it leaves price 950.00 "
                "live on Ozon",
            }
        )
        assert entry_next_check(waits, lang).endswith(
            f'{said}exchange quarantine retry price.SKU-1_old.v2.abc --note "…"'
        )
