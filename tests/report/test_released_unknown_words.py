"""A released attempt whose request went out and got no answer was sent (review mpadvice item
3: WB frozen, «возвращено без отправки» beside «результат неизвестен: нет ответа … ReadTimeout»);
the history's HTTP column never shows a service's internal class name to a Russian reader
(item 5: «InvalidForChannel»)."""

from __future__ import annotations

from exchange.report.words import answer_said, history_words
from exchange.words import event_said

UNKNOWN = "result-unknown: no answer, not charged: ReadTimeout: timed out"


def test_a_released_attempt_with_its_result_unknown_is_said_as_sent() -> None:
    said = event_said("released", UNKNOWN, "ru")
    assert "без отправки" not in said, said
    assert "отправлено" in said and "неизвестен" in said, said
    event, _, _ = history_words("released", "in_progress", "delayed", "ru", detail=UNKNOWN)
    assert event == said
    # a released attempt that never went out keeps its words
    assert event_said("released", "breaker open, not charged", "ru") == ("возвращено без отправки")
    assert history_words("released", "in_progress", "new", "ru")[0] == "возвращено без отправки"
    assert history_words("released", "in_progress", "new", "en", detail=UNKNOWN)[0] == "released"


def test_the_http_column_has_no_internal_class_name_in_russian() -> None:
    assert answer_said(None, "InvalidForChannel", "ru") is None
    assert answer_said(400, "InvalidForChannel", "ru") == "400"
    assert answer_said(None, "InvalidForChannel", "en") == "InvalidForChannel"
