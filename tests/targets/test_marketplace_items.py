"""What the marketplace targets share (contract 14, exchange/targets/marketplace/): one item per
SKU with every mapped price type's latest price, the item's verdict spread to every delivery it
carried as new, the mappings, sku_source, the money checks, requests grouped by SKU."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from exchange.domain.prices import KnownPrice
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage
from exchange.targets.marketplace.articles import MemoryArticles
from exchange.targets.marketplace.items import Channel, Item, build, by_sku, gather, spread
from exchange.targets.marketplace.money import Money, text
from exchange.targets.prices import MemoryKnownPrices

MAPPING = {"retail": "price", "old": "old_price", "min": "min_price", "wholesale": None}
MONEY = {"price": Money(2), "old_price": Money(2, zero=True), "min_price": Money(2)}


def channel(**overrides: object) -> Channel:
    values: dict[str, object] = {
        "target": "ozon",
        "price_types": MAPPING,
        "setting": "ozon_price_types",
        "money": MONEY,
    }
    values.update(overrides)
    return Channel(**values)  # type: ignore[arg-type]


def yandex_channel(**overrides: object) -> Channel:
    """A Yandex Market channel: value, its discountBase and minimumForBestseller, Yandex's money."""
    from exchange.targets.yandex_market import target as ym

    values: dict[str, object] = {
        "target": "yandex-market",
        "price_types": {"retail": "value", "old": "discountBase", "min": "minimumForBestseller"},
        "setting": "ym_price_types",
        "money": ym.MONEY,
        "dependent": ym.DEPENDENT,
        "struck": frozenset({"discountBase"}),
        "main": ym.MAIN_FIELD,
    }
    return channel(**{**values, **overrides})


def price(
    sku: str, price_type: str, amount: str, version: int = 2, currency: str = "RUB"
) -> OutgoingMessage:
    payload = {"sku": sku, "price": amount, "currency": currency, "price_type": price_type}
    return OutgoingMessage(
        f"{sku}/{price_type}@{version}",
        "price",
        f"{sku}/{price_type}",
        version,
        json.dumps(payload),
        datetime(2026, 12, 5, tzinfo=UTC),
    )


def known(sku: str, price_type: str, amount: str, version: int = 1) -> KnownPrice:
    return KnownPrice(sku, price_type, Decimal(amount), "RUB", version)


def test_an_item_carries_every_mapped_price_types_latest_known_price() -> None:
    built = build(
        [price("A", "retail", "900")],
        channel(),
        [known("A", "old", "1200", 7), known("A", "retail", "950", 1)],
        {},
    )
    [item] = built.items
    assert item.prices == {"price": Decimal("900"), "old_price": Decimal("1200")}
    assert item.new == {"price"} and [m.message_id for m in item.carried] == ["A/retail@2"]


def test_a_price_type_the_channel_never_had_is_left_out_never_zero() -> None:
    [item] = build([price("A", "retail", "900")], channel(), [], {}).items
    assert item.prices == {"price": Decimal("900")}
    assert "old_price" not in item.prices and "min_price" not in item.prices


def test_a_known_price_of_a_type_left_out_of_the_channel_is_not_carried() -> None:
    [item] = build(
        [price("A", "retail", "900")], channel(), [known("A", "wholesale", "800")], {}
    ).items
    assert item.prices == {"price": Decimal("900")}


def test_two_price_types_of_one_sku_leased_together_are_one_item() -> None:
    built = build(
        [price("A", "retail", "900"), price("B", "retail", "10"), price("A", "old", "1200")],
        channel(),
        [],
        {},
    )
    assert [i.sku for i in built.items] == ["A", "B"]
    assert built.items[0].prices == {"price": Decimal("900"), "old_price": Decimal("1200")}
    assert len(built.items[0].carried) == 2


def test_the_items_verdict_is_the_verdict_of_every_delivery_it_carried_as_new() -> None:
    [item] = build(
        [price("A", "retail", "900"), price("A", "old", "1200")],
        channel(),
        [known("A", "min", "500")],
        {},
    ).items
    verdict = Classification(Verdict.DELIVERED, "updated")
    assert spread(item, verdict) == {"A/retail@2": verdict, "A/old@2": verdict}


def test_a_price_type_mapped_to_null_is_not_for_this_shop_and_an_unmapped_one_is_refused() -> None:
    built = build([price("A", "wholesale", "800"), price("A", "promo", "700")], channel(), [], {})
    assert built.items == []
    assert built.answers["A/wholesale@2"].verdict is Verdict.NOT_FOR_THIS_SHOP
    assert built.answers["A/wholesale@2"].reason == Reason.NOT_FOR_THIS_SHOP
    assert built.answers["A/promo@2"].verdict is Verdict.TERMINAL
    assert built.answers["A/promo@2"].reason == Reason.UNMAPPED_PRICE_TYPE
    assert "ozon_price_types" in built.answers["A/promo@2"].detail


def test_sku_source_article_names_the_offer_by_its_article() -> None:
    [item] = build(
        [price("1c-id-1", "retail", "900")],
        channel(sku_source="article"),
        [],
        {"1c-id-1": "ART-1"},
    ).items
    assert (item.sku, item.offer_id) == ("1c-id-1", "ART-1")


def test_an_offer_without_an_article_is_invalid_for_channel_under_sku_source_article() -> None:
    built = build(
        [price("1c-id-1", "retail", "900"), price("1c-id-1", "old", "990")],
        channel(sku_source="article"),
        [],
        {},
    )
    assert built.items == []
    for answer in built.answers.values():
        assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
        assert "Артикул" in answer.detail
    assert len(built.answers) == 2


def test_a_price_in_another_currency_is_invalid_for_channel_never_converted() -> None:
    built = build([price("A", "retail", "15", currency="EUR")], channel(), [], {})
    answer = built.answers["A/retail@2"]
    assert answer.reason == Reason.INVALID_FOR_CHANNEL and "EUR" in answer.detail
    assert built.items == []


