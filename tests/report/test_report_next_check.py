"""What to do next, per reason (the fresh review of issue 24 item 4): every reason a message is
quarantined for has advice of its own, and the steps it names are said by whoever shows it:
the report with its command-line words, a page with its buttons (``steps``)."""

from __future__ import annotations

import pytest

from exchange.domain.reasons import Reason
from exchange.report.words import STEP_NAMES, next_check

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
    assert "перезапустите run" in report and "повторите отправку (retry)" in report
    assert next_check("something-new", "en", steps=steps) == "Look at <history> and decide."
