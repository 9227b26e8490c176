"""What to do next, per reason (the fresh review of issue 24 item 4): every reason a message is
quarantined for has advice of its own, and the steps it names are said by whoever shows it:
the report with its command-line words, a page with its buttons (``steps``)."""

from __future__ import annotations

import re

import pytest

from exchange.domain.reasons import Reason
from exchange.report.words import STEP_NAMES, next_check
from exchange.words import name

# The reasons a message waits in the quarantine for (the others end it: cancelled).
QUARANTINED_FOR = [
    Reason.INVALID_CONTRACT,
    Reason.UNSUPPORTED_SCHEMA,
    Reason.UNKNOWN_KIND,
    Reason.VERSION_CONFLICT,
    Reason.SEQUENCE_GAP,
    Reason.RETRY_LIMIT,
    Reason.UNKNOWN_RESPONSE,
    Reason.UNKNOWN_SKU,
    Reason.UNMAPPED_PRICE_TYPE,
    Reason.SHOP_FAILURE,
    Reason.UNROUTABLE,
    Reason.INVALID_FOR_CHANNEL,
    Reason.CHANNEL_RULE,
]


@pytest.mark.parametrize("reason", [r.value for r in QUARANTINED_FOR])
def test_every_quarantine_reason_has_advice_of_its_own(reason: str) -> None:
    for lang in ("ru", "en"):
        assert next_check(reason, lang) != next_check("something-new", lang), reason


def test_the_steps_are_said_by_whoever_shows_the_advice() -> None:
    steps = {name: f"<{name}>" for name in STEP_NAMES}
    said = next_check("unmapped-price-type", "ru", steps=steps)
    assert "<restart>" in said and "<retry>" in said and "<cancel>" in said
    assert "run" not in said and "retry" not in said.replace("<retry>", "")
    report = next_check("unmapped-price-type", "ru")
    assert "перезапустите exchange run" in report and "повторите отправку" in report
    assert "(retry)" not in report
    assert next_check("something-new", "en", steps=steps) == "Look at <history> and decide."


@pytest.mark.parametrize("reason", [r.value for r in Reason])
def test_every_reason_has_a_russian_name_beside_its_code(reason: str) -> None:
    """Issue 34 item 7: a page names every reason in Russian with its code beside it («ошибка в
    данных (invalid-contract)»), never the bare English code."""
    said = name("reason", reason, "ru")
    assert said.endswith(f" ({reason})") and said != reason, said
    assert re.search("[а-я]", said), said


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("ru", "исправьте цену в 1С и выгрузите её снова, затем отмените эту запись."),
        ("en", "correct the price in 1C and post it again, then cancel this record."),
    ],
)
def test_the_channel_rule_advice_names_the_record_to_cancel_once(lang: str, said: str) -> None:
    """Review ym400 finding 5: the cancel step already says «отмените эту запись» ("cancel
    this record"), and the advice added «эту» ("this one") after it: «…затем отмените эту
    запись эту.». Rendered, it ends with the step alone."""
    advice = next_check("channel-rule", lang)
    # The step ends its sentence; the next one says what a pair rule's entry's steps do
    # (review ozonpair).
    assert f"{said} " in advice, advice
    assert "эту запись эту" not in advice and "this record this one" not in advice