def test_a_channels_own_currency_is_taken() -> None:
    [item] = build(
        [price("A", "retail", "15", currency="BYN")], channel(currency="BYN"), [], {}
    ).items
    assert item.prices == {"price": Decimal("15")}


@pytest.mark.parametrize(
    ("places", "amount", "rounding", "sent"),
    [
        (0, "100.50", "half-up", Decimal("101")),
        (0, "100.50", "down", Decimal("100")),
        (2, "99.995", "half-up", Decimal("100.00")),
        (2, "99.999", "down", Decimal("99.99")),
        (2, "99.9", "none", Decimal("99.9")),
        (0, "100.00", "none", Decimal("100.00")),
    ],
)
def test_a_price_is_rounded_only_as_the_channels_rounding_says(
    places: int, amount: str, rounding: str, sent: Decimal
) -> None:
    assert Money(places).fit(Decimal(amount), rounding) == sent


@pytest.mark.parametrize(
    ("places", "amount", "said"),
    [
        (2, "500.5000", "500.50"),
        (2, "500.50", "500.50"),
        (2, "500.5", "500.5"),
        (0, "1500.00", "1500"),
    ],
)
def test_an_exact_price_with_trailing_zeros_goes_at_the_fields_scale(
    places: int, amount: str, said: str
) -> None:
    """Contract 14, research §1.1 (Ozon: at most two decimals): 1C's "500.5000" is exactly
    500.50 and goes as "500.50", never refused for its notation (review ozon)."""
    sent = Money(places).fit(Decimal(amount))
    assert isinstance(sent, Decimal) and text(sent) == said


@pytest.mark.parametrize(("places", "amount"), [(0, "100.50"), (2, "99.995")])
def test_a_price_the_channel_cannot_take_is_never_rounded_silently(
    places: int, amount: str
) -> None:
    money = {"price": Money(places)}
    built = build([price("A", "retail", amount)], channel(money=money), [], {})
    answer = built.answers["A/retail@2"]
    assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert "never rounded" in answer.detail and amount in answer.detail


def test_zero_is_refused_where_the_field_refuses_it_even_after_rounding() -> None:
    assert isinstance(Money(2).fit(Decimal("0")), str)
    assert isinstance(Money(0).fit(Decimal("0.4"), "half-up"), str)
    assert Money(2, zero=True).fit(Decimal("0")) == Decimal("0")
    assert isinstance(Money(2, zero=True).fit(Decimal("-1")), str)


def test_a_failed_price_leaves_its_sku_sent_with_the_known_price_of_its_type() -> None:
    built = build(
        [price("A", "retail", "900"), price("A", "old", "1200.001")],
        channel(),
        [known("A", "old", "1100", 1)],
        {},
    )
    [item] = built.items
    assert item.prices == {"price": Decimal("900"), "old_price": Decimal("1100")}
    assert built.answers["A/old@2"].reason == Reason.INVALID_FOR_CHANNEL


def test_a_price_rule_checked_before_sending_is_invalid_for_channel_with_the_rule() -> None:
    def rule(item: Item) -> str | None:
        if item.prices.get("old_price", Decimal(0)) and item.prices["old_price"] < item.prices.get(
            "price", Decimal(0)
        ):
            return "old_price below price"
        return None

    built = build(
        [price("A", "retail", "900"), price("B", "retail", "10")],
        channel(),
        [known("A", "old", "800")],
        {},
        rule,
    )
    assert [i.sku for i in built.items] == ["B"]
    answer = built.answers["A/retail@2"]
    assert answer.reason == Reason.INVALID_FOR_CHANNEL and answer.detail == "old_price below price"


def test_requests_keep_the_messages_of_one_sku_in_one_request() -> None:
    messages = [
        price("A", "retail", "1"),
        price("B", "retail", "1"),
        price("C", "retail", "1"),
        price("A", "old", "2"),
    ]
    groups = by_sku(messages, 2)
    assert [sorted(m.message_id for m in g) for g in groups] == [
        ["A/old@2", "A/retail@2", "B/retail@2"],
        ["C/retail@2"],
    ]


def test_the_known_prices_and_articles_are_read_through_their_ports() -> None:
    memory = MemoryKnownPrices()
    memory.remember(known("A", "old", "1200", 3))
    built = asyncio.run(
        gather(
            [price("A", "retail", "900")],
            channel(sku_source="article"),
            known=memory,
            articles=MemoryArticles({"A": "ART-A"}),
        )
    )
    [item] = built.items
    assert (item.offer_id, item.prices["old_price"]) == ("ART-A", Decimal("1200"))


def test_known_prices_that_cannot_be_read_send_nothing_and_pause() -> None:
    class Broken:
        def latest(self, skus: object) -> list[KnownPrice]:
            raise OSError("database gone")

    built = asyncio.run(gather([price("A", "retail", "900")], channel(), known=Broken()))
    assert built.items == []
    assert built.answers["A/retail@2"].verdict is Verdict.PAUSE


def test_requests_never_hold_two_messages_of_one_aggregate() -> None:
    groups = by_sku([price("A", "retail", "1", 1), price("A", "retail", "2", 2)], 10)
    assert [[m.version for m in g] for g in groups] == [[1], [2]]


