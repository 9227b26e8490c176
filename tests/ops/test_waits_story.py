"""Along a message's history, a delayed state waits for the channel exactly where the rule
``find`` and ``status`` share says so (``exchange.ops.waits``): after an ``awaiting-outcome``
on the same channel, not after a ``retry-scheduled`` (sellerwords item 1)."""

from __future__ import annotations

from exchange.domain.prices import AWAITING_1C, AWAITING_PERSON
from exchange.ops.waits import awaiting_in_story
from exchange.report.words import history_words
from exchange.words import state_said


def test_a_delayed_state_waits_for_the_channel_after_its_awaiting_outcome_only() -> None:
    story = [
        (None, "accepted", None, "pending", None),
        ("ozon", "taken", "pending", "in_progress", None),
        ("ozon", "awaiting-outcome", "in_progress", "delayed", "OzonHourlyLimit"),
        ("wb", "retry-scheduled", "in_progress", "delayed", "ConnectError"),
        ("ozon", "taken", "delayed", "in_progress", None),
        ("ozon", "retry-scheduled", "in_progress", "delayed", "ConnectError"),
        ("ozon", "taken", "delayed", "in_progress", None),
    ]
    assert awaiting_in_story(story) == [
        ("", ""),
        ("", ""),
        ("", "channel"),  # into the marketplace's wait
        ("", ""),  # another channel's retry
        ("channel", ""),  # out of the wait
        ("", ""),  # into a retry
        ("", ""),
    ]


def test_a_wait_for_1cs_other_price_type_is_a_wait_for_1c_along_the_story() -> None:
    """rev32o-seller: ``exchange history`` and the workbench said «ждёт площадку» for a price
    that waits for 1C's other price type, while its state line says «ждёт 1С: другой вид
    цены»: the wait's error class (``AWAITING_1C``) says which."""
    story = [
        ("ozon", "taken", "pending", "in_progress", None),
        ("ozon", "awaiting-outcome", "in_progress", "delayed", AWAITING_1C),
        ("ozon", "taken", "delayed", "in_progress", None),
        ("ozon", "awaiting-outcome", "in_progress", "delayed", "OzonHourlyLimit"),
    ]
    assert awaiting_in_story(story) == [("", ""), ("", "1c"), ("1c", ""), ("", "channel")]
    said = [
        history_words(e, f, t, "ru", w)[1:]
        for (_, e, f, t, _), w in zip(story, awaiting_in_story(story), strict=True)
    ]
    assert said[1] == ("отправляется", "ждёт 1С: другой вид цены"), said
    assert said[3] == ("отправляется", "ждёт площадку"), said


def test_a_wait_for_a_persons_decision_on_the_main_price_is_no_wait_for_the_marketplace() -> None:
    """Review wait34: a new old price waiting for a person's decision on its SKU's main price,
    quarantined by a rule of two price types (``AWAITING_PERSON``), was said «ждёт площадку»
    along ``exchange history``, the report and the workbench's «Переход»: it waits for an
    operator's retry or cancel, not for the marketplace nor for 1C."""
    story = [
        ("ozon", "taken", "pending", "in_progress", None),
        ("ozon", "awaiting-outcome", "in_progress", "delayed", AWAITING_PERSON),
        ("ozon", "taken", "delayed", "in_progress", None),
    ]
    assert awaiting_in_story(story) == [("", ""), ("", "person"), ("person", "")]
    said = [
        history_words(e, f, t, "ru", w)[1:]
        for (_, e, f, t, _), w in zip(story, awaiting_in_story(story), strict=True)
    ]
    assert said[1] == ("отправляется", "ждёт решения оператора по основной цене"), said
    assert said[2][0] == "ждёт решения оператора по основной цене", said
    english = state_said("delayed", "en", awaiting=True, on_person=True)
    assert english == "waiting for an operator's decision on the main price", english
