"""Review-wb finding 3: every detail the Wildberries target writes (a message's history, the
quarantine's last error, ``exchange find``'s «ждёт») reads in Russian on a Russian page
(EXCHANGE_LANG=ru); WB's own words, ids, prices and vendor codes stay as they are, and the stored
text stays English. Each shape is one the code writes (the function is named beside it); those
the target's own helpers build are built by them, so a changed sentence fails here."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from exchange.domain.verdicts import Classification
from exchange.targets.base import OutgoingMessage
from exchange.targets.marketplace.money import Money
from exchange.targets.wildberries import answers
from exchange.targets.wildberries.store import MemoryWbStore
from exchange.targets.wildberries.target import (
    WildberriesTarget,
    _already,
    _behind,
    _Good,
    _landed_elsewhere,
    _Price,
    _StoreFailed,
    _unknown_sku,
)
from exchange.words import error_words

# Words only an English sentence has; WB's own words in the shapes below are chosen free of them.
ENGLISH = re.compile(
    r"\b(the|is|was|of|with|by|as|and|this|not|its|it|took|outcome|read|later|catalogue|good|"
    r"upload|answer|lost|applied|apply|holds|waits|until|again|landed|whose|left|line|lines|"
    r"ended|errors|reason|give|did|cancelled|updated|share|overwrite|each|own|identical|before|"
    r"instead|making|new|force|already|tried|database|could|keep|tasks|task|may|still|shows|"
    r"list|lists|most|same|one|uploaded|refused|denies|limit|category|sells|old|seller|channel|"
    r"takes|rounded|refuses|zero|price|has|no|for|at|in|to|or|when|needs|poll|SKUs|first)\b"
)

AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
WB_WORDS = "Invalid price value"  # what WB said (research §2.1): kept as it is


def target() -> WildberriesTarget:
    return WildberriesTarget("http://wb.invalid", lambda: "t", MemoryWbStore(), clock=lambda: AT)


def good() -> _Good:
    message = OutgoingMessage("m-1", "price", "SKU-1", 1, "{}", AT)
    return _Good(_Price((message,), "SKU-1", 900, "SKU-1"), 100000001)


def answered(status: int) -> httpx.Response:
    return httpx.Response(status, json={"errorText": WB_WORDS}, headers={"X-Ratelimit-Retry": "1"})


def built() -> list[str]:
    t = target()
    said: list[Classification] = [
        _unknown_sku("SKU-999"),
        _unknown_sku("SKU-1", _landed_elsewhere(7000001, good(), "SKU-1-A")),
        _already(WB_WORDS, good()).said,
        _already(WB_WORDS, good(), 900).said,
        _behind(_already(WB_WORDS, good()), 300, 300.0),
        _behind(_already(WB_WORDS, good()), None, 300.0),
        _StoreFailed(RuntimeError()).classification,
        t._awaiting(7000001, 3.0),
        t._awaiting(7000001, 3.0, mine=False),
        t._until_read_again("SKU-9", AT),
        t._replay_wait(good(), 7000001, "it was cancelled (status 4)"),
        answers.token_missing(),
        answers.whole(answered(403), "upload"),
        answers.whole(answered(429), "read"),
        answers.whole(answered(422), "upload"),
        answers.whole(answered(504), "task poll"),
        answers.whole(answered(400), "upload"),
        answers.item_error({"errorText": WB_WORDS, "status": 3}, 7000001)[1],
        answers.item_error({"errorText": "Invalid item No.", "status": 3}, 7000001)[1],
        answers.item_error(
            {"errorText": "Item has been moved to Price Quarantine", "status": 3}, 7000001
        )[1],
        answers.item_error(
            {"errorText": "Item was added to the Sale due to high inventory", "status": 3},
            7000001,
        )[1],
    ]
    t.task_timeout = 0
    said.append(
        t._replay_wait(good(), 7000001, "it was processed then; WB holds 1000 for nmID 1 now")
    )
    return [c.detail for c in said] + [
        _landed_elsewhere(7000001, good(), "SKU-1-A"),
        answers.WHERE_TO_RELEASE,
        f"price {Money(places=0).fit(Decimal('900.50'), 'none')}",
        f"price {Money(places=0).fit(Decimal('0.4'), 'half-up')}",
        f"price {Money(places=0).fit(Decimal('0'), 'none')}",
    ]


SHAPES = (
    # target.py: _one_sku_a_good
    "SKUs 'OFF-S' and 'OFF-M' share the article (Артикул) 'ART-1', one Wildberries good (one "
    "nmID, one price): SKU 'OFF-S' was sent to it first, and 'OFF-M' would overwrite its price; "
    "give each SKU its own article in 1C",
    # target.py: _judge_task
    "Wildberries cancelled task 7000001 (status 4): uploaded again",
    "Wildberries: task 7000001 updated nmID 100000001",
    # target.py: _stuck, both kinds of task held, both catalogue reads
    "Wildberries may still apply the upload of 900 whose answer was lost (nmID 100000001); its "
    "catalogue holds 1000: the good waits until it shows 900, at most until 2026-12-05 13:00:00 "
    "UTC",
    "Wildberries may still apply task 7000001 of 900, not shown for 1800 s, (nmID 100000001); "
    "its catalogue does not list it: the good waits until it shows 900, at most until "
    "2026-12-05 13:00:00 UTC",
    "Wildberries' catalogue holds 900 for nmID 100000001: the upload of 900 whose answer was "
    "lost has landed, the price is in force",
    "Wildberries has not applied task 7000001 of 900, not shown for 1800 s, (nmID 100000001) by "
    "2026-12-05 13:00:00 UTC: uploaded again",
    # target.py: _left_out
    "Wildberries' task 7000001 has no line for nmID 100000001; its catalogue holds 900 for it: "
    "the price is in force",
    "Wildberries left nmID 100000001 out of task 7000001, and WB holds 1000 for it, not 900: not "
    "applied, uploaded again",
    "Wildberries' task 7000001 ended with errors but lists no line for nmID 100000001, and its "
    "catalogue does not list it, not 900: not applied, for a reason WB did not give",
    # target.py: _carried_by, _replayed
    "Wildberries answered 208 with task 7000001, whose lines give no price for nmID 100000001; "
    "its catalogue holds 900 for it: the price is in force",
    "Wildberries answered 208 with task 7000001, an earlier task it named for these goods; its "
    "catalogue holds 900 for nmID 100000001: the price is in force",
    "Wildberries answered 208 with task 7000001, an earlier task it named for these goods, which "
    f"has ended (it failed the good: {WB_WORDS}): not applied now; uploaded again once WB makes "
    "a new task",
    "Wildberries has answered 208 with task 7000001, an earlier task it named for these goods, "
    f"which has ended (it failed the good: {WB_WORDS}), for 1800 s instead of making a new task: "
    "the price is not applied",
    # target.py: _set_before
    "Wildberries said 900 was set already for nmID 100000001, and its catalogue holds it: the "
    "price is in force",
    # target.py: _upload, _refused_whole, _already_or_refused
    "HTTP 200: the upload's answer names no task id",
    f"HTTP 400 {WB_WORDS}: Wildberries refused nmID 100000001 of vendor code 'SKU-1'",
    f"HTTP 400 {WB_WORDS}: Wildberries' catalogue lists vendor code 'SKU-1' as nmID 100000001 "
    "and holds 1000 for it, not 900: not applied, for a reason WB did not give",
    f"HTTP 400 {WB_WORDS}: Wildberries' catalogue lists vendor code 'SKU-1' as nmID 100000001 "
    "and shows no price for it, not 900: not applied, for a reason WB did not give",
    # target.py: catalogue, quarantined
    "HTTP 200: the catalogue's answer has no listGoods",
    "HTTP 200: the quarantine list's answer has no quarantineGoods",
    # marketplace/items.py: build (the channel's currency, the article under sku_source=article)
    "the price is in USD; the channel's account takes RUB (currency): never converted",
    "SKU OFF-S has no article (Артикул) in the CommerceML the service read, and the channel "
    "names offers by their article (sku_source=article)",
)


@pytest.mark.parametrize("text", [*SHAPES, *built()])
@pytest.mark.parametrize("wrapped", ["{}", "{} (attempt 2 of 5)"])
def test_each_wildberries_detail_reads_in_russian_on_a_russian_page(
    text: str, wrapped: str
) -> None:
    shown = error_words(wrapped.format(text), "ru")
    kept = shown.replace(WB_WORDS, "")  # WB's own words stay as they are
    kept = re.sub(r"^price ", "", kept)  # and WB's field's name (as the setting maps it)
    for own in ("Item has been moved to Price Quarantine", "Item was added to the Sale due to "):
        kept = kept.replace(own, "")
    assert not ENGLISH.search(re.sub(r"\([a-z_0-9-]+\)", "", kept)), shown
    assert error_words(text, "en") == text  # English pages keep the stored text


def test_a_sale_lock_is_explained_in_russian_as_the_price_quarantine_is() -> None:
    """Review wbcat finding 3: WB's sale lock (research §2.4's errorText, §2.6 item 7) showed
    WB's English alone on a Russian page, while its price quarantine had a Russian
    explanation: it says what the lock means, that the price is tried again, and what the
    seller can do in WB's cabinet; WB's own words stay as they are."""
    wb = "You can't change the item price. Item was added to the Sale due to high inventory"
    _, said = answers.item_error({"errorText": wb, "status": 3}, 7000001)
    shown = error_words(said.detail or "", "ru")
    assert wb in shown and "задача 7000001" in shown, shown
    assert "распродаж" in shown and "пробует снова" in shown and "кабинет" in shown, shown
    assert "retry_max_delay" in shown and "retry-limit" in shown, shown
    assert error_words(said.detail or "", "en") == said.detail