def test_an_item_breaking_a_rule_waits_for_a_newer_price_of_its_sku_at_most_most_seconds() -> None:
    """Issue 32: the wait is until the awaited price is due, at least 1 s (one already due is
    looked at again, never at once in a loop), at most ``most``; a waiting version no newer
    than the one the item carries, or of a type the item carries as new, changes nothing."""
    from datetime import timedelta

    from exchange.domain.prices import WaitingPrice

    def rule(item: Item) -> str | None:
        return None if "price" in item.prices else "no price"

    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    old = [price("A", "old", "1200")]

    def wait(due: timedelta, version: int = 3, most: float = 60.0) -> Classification:
        pending = [WaitingPrice("A", "retail", version, now + due)]
        built = build(old, channel(), [], {}, rule, waiting=pending, now=now, most=most)
        return built.answers["A/old@2"]

    assert (wait(timedelta(seconds=20)).verdict, wait(timedelta(seconds=20)).again_in) == (
        Verdict.AWAITING,
        20.0,
    )
    assert wait(timedelta(seconds=-5)).again_in == 1.0
    assert wait(timedelta(hours=1)).again_in == 60.0
    assert wait(timedelta(hours=1), most=0.4).again_in == 0.4
    assert wait(timedelta(seconds=20)).reason is None
    built = build(old, channel(), [], {}, lambda i: "broken")
    assert built.broken == {"A": "broken"}
    carried = [WaitingPrice("A", "retail", 3, now)]  # the version the item carries already
    again = build(
        old, channel(), [known("A", "retail", "1000", 3)], {}, lambda i: "x", waiting=carried
    )
    assert again.answers["A/old@2"].reason == Reason.INVALID_FOR_CHANNEL
    own = [WaitingPrice("A", "old", 9, now)]  # its own type, carried as new: not awaited
    mine = build(old, channel(), [], {}, rule, waiting=own, now=now)
    assert mine.answers["A/old@2"].reason == Reason.INVALID_FOR_CHANNEL


