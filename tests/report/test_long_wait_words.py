"""A long wait in a detail is said in minutes and hours (review mpadvice item 4: Ozon's hourly
limit read «уйдёт через 2778 с» in ``find``, ``status`` and the workbench): one formatting,
``words.human_age``, the one ``status`` says ages with."""

from __future__ import annotations

from exchange.ops.status import human_age as status_age
from exchange.words import error_words, human_age

OZON_HOUR = (
    "held: 10 price updates of this product sent within the hour (Ozon's limit); goes in "
    "{w} s, not charged"
)


def test_ozons_hourly_wait_is_said_in_minutes_and_hours() -> None:
    said = error_words(OZON_HOUR.format(w=2778), "ru")
    assert "2778" not in said and "через 46 мин 18 с" in said, said
    assert "через 2 ч 1 мин" in error_words(OZON_HOUR.format(w=7300), "ru")
    assert "через 20 с" in error_words(OZON_HOUR.format(w=20), "ru")  # a short one as it was
    assert status_age is human_age  # one formatting function


def test_the_1c_wait_of_a_rule_breaking_price_is_said_in_minutes() -> None:
    text = (
        "alone beside the other known prices of its SKU it breaks a rule of ozon (min_price); "
        "1C may send the other price type in its next package: looked at again in 1 s, "
        "quarantined if it still breaks the rule 600 s from now, not charged"
    )
    said = error_words(text, "ru")
    assert "через 10 мин" in said and "600" not in said, said


def test_the_1c_wait_says_its_end_as_a_time_and_details_written_before_still_read() -> None:
    """Review rev40 words: ``find`` showed "600 s from now" as of the last look; the detail now
    says its end as a time too. A detail written before the upgrade still reads in Russian."""
    text = (
        "alone beside the other known prices of its SKU it breaks a rule of ozon (min_price); "
        "1C may send the other price type in its next package: looked at again in 1 s, "
        "quarantined if it still breaks the rule 600 s from now (at 2026-12-07 14:32:10 UTC), "
        "not charged"
    )
    said = error_words(text, "ru")
    assert "через 10 мин" in said and "(в 2026-12-07 14:32:10 UTC)" in said, said
    assert "from now" not in said and "600" not in said, said
    gone = text.replace("quarantined if it still breaks the rule", "goes without old_price")
    gone = gone.replace(
        "UTC), not charged",
        "UTC) if 1C sends none by then (an old price not above the price is no discount), "
        "not charged",
    )
    said = error_words(gone, "ru")
    assert "с (в 2026-12-07 14:32:10 UTC) цена уйдёт без old_price" in said, said
