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


def test_a_released_attempt_the_marketplace_answered_busy_is_said_as_sent_and_answered() -> None:
    """Ozon's 429 (code 8, research §1.3) releases the attempt uncharged, yet the request went
    out and was answered: never «возвращено без отправки» (review ozon, item 6)."""
    for busy in ("Ozon busy", "channel ozon (Ozon) busy", "site busy"):
        detail = f"{busy}, not charged: Ozon: HTTP 429 code 8: You have reached request rate limit"
        said = event_said("released", detail, "ru")
        assert "без отправки" not in said and "перегружен" in said, said
        assert "answered busy" in event_said("released", detail, "en")
    assert event_said("released", "no answer, not charged: ConnectError", "ru") == (
        "возвращено без отправки"
    )


def test_a_wildberries_upload_whose_answer_was_lost_is_said_as_a_wait_others_as_sent_again() -> (
    None
):
    """Seller review 35 (wbwords35 item 2): WB's released row (its words:
    ``WildberriesTarget._may_apply``) said «отправится снова», yet the next attempt waits to
    learn whether WB applied the upload; a target that does send again keeps its words."""
    wb = (
        f"{UNKNOWN} (upload): its answer was lost: the good waits until Wildberries shows "
        "whether it applied the upload, up to 60 min (at most until 2026-12-06 19:35:38 UTC)"
    )
    ru, en = event_said("released", wb, "ru"), event_said("released", wb, "en")
    assert "снова" not in ru and "ждём, пока канал покажет, применена ли загрузка" in ru, ru
    assert "sent again" not in en and "waits until the channel shows whether it applied" in en
    assert "отправится снова" in event_said("released", UNKNOWN, "ru")
    assert "sent again" in event_said("released", UNKNOWN, "en")
