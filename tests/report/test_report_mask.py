"""Masking (contract 8): configured payload fields show as ``***`` at any depth; the site
token and the database password never appear, wherever in the data they turn up. Pure.
"""

from __future__ import annotations

import json

from exchange.report.mask import MASK, Redactor

TOKEN = "test-token-5f2a9c"
PASSWORD = "db-pass-8c1e"


def test_a_masked_field_is_hidden_at_any_depth_whatever_its_value() -> None:
    payload = json.dumps(
        {
            "document": "РТУ-1",
            "inn": "7701234567",
            "lines": [{"amount": "10.00", "card": {"number": "4111111111111111"}}],
            "meta": {"deep": {"INN": 7701234567}},
        },
        ensure_ascii=False,
    )

    shown, hidden = Redactor(["inn", "card"]).payload(payload)

    assert {
        "document": "РТУ-1",
        "inn": MASK,
        "lines": [{"amount": "10.00", "card": MASK}],
        "meta": {"deep": {"INN": MASK}},
    } == json.loads(shown)
    assert {"7701234567", "4111111111111111"} == set(hidden)


def test_masking_keeps_every_other_value_exactly_as_1c_wrote_it() -> None:
    payload = '{"amount": 1.10, "big": 12345678901234567890.000001, "e": 1E+3, "inn": "7701234"}'

    shown, _ = Redactor(["inn"]).payload(payload)

    assert '{"amount": 1.10, "big": 12345678901234567890.000001, "e": 1E+3, "inn": "***"}' == shown


def test_a_masked_value_repeated_under_another_field_is_hidden_there_too() -> None:
    payload = json.dumps({"inn": "7701234567", "comment": "ИНН 7701234567"}, ensure_ascii=False)

    shown, _ = Redactor(["inn"]).payload(payload)

    assert {"inn": MASK, "comment": "ИНН ***"} == json.loads(shown)


def test_a_payload_without_a_masked_field_is_shown_verbatim() -> None:
    payload = '{ "sku":"SKU-1",   "price": "840.00" }'

    assert (payload, ()) == Redactor(["inn"]).payload(payload)
    assert (payload, ()) == Redactor().payload(payload)


def test_a_payload_that_is_not_json_is_masked_by_pattern() -> None:
    broken = '{"sku": "SKU-1", "api_key": "' + TOKEN + '", "pin": 123456, "price": 1 200'

    shown, hidden = Redactor(["api_key", "PIN"]).payload(broken)

    assert '{"sku": "SKU-1", "api_key": "***", "pin": "***", "price": 1 200' == shown
    assert (TOKEN, "123456") == hidden


def test_the_token_in_a_masked_field_is_masked_and_scrubbed_from_the_rest_of_the_entry() -> None:
    redactor = Redactor(["api_key"], secrets=[TOKEN])
    shown, hidden = redactor.payload(json.dumps({"api_key": TOKEN, "note": "ok"}))

    assert TOKEN not in shown
    echoed = redactor.text(f'422 {{"rejected": "{TOKEN}"}}', hidden)
    assert '422 {"rejected": "***"}' == echoed


def test_known_secrets_are_scrubbed_even_from_fields_nobody_listed() -> None:
    redactor = Redactor([], secrets=[TOKEN, PASSWORD, None, ""])

    shown, _ = redactor.payload(json.dumps({"comment": f"token {TOKEN}, db {PASSWORD}"}))

    assert TOKEN not in shown and PASSWORD not in shown
    assert "note by *** and ***" == redactor.text(f"note by {TOKEN} and {PASSWORD}")


def test_short_values_are_not_scrubbed_elsewhere_so_the_report_stays_readable() -> None:
    redactor = Redactor(["flag"])
    shown, hidden = redactor.payload('{"flag": "12345", "version": 12345}')

    assert '{"flag": "***", "version": 12345}' == shown
    assert () == hidden
    assert "version 12345" == redactor.text("version 12345", hidden)


def test_a_payload_nested_beyond_reason_still_gets_masked() -> None:
    deep = '{"a": ' * 5000 + '{"inn": "7701234567"}' + "}" * 5000

    shown, hidden = Redactor(["inn"]).payload(deep)

    assert "7701234567" not in shown
    assert ("7701234567",) == hidden
