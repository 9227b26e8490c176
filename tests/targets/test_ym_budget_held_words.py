"""The wait line of a price Yandex Market's budget holds (review ym34, WORDS): a worker among
several holds its share of the business's budget, and says so: "this worker's share (2500) of
Yandex Market's budget of 10000 offers a minute", never "Yandex Market's budget of 2500"."""

from __future__ import annotations

from exchange.targets.yandex_market.answers import budget_held
from exchange.words import detail_words


def test_a_workers_share_is_said_as_a_share_of_yandex_markets_budget() -> None:
    shared = budget_held(2.2, 2500, 10_000).detail
    assert shared == (
        "held: this worker's share (2500) of Yandex Market's budget of 10000 offers a minute "
        "is spent; sent in 3 s, not charged"
    )
    assert "доля этого воркера (2500) в бюджете Яндекс Маркета (10000 товаров" in detail_words(
        shared
    )
    alone = budget_held(2.2, 10_000, 10_000).detail
    assert alone.startswith("held: Yandex Market's budget of 10000 offers a minute is spent")
    assert "бюджет Яндекс Маркета (10000 товаров в минуту) исчерпан" in detail_words(alone)