def test_a_price_broken_beside_a_known_one_waits_for_1cs_next_package_then_is_refused() -> None:
    """Review 32d: 1C sends a SKU's price types in separate packages. The price 1500 arrives
    beside the delivered old price 1200 (below it: Ozon's rule broken); the old price 1800 is a
    package away. The price waits (not charged) ``COMPANION_GRACE`` from its message's
    creation, then is ``invalid-for-channel``; a price broken by its own new prices alone (no
    known price beside it) is refused at once."""
    from datetime import timedelta

    from exchange.targets.marketplace.items import COMPANION_GRACE

    def rule(item: Item) -> str | None:
        old_price, price_ = item.prices.get("old_price"), item.prices.get("price", Decimal(0))
        return "old_price below price" if old_price is not None and old_price < price_ else None

    made = datetime(2026, 12, 5, tzinfo=UTC)  # the messages' created_at (price() above)
    lone = [price("A", "retail", "1500")]

    def answer(after: float, messages: list[OutgoingMessage] = lone) -> Classification:
        now = made + timedelta(seconds=after)
        built = build(messages, channel(), [known("A", "old", "1200")], {}, rule, now=now)
        return built.answers[messages[0].message_id]

    soon = answer(30)
    assert (soon.verdict, soon.reason, soon.again_in) == (Verdict.AWAITING, None, 60.0)
    assert "next package" in soon.detail and "not charged" in soon.detail
    assert answer(COMPANION_GRACE - 10).again_in == 10.0
    late = answer(COMPANION_GRACE + 1)
    assert (late.verdict, late.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    both = [price("A", "retail", "1500"), price("A", "old", "1400")]  # its own pair breaks it
    assert answer(30, both).reason == Reason.INVALID_FOR_CHANNEL
    # The old price 1800 arrives: the pair holds, both go together.
    pair = build(
        [price("A", "retail", "1500"), price("A", "old", "1800", 3)],
        channel(),
        [known("A", "old", "1200")],
        {},
        rule,
        now=made + timedelta(seconds=30),
    )
    assert [(i.sku, i.prices) for i in pair.items] == [
        ("A", {"price": Decimal("1500"), "old_price": Decimal("1800")})
    ]


def test_a_companion_taken_along_goes_only_where_the_pair_holds_and_waits_on_otherwise() -> None:
    """Review 32d: the claim takes a price waiting for its SKU's next package (receipt
    ``AWAITS_COMPANION``) along with the next price of its SKU. Where together they hold, one
    item carries both and the companion's wait is its own (its receipt says it waits for a
    companion, so the next claim of its SKU takes it along again). Where together they break
    the rule but the new price holds beside the known one, the new price goes as it would
    have alone and the companion waits on, not charged: it never holds back a price that
    could go, and is never refused sooner for having been taken along. (On a channel whose
    old price is a dependent type the item splits instead: the twin test below.)"""
    from dataclasses import replace
    from datetime import timedelta

    from exchange.domain.prices import AWAITS_COMPANION

    def rule(item: Item) -> str | None:
        old_price, price_ = item.prices.get("old_price"), item.prices.get("price", Decimal(0))
        return "gap too small" if old_price is not None and old_price - price_ < 50 else None

    now = datetime(2026, 12, 5, tzinfo=UTC) + timedelta(seconds=30)
    held = [known("A", "retail", "1000"), known("A", "old", "1200")]
    waiting = replace(price("A", "retail", "1500"), receipt=AWAITS_COMPANION)
    alone = build([waiting], channel(), held, {}, rule, now=now).answers[waiting.message_id]
    assert (alone.verdict, alone.receipt) == (Verdict.AWAITING, AWAITS_COMPANION)

    pair = build([price("A", "old", "1800"), waiting], channel(), held, {}, rule, now=now)
    assert [(i.prices, len(i.carried)) for i in pair.items] == [
        ({"price": Decimal("1500"), "old_price": Decimal("1800")}, 2)
    ]
    assert pair.answers == {}

    close = price("A", "old", "1510")  # 1500/1510 breaks the rule; 1000/1510 holds
    split = build([close, waiting], channel(), held, {}, rule, now=now)
    assert [(i.prices, [m.message_id for m in i.carried]) for i in split.items] == [
        ({"price": Decimal("1000"), "old_price": Decimal("1510")}, [close.message_id])
    ]
    left = split.answers[waiting.message_id]
    assert (left.verdict, left.reason, left.receipt) == (Verdict.AWAITING, None, AWAITS_COMPANION)
    assert close.message_id not in split.answers


def test_a_dependent_price_1c_replaced_goes_as_none_beside_prices_taken_in_after_it() -> None:
    """Promise (contract 14: never a version 1C replaced; review b_pair2): the delivered old
    price 1400 whose newer version was quarantined (``replaced_at``) is never carried beside
    a price taken in after that version: old_price "0" (Ozon's none), a min_price left out.
    Nor beside the price taken in with it (the refused item's own retry, review revmp2 F2:
    1C replaced 1400, so it would be a fake strikethrough price)."""
    dependent = {"old_price": Decimal(0), "min_price": None}
    replaced_at = datetime(2026, 12, 5, 10, tzinfo=UTC)
    held = [
        KnownPrice("A", "old", Decimal("1400"), "RUB", 1, replaced_at=replaced_at),
        KnownPrice("A", "min", Decimal("700"), "RUB", 1, replaced_at=replaced_at),
    ]
    later = replace(price("A", "retail", "1100", 3), taken_at=datetime(2026, 12, 5, 11, tzinfo=UTC))
    [item] = build([later], channel(dependent=dependent), held, {}).items
    assert item.prices == {"price": Decimal("1100"), "old_price": Decimal(0)}
    same = replace(price("A", "retail", "1100", 2), taken_at=replaced_at)
    [item] = build([same], channel(dependent=dependent), held, {}).items
    assert item.prices == {"price": Decimal("1100"), "old_price": Decimal(0)}


def test_a_wait_is_said_in_whole_seconds_never_a_fraction() -> None:
    """A wait in a detail's words is whole seconds, rounded up (review ozon, item 8: "looked at
    again in 13.0258 s"); the wait itself keeps its precision."""
    from datetime import timedelta

    from exchange.domain.prices import WaitingPrice
    from exchange.targets.marketplace import items

    now = datetime(2026, 1, 1, tzinfo=UTC)
    due = now + timedelta(seconds=13.0258)
    said = items._waits(
        (WaitingPrice("A", "old", 3, due), "old_price"), channel(), "a rule", now, 60.0
    )
    assert "looked at again in 14 s" in said.detail, said.detail
    assert said.again_in == 13.0258
    assert items.seconds_said(0.2) == "1" and items.seconds_said(60.0) == "60"


@pytest.mark.parametrize(
    ("old", "why"),
    [("1300.555", "kopecks past the field's scale"), ("1300", "another currency")],
)
def test_a_dependent_price_refused_before_sending_never_leaves_the_one_1c_replaced(
    old: str, why: str
) -> None:
    """Promise (contract 14: never a version 1C replaced; review 32o A): 1C's new price 800 and
    old price staged together, the old one refused before sending (its kopecks, its currency):
    the item goes without an old price (Ozon's "0" where 1250 was delivered; Yandex, whose none
    is None, without discountBase), never beside the delivered 1250 («800, было 1250»)."""
    currency = "USD" if why == "another currency" else "RUB"
    messages = [price("A", "retail", "800"), price("A", "old", old, currency=currency)]
    held = [known("A", "retail", "850"), known("A", "old", "1250")]
    for none, expected in ((Decimal(0), {"old_price": Decimal(0)}), (None, {})):
        built = build(messages, channel(dependent={"old_price": none}), held, {})
        [item] = built.items
        assert item.prices == {"price": Decimal("800"), **expected}, why
        assert built.answers["A/old@2"].reason == Reason.INVALID_FOR_CHANNEL


def test_a_dependent_price_of_a_later_package_waits_for_1c_even_beside_the_earlier() -> None:
    """Review ymrace36 (docs/marketplaces.md, the pair rule: «ждёт следующего пакета 1С»):
    Yandex shows 1000 with discountBase 1200; 1C sends value 1100, then, in a later package,
    discountBase 1150 (4.35 % off, under Yandex's 5 %). Where the claim of 1150 takes 1100
    along (its read-back due at that moment, ``exchange.queue.lease``), both are carried as
    new in one item: 1150 still waits for 1C's next package (``COMPANION_GRACE`` from its own
    intake, not charged, ``AWAITS_COMPANION``), as it does claimed alone beside the known
    1100, and 1100 goes without discountBase; once the grace is over, 1150 is
    ``invalid-for-channel``. A pair taken in together (one package) is refused at once."""
    from datetime import timedelta

    from exchange.domain.prices import AWAITING_1C, AWAITS_COMPANION
    from exchange.targets.marketplace.items import COMPANION_GRACE

    def rule(item: Item) -> str | None:
        base, value = item.prices.get("old_price"), item.prices.get("price", Decimal(0))
        if base is not None and base and (base - value) * 100 < base * 5:
            return "a discount under 5 %"
        return None

    ym = channel(dependent={"old_price": None})
    first = datetime(2026, 12, 5, 10, tzinfo=UTC)
    value = replace(price("A", "retail", "1100"), taken_at=first)
    base = replace(price("A", "old", "1150"), taken_at=first + timedelta(seconds=2))
    held = [known("A", "retail", "1000"), known("A", "old", "1200")]

    store = MemoryKnownPrices()
    for one in held:
        store.remember(one)

    def built(messages: list[OutgoingMessage], after: float) -> tuple[list[dict], dict]:
        now = first + timedelta(seconds=after)
        out = asyncio.run(gather(messages, ym, known=store, rule=rule, now=now))
        return [i.prices for i in out.items], out.answers

    for messages in ([value, base], [base, value]):
        items, answers = built(messages, 5)
        assert items == [{"price": Decimal("1100")}], "1100 goes without discountBase"
        said = answers[base.message_id]
        assert (said.verdict, said.reason) == (Verdict.AWAITING, None), said
        assert (said.error_class, said.receipt) == (AWAITING_1C, AWAITS_COMPANION)
        assert "next package" in said.detail and "not charged" in said.detail
        assert value.message_id not in answers
        items, answers = built(messages, COMPANION_GRACE + 3)
        assert items == [{"price": Decimal("1100")}]
        late = answers[base.message_id]
        assert (late.verdict, late.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)

    together = replace(base, taken_at=first)  # one package: refused at once
    items, answers = built([value, together], 5)
    assert items == [{"price": Decimal("1100")}]
    once = answers[together.message_id]
    assert (once.verdict, once.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)


@pytest.mark.parametrize(("none", "without"), [(Decimal(0), {"old_price": Decimal(0)}), (None, {})])
def test_a_waiting_old_price_taken_along_by_1cs_next_price_never_leaves_the_one_it_replaced(
    none: Decimal | None, without: dict[str, Decimal]
) -> None:
    """Promise (contract 14: never a version 1C replaced; review ozpair37): the marketplace
    shows 1000/1400; 1C's old price 1020 came alone, broke the gap beside 1000 and waits for
    1C's next package (``AWAITS_COMPANION``). The claim of 1C's next retail price takes it
    along. Where 1010 with 1020 still breaks the rule, 1020 alone is ``invalid-for-channel``
    and 1010 goes without an old price (Ozon's "0", Yandex's none: left out), never beside
    1400, which 1C replaced (before: 1010/1400, a discount 1C no longer gives); where 900
    with 1020 keeps it, one item carries both."""
    from datetime import timedelta

    from exchange.domain.prices import AWAITS_COMPANION

    def rule(item: Item) -> str | None:
        old_price, price_ = item.prices.get("old_price"), item.prices.get("price", Decimal(0))
        if old_price and (old_price - price_) * 100 < old_price * 5:
            return "a gap under 5 %"
        return None

    first = datetime(2026, 12, 5, 10, tzinfo=UTC)
    now = first + timedelta(seconds=130)
    mp = channel(dependent={"old_price": none})
    held = [known("A", "retail", "1000"), known("A", "old", "1400")]
    waiting = replace(price("A", "old", "1020"), taken_at=first, receipt=AWAITS_COMPANION)
    close = replace(price("A", "retail", "1010"), taken_at=first + timedelta(seconds=120))
    for messages in ([close, waiting], [waiting, close]):
        built = build(messages, mp, held, {}, rule, now=now)
        assert [i.prices for i in built.items] == [{"price": Decimal("1010"), **without}]
        assert [m.message_id for m in built.items[0].carried] == [close.message_id]
        refused = built.answers[waiting.message_id]
        assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
        assert close.message_id not in built.answers
    wide = replace(close, payload=price("A", "retail", "900").payload)
    built = build([wide, waiting], mp, held, {}, rule, now=now)
    assert [i.prices for i in built.items] == [
        {"price": Decimal("900"), "old_price": Decimal("1020")}
    ]
    assert built.answers == {}


@pytest.mark.parametrize(("none", "without"), [(Decimal(0), {"old_price": Decimal(0)}), (None, {})])
def test_a_waiting_price_taken_along_by_1cs_next_old_price_never_goes_beside_the_replaced(
    none: Decimal | None, without: dict[str, Decimal]
) -> None:
    """Promise (contract 14: the marketplace never shows the new price of one type beside the
    old price of the other; the outcome does not depend on the seconds between 1C's
    packages): Ozon shows 1000/1200; 1C's 1500 came alone, broke the rule beside the old
    price 1200 and waits for 1C's next package (``AWAITS_COMPANION``). 1C's next package
    brings the old price 1510, which breaks the gap beside 1500. 1500 goes without an old
    price (Ozon's "0", Yandex's none: left out) and 1510 waits out its own grace for 1C's
    next package, then is quarantined, as one package's 1500/1510 would go. Before: 1510 went
    beside the 1000 that 1C had replaced by 1500 ("1000, was 1510", a 34 % discount 1C never
    stated) and 1500 stayed behind, to be quarantined as the price breaking the rule."""
    from datetime import timedelta

    from exchange.domain.prices import AWAITING_1C, AWAITS_COMPANION
    from exchange.targets.marketplace.items import COMPANION_GRACE

    def rule(item: Item) -> str | None:
        old_price, price_ = item.prices.get("old_price"), item.prices.get("price", Decimal(0))
        if old_price and (old_price - price_) * 100 < old_price * 5:
            return "a gap under 5 %"
        return None

    first = datetime(2026, 12, 5, 10, tzinfo=UTC)
    mp = channel(dependent={"old_price": none})
    held = [known("A", "retail", "1000"), known("A", "old", "1200")]
    waiting = replace(price("A", "retail", "1500"), taken_at=first, receipt=AWAITS_COMPANION)
    close = replace(price("A", "old", "1510"), taken_at=first + timedelta(seconds=120))
    for messages in ([close, waiting], [waiting, close]):
        built = build(messages, mp, held, {}, rule, now=first + timedelta(seconds=130))
        assert [i.prices for i in built.items] == [{"price": Decimal("1500"), **without}]
        assert [m.message_id for m in built.items[0].carried] == [waiting.message_id]
        said = built.answers[close.message_id]
        assert (said.verdict, said.reason) == (Verdict.AWAITING, None), said
        assert (said.error_class, said.receipt) == (AWAITING_1C, AWAITS_COMPANION)
        assert waiting.message_id not in built.answers
        late = first + timedelta(seconds=120 + COMPANION_GRACE + 3)
        built = build(messages, mp, held, {}, rule, now=late)
        assert [i.prices for i in built.items] == [{"price": Decimal("1500"), **without}]
        refused = built.answers[close.message_id]
        assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    wide = replace(close, payload=price("A", "old", "1800").payload)
    built = build([wide, waiting], mp, held, {}, rule, now=first + timedelta(seconds=130))
    assert [i.prices for i in built.items] == [
        {"price": Decimal("1500"), "old_price": Decimal("1800")}
    ]
    assert built.answers == {}


def test_a_lone_dependent_price_quarantined_clears_only_what_a_send_can_clear() -> None:
    """Promise (contract 14: never a version 1C replaced; issue 32, the Ozon twin of review
    pairlate36): Ozon shows 1000 with old_price 1400 and min_price 600. 1C's old price 1020
    alone (a gap under Ozon's 5 %, research §1.1/§1.4) is quarantined once
    ``COMPANION_GRACE`` is over, and ``Built.clears`` hands the target 1000 with old_price "0"
    (§1.1, §1.6.3: "0" removes it) carrying it, with its quarantine for once Ozon took it. Not
    so where nothing a send can clear: a lone min_price (none to send in its place: Ozon keeps
    its own; a send would change nothing and spend one of the hour's 10 updates, §1.3), nor
    where the old price delivered was itself "0" (Ozon shows none: never "still shows old_price
    0.00")."""
    from datetime import timedelta

    from exchange.targets.marketplace.items import COMPANION_GRACE
    from exchange.targets.ozon.target import DEPENDENT, ozon_rule

    ozon = channel(dependent=DEPENDENT)
    made = datetime(2026, 12, 5, tzinfo=UTC)  # the messages' created_at (price() above)
    now = made + timedelta(seconds=COMPANION_GRACE + 1)
    held = [known("A", "retail", "1000"), known("A", "old", "1400"), known("A", "min", "600")]

    lone_old = price("A", "old", "1020")
    built = build([lone_old], ozon, held, {}, ozon_rule, now=now)
    said = built.answers[lone_old.message_id]
    assert (said.verdict, said.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert "still shows old_price 1400," in said.detail, said.detail
    [(clear, then)] = built.clears
    assert clear.prices == {
        "price": Decimal("1000"),
        "old_price": Decimal(0),
        "min_price": Decimal("600"),
    }
    assert clear.carried == [lone_old]
    assert (then.verdict, then.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert "still shows" not in then.detail, "said once Ozon shows none"

    lone_min = price("A", "min", "400")  # under half of 1000
    built = build([lone_min], ozon, held, {}, ozon_rule, now=now)
    said = built.answers[lone_min.message_id]
    assert (said.verdict, said.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert built.clears == [], "an update cannot clear min_price"

    none_shown = [known("A", "retail", "1000"), known("A", "old", "0")]
    built = build([lone_old], ozon, none_shown, {}, ozon_rule, now=now)
    said = built.answers[lone_old.message_id]
    assert (said.verdict, said.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert built.clears == [] and "still shows" not in said.detail, said.detail


def test_a_quarantined_lone_min_price_is_never_called_a_strikethrough_price_buyers_see() -> None:
    """Review ozwords38 item 3: Ozon holds min_price 600; 1C's lone min_price 400 (under half
    of 1000, research §1.1) is quarantined after the wait, and its words said Ozon "still
    shows min_price 600, the strikethrough price 1C replaced: buyers see it". A minimum price
    is no strikethrough price and buyers never see it: the words say Ozon keeps it, no more.
    The lone old price's clearing, once Ozon took it, says what it did in a seller's words
    (item 1): the price 1000 went without a strikethrough price, so 1400 is no longer shown."""
    from datetime import timedelta

    from exchange.targets.marketplace.items import COMPANION_GRACE
    from exchange.targets.ozon.target import DEPENDENT, ozon_rule

    ozon = channel(dependent=DEPENDENT)
    made = datetime(2026, 12, 5, tzinfo=UTC)
    now = made + timedelta(seconds=COMPANION_GRACE + 1)
    held = [known("A", "retail", "1000"), known("A", "old", "1400"), known("A", "min", "600")]

    lone_min = price("A", "min", "400")
    said = build([lone_min], ozon, held, {}, ozon_rule, now=now).answers[lone_min.message_id]
    assert "strikethrough" not in said.detail and "buyers see it" not in said.detail, said
    assert "keeps min_price 600" in said.detail, said.detail
    assert "buyers do not see a minimum price" in said.detail, said.detail

    lone_old = price("A", "old", "1020")
    [(_, then)] = build([lone_old], ozon, held, {}, ozon_rule, now=now).clears
    assert then.detail.endswith(
        "; the service sent the price 1000 without a strikethrough price, so ozon no longer "
        "shows 1400, the strikethrough price 1C replaced: buyers see 1000 without a discount "
        "until 1C sends a strikethrough price that keeps the rule"
    ), then.detail


def test_an_old_price_not_above_the_new_price_is_no_discount_only_a_too_close_one_is_refused() -> (
    None
):
    """Review rev39y H2: a known old price (``Channel.struck``) not above the new price states no
    discount: after 1C's next package had its time, the price goes with the old price's "none"
    (Ozon's old_price "0"); at once where 1C had ended the discount before (its old price not
    above its price). An old price above the new one by less than the rule's gap still breaks
    it: that one is 1C's discount the marketplace refuses, and it is quarantined as before."""
    from datetime import timedelta

    from exchange.targets.marketplace.items import COMPANION_GRACE
    from exchange.words import detail_words

    def rule(item: Item) -> str | None:
        old_price, price_ = item.prices.get("old_price", Decimal(0)), item.prices["price"]
        return "a gap under 5 %" if old_price and old_price < price_ * Decimal("1.05") else None

    ozon = channel(dependent={"old_price": Decimal(0)}, struck=frozenset({"old_price"}))
    made = datetime(2026, 12, 5, tzinfo=UTC)  # the messages' created_at (price() above)
    lone = [price("A", "retail", "1500", 3)]

    def built(
        after: float, *held: KnownPrice
    ) -> tuple[list[dict[str, Decimal]], Classification | None]:
        out = build(lone, ozon, list(held), {}, rule, now=made + timedelta(seconds=after))
        return [i.prices for i in out.items], out.answers.get(lone[0].message_id)

    discount = (known("A", "retail", "1000"), known("A", "old", "1200"))
    items_, answer = built(30, *discount)
    assert items_ == [] and answer is not None and answer.verdict == Verdict.AWAITING
    # The wait says what comes after it: the price goes without the old price, in Russian too.
    # Its end as a time too: ``find`` shows the last look's words later (review rev40 words).
    end = "(at 2026-12-05 00:10:00 UTC)"
    assert f"goes without old_price 570 s from now {end} if 1C sends none" in answer.detail
    assert "quarantined" not in answer.detail, answer.detail
    russian = detail_words(answer.detail)
    assert "через 9 мин 30 с (в 2026-12-05 00:10:00 UTC) цена уйдёт без old_price" in russian
    # The same wait a look later says the same end (the history writes it once).
    assert end in built(90, *discount)[1].detail  # type: ignore[union-attr]
    items_, answer = built(COMPANION_GRACE + 1, *discount)
    assert items_ == [{"price": Decimal(1500), "old_price": Decimal(0)}] and answer is None
    ended = (known("A", "retail", "1000"), known("A", "old", "1000", 2))
    items_, answer = built(30, *ended)
    assert items_ == [{"price": Decimal(1500), "old_price": Decimal(0)}] and answer is None
    close = (known("A", "retail", "1000"), known("A", "old", "1510"))
    items_, answer = built(30, *close)
    assert answer is not None and "quarantined if it still breaks the rule" in answer.detail
    items_, answer = built(COMPANION_GRACE + 1, *close)
    assert items_ == [] and answer is not None and answer.reason == Reason.INVALID_FOR_CHANNEL


def test_a_new_skus_lone_old_price_waits_for_its_price_then_is_quarantined_never_sent_alone() -> (
    None
):
    """Promise (review rev42b, rev43 H3): a SKU new to the channel (no price of it known),
    1C's old price row committed before its price row. It waits ``COMPANION_GRACE`` for 1C's
    price and goes with it; none by then, it is quarantined. Never sent alone: Ozon would
    judge it beside a price of its own, set in the seller's cabinet (1100 "was 1200", a
    discount 1C never stated), and Yandex takes discountBase only with the value (§3.1)."""
    from datetime import timedelta

    from exchange.targets.marketplace.items import COMPANION_GRACE
    from exchange.targets.ozon.target import DEPENDENT, ozon_rule
    from exchange.targets.yandex_market import target as ym
    from exchange.words import detail_words

    made = datetime(2026, 12, 5, tzinfo=UTC)  # the messages' created_at (price() above)
    lone = price("A", "old", "1200")
    ozon = channel(dependent=DEPENDENT, struck=frozenset({"old_price"}), main="price", settle=5.0)
    yandex = yandex_channel(settle=5.0, price_types={"retail": "value", "old": "discountBase"})
    for where, rule in ((ozon, ozon_rule), (yandex, ym._rule)):

        def said(after: float, where: Channel = where, rule: Any = rule) -> Classification:
            now = made + timedelta(seconds=after)
            built = build([lone], where, [], {}, rule, now=now)
            assert built.items == [], "never sent alone"
            return built.answers[lone.message_id]

        waits = said(30)
        assert (waits.verdict, waits.reason) == (Verdict.AWAITING, None), waits
        assert waits.detail.startswith("alone, with no price of its SKU known to the channel")
        russian = detail_words(waits.detail)
        assert russian.startswith("пришла одна, а канал ещё не знает ни одной цены"), russian
        late = said(COMPANION_GRACE + 1)
        assert (late.verdict, late.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    after = made + timedelta(seconds=COMPANION_GRACE + 1)
    quarantined = build([lone], ozon, [], {}, ozon_rule, now=after).answers[lone.message_id]
    assert "old_price goes only beside 1C's price" in quarantined.detail, quarantined.detail
    assert detail_words(quarantined.detail).startswith("цены price этого артикула канал"), (
        detail_words(quarantined.detail)
    )
    main = price("A", "retail", "1000")
    [item] = build([lone, main], ozon, [], {}, ozon_rule, now=made).items
    assert item.prices == {"price": Decimal("1000"), "old_price": Decimal("1200")}


def test_yandexs_minimum_is_a_dependent_price_that_never_holds_the_value_back() -> None:
    """Promise (review rev42 4, rev42b H4): minimumForBestseller depends on the value, as
    discountBase does (research §3.1: both only with the price). 1C's new value beside a new
    minimum out of Yandex's range goes without it, the minimum alone quarantined (before: the
    value waited 10 minutes with it, then both were quarantined); a SKU's first minimum waits
    for 1C's value (before: quarantined at once); ending a discount (discountBase equal to the
    value) goes as no discount beside a known minimum (before: compared with the minimum)."""
    from datetime import timedelta

    from exchange.targets.yandex_market import target as ym

    yandex = yandex_channel()
    now = datetime(2026, 12, 5, tzinfo=UTC) + timedelta(seconds=1)
    held = [known("A", "retail", "1000"), known("A", "old", "1200"), known("A", "min", "800")]

    value, least = price("A", "retail", "1100"), price("A", "min", "200000000")
    built = build([value, least], yandex, held, {}, ym._rule, now=now)
    [item] = built.items
    assert item.prices == {"value": Decimal("1100"), "discountBase": Decimal("1200")}
    assert value.message_id not in built.answers
    refused = built.answers[least.message_id]
    assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)

    first = price("B", "min", "500")
    waits = build([first], yandex, [], {}, ym._rule, now=now).answers[first.message_id]
    assert (waits.verdict, waits.reason) == (Verdict.AWAITING, None), waits

    ended = price("A", "old", "1000")
    [item] = build([ended], yandex, held, {}, ym._rule, now=now).items
    assert item.prices["discountBase"] == 0, item.prices


@pytest.mark.parametrize("market", ["ozon", "yandex-market"])
def test_a_reposted_old_price_a_package_after_a_waiting_price_states_nothing_new_beside_it(
    market: str,
) -> None:
    """Promise (review rev43b H1; the order of 1C's rows decides nothing): the marketplace
    shows 1000 "was 1200"; 1C's 1150 waits beside the known old price 1200 it breaks the rule
    beside (Ozon's 5 % gap, Yandex's 5 % discount), and 1C re-posts 1200 unchanged 6.5 s
    later (past ``pair_settle``, 5 s). The re-post goes alone as the prices shown (nothing
    new), and 1150 keeps waiting for 1C's next old price, then is quarantined for a person,
    as where the re-post came first. Within pair_settle the two are one package: 1150 goes
    without the old price and the re-post is refused, as before."""
    from datetime import timedelta

    from exchange.domain.prices import AWAITS_COMPANION
    from exchange.targets.marketplace.items import COMPANION_GRACE
    from exchange.targets.ozon import target as oz
    from exchange.targets.yandex_market import target as ym

    if market == "ozon":
        mp = channel(
            dependent=oz.DEPENDENT, struck=frozenset({"old_price"}), main="price", settle=5
        )
        rule, main, struck = oz.ozon_rule, "price", "old_price"
    else:
        mp = yandex_channel(settle=5, price_types={"retail": "value", "old": "discountBase"})
        rule, main, struck = ym._rule, "value", "discountBase"
    first = datetime(2026, 12, 5, 10, tzinfo=UTC)
    held = [known("A", "retail", "1000"), known("A", "old", "1200")]
    waiting = replace(price("A", "retail", "1150"), taken_at=first, receipt=AWAITS_COMPANION)
    repost = replace(price("A", "old", "1200"), taken_at=first + timedelta(seconds=6.5))
    now = first + timedelta(seconds=7)
    for messages in ([waiting, repost], [repost, waiting]):
        built = build(messages, mp, held, {}, rule, now=now)
        [item] = built.items
        assert item.prices == {main: Decimal("1000"), struck: Decimal("1200")}, item.prices
        assert [m.message_id for m in item.carried] == [repost.message_id]
        said = built.answers[waiting.message_id]
        assert (said.verdict, said.receipt) == (Verdict.AWAITING, AWAITS_COMPANION), said
        late = build(
            [waiting], mp, held, {}, rule, now=first + timedelta(seconds=COMPANION_GRACE + 1)
        )
        refused = late.answers[waiting.message_id]
        assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    together = replace(repost, taken_at=first + timedelta(seconds=2))
    built = build([waiting, together], mp, held, {}, rule, now=now)
    [item] = built.items
    assert item.new == {main} and item.prices[main] == Decimal("1150"), item.prices
    assert built.answers[together.message_id].verdict is not Verdict.DELIVERED


def test_a_yandex_minimum_above_its_range_is_refused_at_once_never_waited_on() -> None:
    """Promise (review rev43b W3; research §3.1: minimumForBestseller 0 < x ≤ 100 000 000): a
    minimum above Yandex's range is refused alone and at once, whatever the value beside it;
    before, alone it waited 10 minutes "for 1C's other price type", which could never make it
    fit. Beside a new value, the value goes without it. Said in Russian too."""
    from datetime import timedelta

    from exchange.targets.yandex_market import target as ym
    from exchange.words import detail_words

    yandex = yandex_channel(settle=5)
    now = datetime(2026, 12, 5, tzinfo=UTC) + timedelta(seconds=1)
    held = [known("A", "retail", "1000"), known("A", "min", "800")]
    least = price("A", "min", "100000000.01")
    built = build([least], yandex, held, {}, ym._rule, now=now)
    refused = built.answers[least.message_id]
    assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    said = "minimumForBestseller 100000000.01 is above 100000000, the most the channel takes"
    assert said in refused.detail, refused.detail
    assert "100000000" in detail_words(refused.detail)
    assert "the most the channel takes" not in detail_words(refused.detail)
    assert built.items == []
    value = price("A", "retail", "1100")
    yandex = replace(yandex, settle=0)  # the value alone waits for no discountBase row
    built = build([value, least], yandex, held, {}, ym._rule, now=now)
    [item] = built.items
    assert item.prices == {"value": Decimal("1100")}, item.prices
    assert built.answers[least.message_id].verdict is Verdict.TERMINAL
    fits = price("A", "min", "100000000")
    [item] = build([value, fits], yandex, held, {}, ym._rule, now=now).items
    assert item.prices["minimumForBestseller"] == Decimal(100_000_000)


def test_a_new_skus_old_price_beside_1cs_refused_price_says_the_price_was_refused() -> None:
    """Promise (words left by review rev43b): a SKU new to the channel, 1C's price 1000.005
    (Ozon keeps two decimals: refused, quarantined at once) and its old price 1200 in one
    package. The old price waits for 1C's next price, and its words say 1C's price was refused
    and why, in both languages, never "no price of its SKU known", which reads as if 1C had
    sent none."""
    from datetime import timedelta

    from exchange.targets.ozon.target import DEPENDENT, ozon_rule
    from exchange.words import detail_words

    ozon = channel(dependent=DEPENDENT, struck=frozenset({"old_price"}), main="price", settle=5.0)
    made = datetime(2026, 12, 5, tzinfo=UTC)
    old, main = price("A", "old", "1200"), price("A", "retail", "1000.005")
    built = build([main, old], ozon, [], {}, ozon_rule, now=made + timedelta(seconds=1))
    assert built.items == []
    refused = built.answers[main.message_id]
    assert (refused.verdict, refused.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    waits = built.answers[old.message_id]
    assert (waits.verdict, waits.reason) == (Verdict.AWAITING, None), waits
    assert "1C's price of its SKU was refused (price 1000.005: the channel takes at most 2" in (
        waits.detail
    ), waits.detail
    assert "no price of its SKU known to the channel yet:" not in waits.detail, waits.detail
    russian = detail_words(waits.detail)
    assert "цену price этого артикула из 1С канал отверг (price 1000.005:" in russian, russian
    assert "the channel takes" not in russian, russian
