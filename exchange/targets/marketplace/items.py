"""One item per SKU (contract 14): what a marketplace request carries.

An item carries every mapped price type of its SKU: the prices of the messages leased now (the
deliveries it carries as new: the claim leases every due price type of a SKU it picks together,
``exchange.queue.lease``) and, for each other mapped price type, the newest version that
may have reached the marketplace (``KnownPrices``, read per channel: delivered, or in doubt, a
send whose result is unknown, ``exchange.db.known_prices``; review ozon 33: an older one would
put back the price it replaced); a price type the channel never had is left out, never sent as
``0``. The item's verdict is the verdict of every delivery it carried as new (``spread``).

Before an item is sent, each price is checked as the marketplace takes it: the channel's
currency, the field's money (``money.Money``: no silent rounding), the marketplace's own price
rules (a target's ``rule``), and under ``sku_source = article`` the offer's article. A message
that fails is ``invalid-for-channel`` (terminal, with the rule in words); the others of its SKU
are sent without it, with the known price of its type in its place: the version known
before it, since the marketplace channels' ``KnownPrices`` leave out what is in flight, which
is this batch's own (``exchange.db.known_prices``, ``in_flight``; review 32: the refused
version was the one known, and the item went without a discount Yandex then dropped). But a
dependent price (``Channel.dependent``: an old price, a minimum) is never replaced by the one
1C replaced: the item goes without a price of its type (Ozon's old_price "0" where one was
delivered, Yandex without discountBase), as in a rule's split (review 32o A: an old price
refused for its kopecks beside a new price went beside the delivered old one, «800, было
1250», a discount 1C no longer gave).

An item that breaks the rules while another price type of its SKU is still to be given to the
channel (``WaitingPrices``: new or delayed, a version newer than the one the item carries, e.g.
Yandex Market's ``value`` waiting for its retry after a 503 while its ``discountBase`` is
claimed alone, or Ozon's ``price`` held by the hourly limit beside a new ``old_price``) is not
refused: a person has nothing to fix, the rule may hold once both go together. It waits
(``AWAITING``: not charged) until that price is due, at most ``most`` seconds at a time, and
goes with it (issue 32). Only when nothing of the kind waits is it ``invalid-for-channel``,
and, when the item carries a known price of another type (which may be what breaks the rule),
only once its newest message is ``COMPANION_GRACE`` old, counted from when the service took it
in (``taken_at``: an outage or a backlog before intake does not use the grace up), or took in
1C's first post of that price still undelivered (1C re-exports its prices every few minutes:
a re-post of the same amount, a new version that supersedes the waiting one, never restarts
the wait, review rev40 B4; another amount is a new price, ``_since``): 1C often
sends a SKU's price types in separate packages, so the other type's new price may be a package
away (review 32d: Ozon's
price 1500 beside the delivered old price 1200 was quarantined, and the old price 1800 that
came next went out beside the price 1000, a discount 1C never gave). Such a wait leaves the
receipt ``AWAITS_COMPANION``: a claim on a marketplace channel that leases another aggregate of
its SKU takes the waiting delivery along under the same lease (``exchange.queue.lease``), and
the item carries both when together they keep the rule (one request, 1500/1800, never 1000/1800
first). When they do not, the item splits as a pair of one package does (``_split``): the
independent price goes without a price of the dependent type, never beside the one 1C replaced.
A dependent price that waited so (an old price 1020 beside the delivered 1000/1400) has had
1C's next package once the independent price it waited for comes: it is
``invalid-for-channel`` and 1010 goes with none (review ozpair37: «1010, было 1400»). An
independent price that waited (1500 beside the old 1200) goes with none once 1C's next old
price 1510 breaks beside it, and 1510 waits out its own grace (before: 1510 went beside 1000,
a discount 1C never stated, and 1500 waited on to be quarantined). On a channel without
dependent types the new price goes as it would have alone and the companion waits on.

A price quarantined for such a rule, broken beside the known price of another type (its
receipt ``PAIR_RULE``; its words say what a retry and a cancel do, ``pair_words``), is a
person's to decide (contract 4, 14: nothing leaves quarantine by itself). Meanwhile an item
that carries a new dependent price (an old price, a minimum, a discount base) beside the known
independent price that the quarantined one replaced does not go: the pair it would show (1000
with 1800 while 1500 sits in quarantine) is one 1C never stated. It waits (``AWAITING``, not
charged, its receipt ``AWAITS_COMPANION``) with words naming the quarantined entry; a retry of
that one takes it along in one item (``exchange.queue.lease``), a cancel lets it go beside the
price the marketplace holds (review ozonpair). A dependent price quarantined so is not waited
for: the next price goes without it (``_replaced``), as documented.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Protocol

from exchange.domain.pause import KNOWN_PRICES_UNREAD
from exchange.domain.prices import (
    AWAITING_1C,
    AWAITING_PERSON,
    AWAITS_COMPANION,
    PAIR_RULE,
    KnownPrice,
    WaitingPrice,
)
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage
from exchange.targets.marketplace.articles import NO_ARTICLES, Articles
from exchange.targets.marketplace.money import Money, text
from exchange.targets.prices import (
    NO_KNOWN_PRICES,
    NOTHING_WAITING,
    KnownPrices,
    WaitingPrices,
    read_price,
)

ARTICLES_UNREAD = "ArticlesUnread"  # error_class: the service's database gave no articles
AWAITING_PRICE = "AwaitingPrice"  # error_class: an item waits for a price of its SKU (issue 32)
MOST_WAIT = 60.0  # seconds an item waits for another price of its SKU before it looks again
COMPANION_GRACE = 600.0  # seconds a price broken beside a known one waits for 1C's next package
AFTER_RULE_REFUSAL = 1.0  # seconds before a price goes again without its refused dependent one


@dataclass(frozen=True, slots=True)
class Channel:
    """What the shared part needs of a marketplace channel's settings."""

    target: str  # ozon, wildberries, yandex-market
    price_types: Mapping[str, str | None]  # the service's price type -> the marketplace's field
    setting: str  # the mapping's name in words: ozon_price_types
    money: Mapping[str, Money]  # each field's money
    currency: str = "RUB"
    sku_source: str = "sku"  # sku | article
    rounding: str = "none"  # none | half-up | down
    # The fields whose rule depends on another's (an old price on the price, a minimum on it):
    # field -> what the item carries without a valid price of that type (``Decimal(0)``: sent
    # as "none", Ozon's old_price "0", Yandex's discountBase left out; None: left out). Where a
    # rule breaks with one of these new beside the price, only it is refused (``_split``).
    dependent: Mapping[str, Decimal | None] = field(default_factory=dict)
    # The dependent fields that are a price "before the discount", struck through beside the
    # price (Ozon's old_price, Yandex's discountBase): one not above the price is no discount
    # (a known one: ``_no_discount``; 1C's new one, delivered as its "none": ``_ended``), as a
    # storefront shows 1C's two price types; a minimum is not one.
    struck: frozenset[str] = frozenset()
    # What the channel's words call it (``said``); empty: its target's code.
    called: str = ""
    # Seconds a price taken in alone beside the known price of its pair's other type waits for
    # 1C's row of that type (``_settles``; the ``pair_settle`` setting, 0: never waits).
    settle: float = 0.0
    # The field of the price a pair's old price stands beside (Ozon's price, Yandex's value):
    # ``_lone_beside`` pairs it with ``struck``, never with a minimum; empty: no pair.
    main: str = ""

    @property
    def said(self) -> str:
        """The channel as a detail names it (in English, as details are written; said in
        Russian by ``words.detail_words``): "channel ozon (Ozon)" where EXCHANGE_CHANNELS
        names it, else the marketplace ("Ozon", "Yandex Market"), never its target's code
        ("a rule of ozon", "yandex-market": review words34). The target is given it
        (``app``: ``words.channel_subject``, the rule the worker's busy words keep)."""
        return self.called or self.target


@dataclass(slots=True)
class Item:
    """One SKU's prices as one request item."""

    sku: str  # as staged
    offer_id: str  # what the marketplace names it by: the SKU or its article
    prices: dict[str, Decimal] = field(default_factory=dict)  # field -> amount sent
    carried: list[OutgoingMessage] = field(default_factory=list)  # delivered with this item
    new: set[str] = field(default_factory=set)  # the fields the carried messages set
    versions: dict[str, int] = field(default_factory=dict)  # field -> the version it carries
    fields_of: dict[str, str] = field(default_factory=dict)  # carried message_id -> its field
    # carried message_id -> what its delivery says besides the marketplace's answer (``_ended``:
    # 1C's old price went as no discount)
    said: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Built:
    items: list[Item]
    answers: dict[str, Classification]  # message_id -> why it is not sent (never in an item)
    broken: dict[str, str] = field(default_factory=dict)  # SKU -> the rule its item broke
    # Dependent prices quarantined beside the known independent one while the marketplace
    # shows the one 1C replaced (``_clearing``): the item of the known prices without it,
    # carrying them, and their quarantine once the marketplace shows that item. A target that
    # sends none of these leaves their ``answers`` as they are.
    clears: list[tuple[Item, Classification]] = field(default_factory=list)
    # SKUs whose item may wait for the other price type of its pair (``_settles``): built again
    # with the time (``gather``).
    settling: set[str] = field(default_factory=set)


Rule = Callable[[Item], str | None]
"""A marketplace's price rule, checked on a whole item before sending: None when it holds,
else the rule in words (the item's carried messages are ``invalid-for-channel``)."""


def sku_of(message: OutgoingMessage) -> str | None:
    """The SKU a price message names (None: no price payload)."""
    try:
        return str(json.loads(message.payload)["sku"])
    except (ValueError, KeyError, TypeError):
        return None


def by_sku(messages: Sequence[OutgoingMessage], max_items: int) -> list[list[OutgoingMessage]]:
    """The ``requests`` of a marketplace target: the messages of one SKU in one request (one
    item), at most ``max_items`` SKUs a request, in the order of their first message; never
    two messages of one aggregate in a request (a second goes to a later one)."""
    most = max(max_items, 1)
    requests: list[tuple[list[OutgoingMessage], set[str], set[str]]] = []
    for message in messages:
        sku = sku_of(message)
        key = sku if sku is not None else f"\0{message.message_id}"
        for taken, skus, aggregates in requests:
            if message.aggregate in aggregates:
                continue
            if key in skus or len(skus) < most:
                taken.append(message)
                skus.add(key)
                aggregates.add(message.aggregate)
                break
        else:
            requests.append(([message], {key}, {message.aggregate}))
    return [taken for taken, _, _ in requests]


def invalid(detail: str) -> Classification:
    return Classification(
        Verdict.TERMINAL,
        detail,
        error_class="InvalidForChannel",
        reason=Reason.INVALID_FOR_CHANNEL,
    )


class Carrying(Protocol):
    """What ``spread`` and ``spread_rule`` read of an item as a target sent it (the shared
    ``Item``, or a target's own): the deliveries it carried as new and each one's field."""

    @property
    def carried(self) -> list[OutgoingMessage]: ...

    @property
    def fields_of(self) -> dict[str, str]: ...


def spread(item: Carrying, verdict: Classification) -> dict[str, Classification]:
    """The item's verdict, for every delivery it carried as new; a delivery says what went for
    it where that is not 1C's price (``Item.said``: an old price sent as no discount)."""
    said: Mapping[str, str] = getattr(item, "said", {})  # a target's own item has none
    out: dict[str, Classification] = {}
    for message in item.carried:
        note = said.get(message.message_id) if verdict.verdict is Verdict.DELIVERED else None
        out[message.message_id] = (
            replace(verdict, detail=f"{verdict.detail}; {note}") if note else verdict
        )
    return out


def spread_rule(
    item: Carrying, channel: Channel, verdict: Classification, about: Iterable[str]
) -> dict[str, Classification]:
    """The marketplace's own refusal of an item by a price rule (``channel-rule``), decided as
    the rule is before sending (``_split``, issue 32): where the item carried as new a price
    valid on its own beside dependent ones (``Channel.dependent``), only the dependent ones
    take the refusal; the others wait a moment (``AWAITING``, not charged) and go again
    without them and without the delivered price of their type the refused one replaced
    (``_replaced``: Ozon's old_price "0", Yandex without discountBase), so 1C's correction of
    the dependent price later goes beside a delivered price.
    ``about``: the dependent fields the refusal names (none: it concerns the price itself).
    Otherwise every delivery the item carried takes it (``spread``)."""
    named = set(about) & set(channel.dependent)
    carried, fields_of = item.carried, item.fields_of
    dependent = [m for m in carried if fields_of.get(m.message_id) in named]
    if not dependent or len(dependent) == len(carried):
        if named and not dependent and verdict.verdict is Verdict.TERMINAL:
            # The price refused beside the known dependent price the rule names: a new one
            # of that type waits for a person's decision on it (``PAIR_RULE``).
            words = pair_words(channel, set(fields_of.values()), None)
            verdict = replace(verdict, detail=verdict.detail + words, receipt=PAIR_RULE)
        return spread(item, verdict)
    out = {message.message_id: verdict for message in dependent}
    fields = ", ".join(sorted({fields_of[m.message_id] for m in dependent}))
    again = Classification(
        Verdict.AWAITING,
        f"{channel.said} refused its item by a rule of {fields} ({verdict.detail}): only "
        f"{fields} is quarantined; this price goes again without it in "
        f"{AFTER_RULE_REFUSAL:g} s, not charged",
        again_in=AFTER_RULE_REFUSAL,
        error_class=AWAITING_PRICE,
    )
    out.update((m.message_id, again) for m in carried if m not in dependent)
    return out


def build(
    messages: Sequence[OutgoingMessage],
    channel: Channel,
    known: Iterable[KnownPrice],
    articles: Mapping[str, str],
    rule: Rule | None = None,
    *,
    waiting: Iterable[WaitingPrice] = (),
    now: datetime | None = None,
    most: float = MOST_WAIT,
    first: Mapping[str, datetime] | None = None,
) -> Built:
    """The items of ``messages`` (one per SKU, in the order of their first message) and the
    answers of the messages that are not sent. ``known``: the latest known prices of their
    SKUs; ``articles``: their articles (under ``sku_source = article``); ``waiting``: the
    prices of their SKUs still to be given to the channel (an item that breaks ``rule`` waits
    for a newer one, at most ``most`` seconds from ``now`` at a time, see the module);
    ``first``: message id -> when the service took in 1C's first post of its price still
    undelivered (``WaitingPrices.taken_first``), where 1C posted it before."""
    first = first or {}
    answers: dict[str, Classification] = {}
    broken_by: dict[str, str] = {}
    clears: list[tuple[Item, Classification]] = []
    settling: set[str] = set()
    pending: dict[str, list[WaitingPrice]] = {}
    for price_ in waiting:
        pending.setdefault(price_.sku, []).append(price_)
    held: dict[str, list[KnownPrice]] = {}
    for price_k in known:
        held.setdefault(price_k.sku, []).append(price_k)
    taken: dict[str, list[tuple[OutgoingMessage, str, Decimal]]] = {}
    # SKU -> the dependent prices refused here (field, 1C's version): 1C replaced the one
    # delivered before, so the item goes without a price of that type (``_without``).
    refused_here: dict[str, list[tuple[str, int]]] = {}
    # SKU -> why 1C's price of an independent type (price, value) was refused here: said by
    # the words of a dependent price of the SKU left with no price to go beside (``_orphan``).
    main_refused: dict[str, str] = {}
    for message in messages:
        price = read_price(
            message, target=channel.target, mapping=channel.price_types, setting=channel.setting
        )
        if isinstance(price, Classification):
            answers[message.message_id] = price
            continue
        if price.currency != channel.currency:
            answers[message.message_id] = invalid(
                f"the price is in {price.currency}; the channel's account takes "
                f"{channel.currency} (currency): never converted"
            )
        else:
            fitted = _fit(channel, price.mapped, price.amount)
            if not isinstance(fitted, str):
                taken.setdefault(price.sku, []).append((message, price.mapped, fitted))
                continue
            answers[message.message_id] = invalid(f"{price.mapped} {fitted}")
        if price.mapped in channel.dependent:
            refused_here.setdefault(price.sku, []).append((price.mapped, message.version))
        else:
            main_refused[price.sku] = answers[message.message_id].detail
    ready: list[Item] = []

    def goes(item: Item, sending: Item) -> None:
        """``sending`` (``item`` as it goes) is ready, unless ``item`` is a lone row of a
        pair that waits ``pair_settle`` for 1C's other row (``_lone_beside``, ``_settles``)."""
        beside = _lone_beside(item, channel) if rule is not None else None
        if beside is not None:
            settling.add(item.sku)
            settles = _settles(item, channel, beside, now, first)
            if settles is not None:
                answers.update(spread(item, settles))
                return
        ready.append(sending)

    for sku, entries in taken.items():
        item = _item(sku, entries, channel, held.get(sku, ()))
        for mapped, version in refused_here.get(sku, ()):
            _without(item, channel, mapped, version)
        if channel.sku_source == "article":
            article = articles.get(item.sku)
            if not article:
                why = invalid(
                    f"SKU {item.sku} has no article (Артикул) in the CommerceML the service "
                    "read, and the channel names offers by their article (sku_source=article)"
                )
                answers.update(spread(item, why))
                continue
            item.offer_id = article
        quarantined = _quarantined_beside(item, channel, held.get(sku, ()))
        if quarantined is not None:
            answers.update(spread(item, _waits_for_person(quarantined, channel, most)))
            continue
        broken = rule(item) if rule is not None else None
        if broken is None and rule is not None and _orphan(item, channel):
            broken = _orphan_words(item, channel, main_refused.get(sku))
        ended = _ended(item, channel) if rule is not None else None
        if ended is not None and rule is not None and rule(ended) is None:
            # 1C's new old price not above the price it will stand beside: no discount, it
            # goes as its type's "none" and is delivered (review rev40 A4). Beside a known
            # price only once no newer price of its SKU waits (1C lowered 1000 to 500 with the
            # old price 600, 500 waits for its retry: 600 beside 1000 would show 1000 without
            # the discount 1C states): ``gather`` reads them (``broken``) and builds again.
            if not item.new - set(channel.dependent):
                broken_by[item.sku] = broken or _ended_words(item, channel)
                awaited = _awaited(item, channel, pending.get(sku, ()))
                if awaited is not None:
                    waits = _waits(awaited, channel, broken_by[item.sku], now, most)
                    answers.update(spread(item, waits))
                    continue
                # An old price below the known price (not equal: 1C's way to end a discount)
                # is 1C lowering the price with a discount, its new price often a package
                # later (a split export, rows committed one by one): it waits for it as long as
                # a price waits for its old price, then goes as no discount (review rev41 H1:
                # 1C's 600, 0.3 s before its 500, showed 1000 without its discount on Ozon and
                # spent one of its ten updates an hour).
                below = _below(item, channel, held.get(sku, ()))
                grace = _grace(item, channel, now, first) if below else None
                if grace is not None:
                    without = sorted(channel.struck & item.new)
                    waits = _waits_for_1c(
                        channel, broken_by[item.sku], grace, most, now, without=without
                    )
                    answers.update(spread(item, waits))
                    continue
            goes(item, ended)
            continue
        if broken is not None and rule is not None:
            # Both new in this item (none taken along waiting for 1C's next package, which
            # keeps its own wait below): only the dependent price that broke the rule stays.
            # So too where every price taken along is a dependent one and 1C's next package
            # brought the independent price it waited for (review ozpair37: the old price 1020
            # waited beside 1000/1400, 1C's 1010 came, and 1010 went beside 1400, which 1C
            # had replaced by 1020): 1020 is quarantined, 1010 goes without an old price.
            # And where the price taken along is the independent one (1500 waited beside the
            # old price 1200 it breaks; 1C's next package brought the old price 1510, which
            # breaks beside 1500 too): 1500 goes without an old price and 1510 waits out its
            # own grace, as one package's 1500/1510 would go; never 1510 beside the 1000 1C
            # replaced by 1500, a discount 1C never stated (review rev37, ozpair37's fixer).
            restated = _restated(entries, channel, held.get(sku, ()))
            if restated:
                # 1C re-posted the old price the channel holds a package after the price that
                # waits beside it (review rev43b H1): it goes as it is (unchanged), the price
                # keeps its own wait, as in the other order.
                alone = _item(sku, restated, channel, held.get(sku, ()))
                alone.offer_id = item.offer_id
                if rule(alone) is None:
                    ready.append(alone)
                    offer_id = item.offer_id
                    entries = [e for e in entries if e not in restated]
                    item = _item(sku, entries, channel, held.get(sku, ()))
                    item.offer_id = offer_id
                    broken = rule(item) or broken
            split = _split(
                item, entries, channel, held.get(sku, ()), rule, now=now, most=most, first=first
            )
            if split is not None:
                going, refused = split
                ready.append(going)
                answers.update(refused)
                if any(_later(e[0], entries, channel) for e in entries if e[0] in item.carried):
                    # A dependent price of a later package than the price it broke the rule
                    # beside: its wait is counted on ``now`` (``gather`` builds again with it).
                    broken_by[item.sku] = broken
                continue
            own = [e for e in entries if e[0].receipt != AWAITS_COMPANION]
            if own and len(own) < len(entries):
                # Companions taken early by the claim (``AWAITS_COMPANION``) go only where
                # they make the item hold: without them, the item goes as it would have
                # alone, and they wait on as before (their grace counted from their own 1C
                # package).
                alone = _item(sku, own, channel, held.get(sku, ()))
                alone.offer_id = item.offer_id
                if rule is not None and rule(alone) is None:
                    ready.append(alone)
                    left = [e for e in entries if e[0].receipt == AWAITS_COMPANION]
                    item = _item(sku, left, channel, held.get(sku, ()))
                    item.offer_id = alone.offer_id
                    broken = (rule(item) if rule is not None else None) or broken
            broken_by[item.sku] = broken
            awaited = _awaited(item, channel, pending.get(item.sku, ()))
            grace = _grace(item, channel, now, first)
            no_discount = _no_discount(
                item, channel, held.get(sku, ()), rule, ended_only=grace is not None
            )
            if awaited is not None:
                answers.update(spread(item, _waits(awaited, channel, broken, now, most)))
            elif no_discount is not None:
                ready.append(no_discount)
            elif grace is not None:
                # Once the grace is over, an old price not above the price is no discount: the
                # wait's words say what comes then (review rev39y H2).
                then = _no_discount(item, channel, held.get(sku, ()), rule, ended_only=False)
                without = sorted(channel.struck & set(item.prices) - item.new) if then else []
                orphan = _orphan(item, channel)
                waits = _waits_for_1c(
                    channel, broken, grace, most, now, without=without, orphan=orphan
                )
                answers.update(spread(item, waits))
            else:
                quarantine = invalid(broken)
                if rule(_only_new(item)) is None and not _orphan(item, channel):
                    # Broken beside the known price of another type: a person decides, and a
                    # new price of that type waits for the decision (``_quarantined_beside``).
                    live = _live(item, channel, held.get(sku, ()))
                    quarantine.detail += pair_words(channel, set(item.fields_of.values()), live)
                    quarantine.receipt = PAIR_RULE
                shown = _shown_dependent(item, channel, held.get(sku, ()))
                if shown is not None:
                    clear = _clearing(item, channel, held.get(sku, ()), rule)
                    if clear is not None:
                        said = quarantine.detail + cleared_words(channel, clear, *shown)
                        clears.append((clear, replace(quarantine, detail=said)))
                    quarantine.detail += still_shown_words(channel, *shown)
                answers.update(spread(item, quarantine))
            continue
        goes(item, item)
    return Built(ready, answers, broken_by, clears, settling)


def pair_words(channel: Channel, fields: set[str], live: Decimal | None) -> str:
    """What a person's decision on a price quarantined by a rule of two price types does
    (``PAIR_RULE``), said after its rule: a new price of the dependent types 1C sends waits
    for it, a retry sends both together, a cancel leaves the price the marketplace holds
    (``live``, None: unread) beside it. Empty where no such wait can follow: the price refused
    is itself a dependent one, or the channel maps no dependent type."""
    mapped = set(channel.price_types.values())
    others = sorted(f for f in channel.dependent if f in mapped)
    own = sorted(fields - set(channel.dependent))
    if not others or not own:
        return ""
    # Said when the price is quarantined and read later (review rev38b: "a new old_price from
    # 1C waits" where none had come, and "leaves price 1000 live" read after 1600/1800 went):
    # a new price of the other type *that 1C sends meanwhile* waits, and the price held is
    # the one at the quarantine's time.
    then = f" ({own[0]} {text(live)} when this was quarantined)" if live is not None else ""
    return (
        f"; a new {', '.join(others)} that 1C sends meanwhile waits for a person's decision on "
        f"this price: retrying it sends both together, cancelling it leaves the {own[0]} "
        f"{channel.said} holds{then}"
    )


def still_shown_words(channel: Channel, mapped: str, amount: Decimal) -> str:
    """What the marketplace shows while a new dependent price (an old price, a discount base)
    sits in quarantine with nothing sent for its item, or its clearing refused: the one 1C
    replaced, ``mapped`` ``amount``, struck through, until 1C's next price of the SKU or a
    retry's clearing goes without it (``_replaced``; review words35b item 4: the seller could
    not tell that buyers still saw the old strikethrough price; review rev37 W1: the words said
    a cancel would end it, which sends nothing). A dependent price with no "none" to send
    (Ozon's min_price) is no strikethrough price, and buyers never see it (review ozwords38
    item 3): the marketplace keeps it, and the words say that alone."""
    if channel.dependent.get(mapped) is None:
        return (
            f"; {channel.said} keeps {mapped} {text(amount)}, the one 1C replaced (buyers do not "
            "see a minimum price) until 1C's next price of this type goes"
        )
    return (
        f"; {channel.said} still shows {mapped} {text(amount)}, the strikethrough price 1C "
        "replaced: buyers see it until 1C's next price of this SKU goes without it, or until a "
        "retry of this one sends the price without it again and the marketplace takes it; a "
        "cancel leaves it shown"
    )


def _price_of(channel: Channel, clear: Item) -> str:
    """The price (of an independent type) a clearing ``clear`` carries, as its words say it."""
    own = [a for f, a in clear.prices.items() if f not in channel.dependent]
    return text(own[0]) if own else "?"


def cleared_words(channel: Channel, clear: Item, mapped: str, amount: Decimal) -> str:
    """What the clearing (``_clearing``) of the dependent price 1C replaced did, said on the
    quarantine of the one it carried once the marketplace took it (review ozwords38 item 1:
    the words said only the rule, and nothing told the seller that the price went without a
    strikethrough price so buyers no longer see ``amount``): in a seller's words, never the
    API's fields (the strikethrough price: Ozon's old_price, Yandex's discountBase)."""
    price = _price_of(channel, clear)
    return (
        f"; the service sent the price {price} without a strikethrough price, so "
        f"{channel.said} no longer shows {text(amount)}, the strikethrough price 1C replaced: "
        f"buyers see {price} without a discount until 1C sends a strikethrough price that "
        "keeps the rule"
    )


def clearing_waits_words(
    channel: Channel, clear: Item, mapped: str, amount: Decimal, wait: str
) -> str:
    """The clearing of ``clear`` not settled yet (held by a limit, or its answer lost: the
    marketplace may still apply it), said after the marketplace's refusal of the price it
    carried (review rev39 W3: only the wait was said, "HTTP 500", then "Ozon may still apply
    the send of old_price 0", and nothing told the seller that Ozon had refused the old
    price, nor why): what the clearing is for, and its ``wait`` in its own words."""
    price = _price_of(channel, clear)
    return (
        f"; the service is sending the price {price} without a strikethrough price so that "
        f"{channel.said} no longer shows {mapped} {text(amount)}, the strikethrough price 1C "
        f"replaced: {wait}"
    )


def refused_before_words(refusal: str, wait: str) -> str:
    """A later try's ``wait`` of a price the marketplace refused by its rule (``refusal``: its
    code and meaning) while the send without its strikethrough price, carrying it, is not
    settled (``clearing_waits_words``; review rev39 W3): the refusal still said first."""
    return (
        f"{refusal}; the service sent the price without a strikethrough price after "
        f"this refusal: {wait}"
    )


def refused_clearing_words(channel: Channel, clear: Item, refusal: str) -> str:
    """The marketplace's refusal (its code and meaning, ``refusal``) of the clearing of
    ``clear``, said on the quarantine of the price it carried (review ozwords38 item 4: the
    words said the strikethrough price was still shown, never why the clearing failed)."""
    price = _price_of(channel, clear)
    return (
        f"; the service sent the price {price} without a strikethrough price, and "
        f"{channel.said} refused it: {refusal}"
    )


def _shown_dependent(
    item: Item, channel: Channel, known: Iterable[KnownPrice]
) -> tuple[str, Decimal] | None:
    """The dependent price the marketplace shows of those the item carries as new alone (its
    type and the amount delivered before, which 1C replaced); None where the item carries an
    independent price too (it would go with the item), or none was delivered, or 1C's earlier
    replacement already went as none (``_replaced``: the marketplace shows none), or the one
    delivered was itself its "none" (1C's old price 0: Ozon shows no old price)."""
    if not item.new or not item.new <= set(channel.dependent):
        return None
    for price in sorted(known, key=lambda k: k.version, reverse=True):
        mapped = channel.price_types.get(price.price_type)
        if mapped is None or mapped not in item.new or price.currency != channel.currency:
            continue
        if price.version >= item.versions.get(mapped, 0) or _replaced(price, mapped, channel):
            continue
        if price.amount == channel.dependent[mapped]:
            return None  # delivered as its "none" (1C's old price 0: Ozon shows none, §1.1)
        return mapped, price.amount
    return None


def _clearing(item: Item, channel: Channel, known: Iterable[KnownPrice], rule: Rule) -> Item | None:
    """The known prices of ``item``'s SKU without the dependent ones it carries as new (their
    "none": Yandex without discountBase), carrying them: what 1C states once they are
    quarantined (docs/marketplaces.md: the old price 1C no longer states is a false discount;
    review pairlate36: 1100 stayed beside the 1200 1C replaced by 1150, which broke the rule
    in a later package than 1100's; the same shape on Ozon: old_price "0", research §1.1,
    §1.6.3). None where no independent price is known, or the rule breaks without them too,
    or none of them has a "none" to send in its place (Ozon's min_price: left out, Ozon keeps
    its own, so an item without it would change nothing Ozon shows and only spend one of the
    product's 10 updates an hour, §1.3)."""
    if all(channel.dependent.get(item.fields_of[m.message_id]) is None for m in item.carried):
        return None
    clear = _item(item.sku, [], channel, known)
    clear.offer_id = item.offer_id
    for message in item.carried:
        _without(clear, channel, item.fields_of[message.message_id], message.version)
    if all(f in channel.dependent for f in clear.prices) or rule(clear) is not None:
        return None
    clear.carried = list(item.carried)
    clear.fields_of = dict(item.fields_of)
    clear.new = set(item.new)
    return clear


# What a target's own answer reads (Ozon's refusal of a lone dependent price by its rule:
# ``OzonTarget._clear_refused``), the same decisions as the service's own rule path's.
shown_dependent = _shown_dependent
clearing = _clearing


def _live(item: Item, channel: Channel, known: Iterable[KnownPrice]) -> Decimal | None:
    """The known price of the independent type the item carries as new (``price``,
    ``value``): what the marketplace shows while the item's new one is quarantined."""
    for price in known:
        mapped = channel.price_types.get(price.price_type)
        if mapped is not None and mapped in item.new and mapped not in channel.dependent:
            return price.amount
    return None


def _only_new(item: Item) -> Item:
    """``item`` with only the prices it carries as new (none known beside them)."""
    return Item(
        item.sku,
        item.offer_id,
        {f: a for f, a in item.prices.items() if f in item.new},
        item.carried,
        item.new,
        {f: v for f, v in item.versions.items() if f in item.new},
        item.fields_of,
    )


def _quarantined_beside(
    item: Item, channel: Channel, known: Iterable[KnownPrice]
) -> KnownPrice | None:
    """The known price beside which an item carrying a new dependent price (an old price, a
    minimum, a discount base) must not go: one of an independent type (``price``, ``value``)
    whose newer version sits in quarantine for a rule of two price types
    (``KnownPrice.quarantined``). 1C replaced it; the pair the item would show (1000 with
    1800) is one 1C never stated, and whether the quarantined one goes is a person's to
    decide (contract 4, 14: nothing leaves quarantine by itself; review ozonpair item 1)."""
    if not item.new & set(channel.dependent):
        return None
    for price in known:
        mapped = channel.price_types.get(price.price_type)
        if mapped is None or mapped in channel.dependent or mapped in item.new:
            continue
        if price.quarantined is not None and price.quarantined_version > item.versions.get(
            mapped, 0
        ):
            return price
    return None


def _waits_for_person(price: KnownPrice, channel: Channel, most: float) -> Classification:
    mapped = channel.price_types.get(price.price_type)
    wait = max(most, 1.0)
    return Classification(
        Verdict.AWAITING,
        f"waits for a person's decision on {mapped} version {price.quarantined_version} of its "
        f"SKU (price type {price.price_type!r}, message_id {price.quarantined}), quarantined by "
        f"a rule of two price types: beside the {mapped} {price.amount} held on {channel.said} "
        f"it would show a pair 1C never stated; retrying {price.quarantined} sends both "
        f"together, cancelling it lets this price go beside {mapped} {price.amount}; looked at "
        f"again in {seconds_said(wait)} s, not charged",
        again_in=wait,
        error_class=AWAITING_PERSON,  # a wait on an operator, not on the marketplace (ops.waits)
        receipt=AWAITS_COMPANION,  # a retry of the quarantined one takes it along (queue.lease)
    )


def _copy(item: Item) -> Item:
    """``item`` to change without changing it (``_ended``, ``_no_discount``)."""
    return Item(
        item.sku,
        item.offer_id,
        dict(item.prices),
        list(item.carried),
        set(item.new),
        dict(item.versions),
        dict(item.fields_of),
        dict(item.said),
    )


def _ended(item: Item, channel: Channel) -> Item | None:
    """``item`` with each price "before the discount" (``Channel.struck``) it carries as new
    that is not above the price it stands beside (the new one, or the known one) as its type's
    "none" (Ozon's old_price "0", Yandex without discountBase), still carrying 1C's message:
    1C's two price types state no discount (1C ends a discount with the old price equal to the
    price; a full export repeats the old 1200 beside the raised 1500), as a storefront shows
    them, and it is delivered, never judged by the rule. None: no such price (1C's 0 is its
    "none" already)."""
    own = [item.prices[f] for f in item.prices if f not in channel.dependent]
    if not own:
        return None
    lowest = min(own)
    ended = sorted(
        f for f in channel.struck & item.new if f in item.prices and 0 < item.prices[f] <= lowest
    )
    if not ended:
        return None
    going = _copy(item)
    for f in ended:
        none = channel.dependent[f]
        own_ = min(o for o in item.prices if o not in channel.dependent)
        for message in item.carried:
            if item.fields_of.get(message.message_id) == f:
                going.said[message.message_id] = (
                    f"{f} {text(item.prices[f])} was not above {own_} {text(lowest)}: it went "
                    "as no discount"
                )
        if none is None:
            going.prices.pop(f, None)
        else:
            going.prices[f] = none
    return going


def _below(item: Item, channel: Channel, known: Iterable[KnownPrice]) -> bool:
    """Whether a price "before the discount" the item carries as new is below (not equal to)
    the lowest price of an independent type it stands beside: 1C's discount whose new price
    may be a package away, not 1C ending one (``_ended``). Not where it repeats the known one
    of its type: 1C re-posted an old price that already went (as no discount), and nothing
    is a package away (review rev41b H1: each re-post waited 10 minutes, then sent Ozon an
    identical update, one of its ten an hour)."""
    own = [item.prices[f] for f in item.prices if f not in channel.dependent]
    if not own:
        return False
    below = [
        f for f in channel.struck & item.new if f in item.prices and 0 < item.prices[f] < min(own)
    ]
    if not below:
        return False
    return not _reposted(item, channel, known, below)


def _reposted(
    item: Item, channel: Channel, known: Iterable[KnownPrice], fields: Iterable[str]
) -> bool:
    """Whether each of ``fields`` the item carries as new repeats the known price of its type:
    1C re-exports its prices, and a re-post of what already went has nothing a package away
    (``_below``; a lone row of a pair waits ``pair_settle`` whether re-posted or not,
    ``_lone_beside``)."""
    before = _item(item.sku, [], channel, known)
    return all(before.prices.get(f) == item.prices[f] for f in fields)


def _restated(
    entries: Sequence[tuple[OutgoingMessage, str, Decimal]],
    channel: Channel,
    known: Iterable[KnownPrice],
) -> list[tuple[OutgoingMessage, str, Decimal]]:
    """The dependent prices of ``entries`` that only re-post the known price of their type
    (``_reposted``: 1C's re-export of the old price the channel holds), taken in more than
    ``Channel.settle`` after the independent prices they were claimed beside, where each of
    those was waiting for 1C's next package (``AWAITS_COMPANION``: it broke a rule beside
    that very known price). Such a re-post states nothing new beside a price 1C wrote a
    package before it: the price keeps its wait, as where the re-post came first and went
    (review rev43b H1: 1150 waited beside the known old price 1200, 1C re-posted 1200 6.5 s
    later, and 1150 went at once without it; in the other order 1150 waited and was
    quarantined for a person). Empty: none such (a pair of one package, a new old price)."""
    own = [e for e in entries if e[1] not in channel.dependent]
    dependent = [e for e in entries if e[1] in channel.dependent]
    if not own or not dependent or any(m.receipt != AWAITS_COMPANION for m, _, _ in own):
        return []
    restated = [
        e
        for e in dependent
        if e[0].receipt != AWAITS_COMPANION
        and e[1] in channel.struck
        and _later(e[0], entries, channel)
        and _reposted(_item("", [e], channel, known), channel, known, [e[1]])
    ]
    return restated if len(restated) == len(dependent) else []


def _lone_beside(item: Item, channel: Channel) -> tuple[str, Decimal | None] | None:
    """The price of the other type of its pair (field, amount; None: none known) that ``item``,
    one price type of 1C's pair taken in alone, would stand beside where 1C's row of the other
    type may come a moment later (1C writes a SKU's price types as rows of their own, committed
    one by one, or in a split export). A pair is the main price (``Channel.main``) and a price
    "before the discount" (``Channel.struck``) the channel maps; a minimum taken along is neither
    (review rev42 H1: Ozon's min_price row taken along sent 500 beside 1200). Every lone row of
    a pair waits, whatever it stands beside:

    - a new main price beside a known old price above it, a discount 1C stated for an earlier
      price (review rev41b H3: 500 went beside the known 1200, then 500/600 0.3-3 s later, a
      discount 1C never stated and two updates); beside none known, or one not above it (review
      rev43 H4: a new SKU's 1000, then 1000/1200 2 s later: two updates, one of Ozon's ten an
      hour, and a moment without 1C's discount);
    - 1C's new old price beside the known main price (review rev41b H2: 1C ended a discount
      with the old price 1000 equal to the price and lowered the price to 800 a second later:
      1000 with nothing struck through, then 800/1000);
    - a re-post of the known price of its type too (review rev43 H1: 1C's old price 1200 again,
      then its price 1150 two seconds later, a gap Ozon refuses: the re-post went at once,
      unchanged, and 1150 waited 10 minutes for a new old price and was quarantined, while in
      the other order 1150 went without the old price at once). It goes as it is once the wait
      is over (an unchanged one sends nothing to Ozon: ``OzonTarget._unchanged``).

    None: both types new in the item, or the channel maps no old price. A pair's row that comes
    after the other row went alone (its wait over) waits too (review rev42 H2, H1/H2 of
    rev42b). An old price with no main price known at all is no lone row of a pair: it goes
    only beside 1C's price (``_orphan``)."""
    main = channel.main
    if not main or main not in item.prices:
        return None
    struck_new = sorted(item.new & channel.struck)
    if main in item.new and not struck_new:
        for f in sorted(channel.struck & set(channel.price_types.values())):
            return f, item.prices.get(f)
        return None
    if struck_new and main not in item.new:
        return main, item.prices[main]
    return None


def _settles(
    item: Item,
    channel: Channel,
    beside: tuple[str, Decimal | None],
    now: datetime | None,
    first: Mapping[str, datetime],
) -> Classification | None:
    """The wait of ``item`` for 1C's row of the other type of its pair, the known price it
    would stand beside (``beside``: field, amount, ``_lone_beside``):
    ``Channel.settle`` from the intake of the newest price it carries, each from 1C's first
    post of its price still undelivered (``_since``: a re-post of the same amount never
    restarts it, review rev42 H3); the claim of that row takes it along
    (``AWAITS_COMPANION``), and both go in one update. None: it goes now (no such pair, no
    settle, or the settle is over)."""
    if now is None or channel.settle <= 0 or not item.carried:
        return None
    left = channel.settle - (now - max(_since(m, first) for m in item.carried)).total_seconds()
    if left <= 0:
        return None
    field_, amount = beside
    end = now + timedelta(seconds=left)
    alone = (
        f"taken in alone beside the known {field_} {text(amount)} of its SKU"
        if amount is not None
        else f"taken in alone, no {field_} of its SKU known to the channel yet"
    )
    return Classification(
        Verdict.AWAITING,
        f"{alone}; 1C may send the other price type in its next package: looked at again "
        f"in {seconds_said(left)} s, "
        f"goes as it is {left:.0f} s from now (at {end:%Y-%m-%d %H:%M:%S} UTC) if 1C sends "
        "none by then (1C writes a SKU's price types a moment apart: both go in one update), "
        "not charged",
        again_in=left,
        error_class=AWAITING_1C,  # a wait on 1C, not on the marketplace (ops.waits)
        receipt=AWAITS_COMPANION,  # a claim of its SKU takes it along (queue.lease.claim)
    )


def _ended_words(item: Item, channel: Channel) -> str:
    """Why an item whose old price is not above the known price (``_ended``), and which keeps
    the rule as it is (Yandex: a discountBase equal to the value is none), looks for a newer
    price of its SKU first: said where it waits for one (``_waits``)."""
    old = min(channel.struck & item.new)
    own = min(f for f in item.prices if f not in channel.dependent)
    return (
        f"{old} {text(item.prices[old])} is not above {own} {text(item.prices[own])}: no "
        f"discount, it goes beside the newest {own} of its SKU"
    )


def _no_discount(
    item: Item,
    channel: Channel,
    known: Iterable[KnownPrice],
    rule: Rule,
    *,
    ended_only: bool,
) -> Item | None:
    """``item`` without a price "before the discount" (``Channel.struck``) where it breaks the
    rule only by a known one (1C sent none with these prices) that is not above the new price
    it would stand beside: 1C's two price types then state no discount (a storefront shows no
    struck-through price where the old one is not above the price), and the new price goes
    with the type's "none" (Ozon's old_price "0", Yandex without discountBase), never held back
    by an old price 1C left below it (review rev39y H2: 1C ended a discount with the old price
    equal to the price, as the docs advise, then raised the price to 1500; 1500 was judged
    beside the old 1000, waited 10 minutes and was quarantined while Yandex kept 1000).

    ``ended_only`` (while ``COMPANION_GRACE`` lasts, 1C's next package may bring the old price
    that goes with the new one): only where 1C had ended the discount before these prices (its
    latest old price not above its latest price known: nothing to wait for); once the grace is
    over, 1C's prices are what they are, and an old price below the new one is no discount.
    None: it still breaks the rule (a gap too small, a minimum above the price), or there is no
    such old price to go without."""
    own = [f for f in item.new if f not in channel.dependent]
    struck = [f for f in channel.struck if f in item.prices and f not in item.new]
    if not own or not struck:
        return None
    lowest = min(item.prices[f] for f in own)
    if any(item.prices[f] > lowest for f in struck):
        return None
    if ended_only:
        before = _item(item.sku, [], channel, known)
        if any(f not in before.prices for f in own) or any(
            before.prices.get(f, Decimal(0)) > min(before.prices[o] for o in own) for f in struck
        ):
            return None
    going = _copy(item)
    for f in struck:
        _without(going, channel, f, going.versions.get(f, 0))
    return going if rule(going) is None else None


def _split(
    item: Item,
    entries: Sequence[tuple[OutgoingMessage, str, Decimal]],
    channel: Channel,
    known: Iterable[KnownPrice],
    rule: Rule,
    *,
    now: datetime | None = None,
    most: float = MOST_WAIT,
    first: Mapping[str, datetime] | None = None,
) -> tuple[Item, dict[str, Classification]] | None:
    """The item's rule decided price type by price type (issue 32, contract 14): an item that
    carries as new both a price valid on its own (``price``, ``value``) and a dependent one
    (``Channel.dependent``: an old price, a minimum) that breaks a rule beside it goes without
    the dependent one, which alone is ``invalid-for-channel``. Without it, the item carries no
    price of its type (Ozon's old_price "0", Yandex Market without discountBase: research
    §1.1/§1.6.3, §3.6.2), never the one delivered before it: 1C replaced that one, and a
    strikethrough price 1C no longer states is a fake discount (review revmp2 F2: 950 went
    beside the delivered old price 1400 that 1C had replaced by 990). Each dependent price
    that keeps the rule beside the others still goes. None: nothing to
    split (no dependent price new beside an independent one, or the rule breaks without them
    too: the whole item's verdict stands).

    A dependent price taken in later than the item's other new prices (``_later``: 1C sent it
    in a later package) is not refused while its ``COMPANION_GRACE`` lasts: it waits for 1C's
    next package (``AWAITING``, not charged, ``AWAITS_COMPANION``), as it would claimed alone
    beside them as known prices; carried in one item only because the claim took the earlier
    one along (a Yandex read-back due at that moment, ``exchange.queue.lease``), the timing
    must not decide (review ymrace36). A pair of one package is refused at once."""
    dependent = [e for e in entries if e[1] in channel.dependent]
    own = [e for e in entries if e[1] not in channel.dependent]
    if not dependent or not own:
        return None
    own_fields = {e[1] for e in own}
    going = _item(item.sku, own, channel, known)
    going.offer_id = item.offer_id
    if rule(going) is not None:
        # The last valid price of the dependent types does not hold beside the new ones
        # either: the item goes without them (no version older than the refused one is
        # ever sent in its place).
        for message, mapped, _ in dependent:
            none = channel.dependent[mapped]
            if none is None:
                going.prices.pop(mapped, None)
                going.versions.pop(mapped, None)
            else:
                going.prices[mapped] = none
                going.versions[mapped] = max(message.version, going.versions.get(mapped, 0))
        if rule(going) is not None:
            return None
    refused: dict[str, Classification] = {}
    for message, mapped, fitted in dependent:
        trial = Item(
            going.sku,
            going.offer_id,
            {**going.prices, mapped: fitted},
            [*going.carried, message],
            {*going.new, mapped},
            {**going.versions, mapped: message.version},
            {**going.fields_of, message.message_id: mapped},
        )
        why = rule(trial)
        if why is None:
            going = trial
            continue
        left = _grace_of(message, now, first or {}) if _later(message, entries, channel) else None
        if left is not None:
            refused[message.message_id] = _waits_for_1c(channel, why, left, most, now)
        else:
            # In a seller's words, never the API's fields (review ozwords38 item 2: "price
            # went without it" named Ozon's field).
            rest = "the price" if going.new <= own_fields else "the price and the other new prices"
            refused[message.message_id] = invalid(
                f"{why}; only this price is quarantined: {rest} went without it"
            )
        _without(going, channel, mapped, message.version)
    if rule(going) is not None:
        return None
    return going, refused


def _without(item: Item, channel: Channel, mapped: str, version: int) -> None:
    """``item`` without a price of the dependent type ``mapped`` (its "none": Ozon's old_price
    "0", none sent), where 1C's ``version`` of it, refused, is newer than the one it carries:
    the delivered one 1C replaced never goes beside the new prices (review revmp2 F2)."""
    if mapped not in item.prices or version < item.versions.get(mapped, 0):
        return  # none carried (none sent, as before), or a newer one: 1C's own, it stays
    none = channel.dependent[mapped]
    if none is None:
        item.prices.pop(mapped, None)
    else:
        item.prices[mapped] = none
    item.versions[mapped] = version


def _item(
    sku: str,
    entries: Sequence[tuple[OutgoingMessage, str, Decimal]],
    channel: Channel,
    known: Iterable[KnownPrice],
) -> Item:
    """The item of one SKU: ``entries`` (a message, its field, its amount as sent) carried as
    new, and for each other mapped price type the known price of its SKU."""
    item = Item(sku, sku)
    for message, mapped, fitted in entries:
        item.prices[mapped] = fitted
        item.new.add(mapped)
        item.versions[mapped] = message.version
        item.carried.append(message)
        item.fields_of[message.message_id] = mapped
    for held in sorted(known, key=lambda k: (k.sku, k.price_type, k.version)):
        mapped_ = channel.price_types.get(held.price_type)
        if mapped_ is None or mapped_ in item.new:
            continue  # left out of this channel or not mapped, or sent new now
        if held.currency != channel.currency:
            continue
        if _replaced(held, mapped_, channel):
            # 1C replaced this dependent price by one the channel never took (quarantined, or
            # cancelled by a person): never carried again, whenever this item's prices came
            # (the channel holds none of it once an item went without it), the item goes as
            # without it (review b_pair2: an old price cleared beside 1380 came back beside
            # 1100; review revmp2 F2: the refused one's own companion went beside it). The
            # refused one stays for the person (contract 4).
            none = channel.dependent[mapped_]
            if held.version >= item.versions.get(mapped_, 0):
                if none is None:
                    item.prices.pop(mapped_, None)
                else:
                    item.prices[mapped_] = none
                item.versions[mapped_] = held.version
            continue
        amount = _fit(channel, mapped_, held.amount)
        if isinstance(amount, str):
            continue  # never sent as it is: the marketplace keeps what it has
        if held.version >= item.versions.get(mapped_, 0):
            item.prices[mapped_] = amount
            item.versions[mapped_] = held.version
    return item


def _replaced(held: KnownPrice, mapped: str, channel: Channel) -> bool:
    """Whether the known dependent price ``held`` was replaced (``KnownPrice.replaced_at``): 1C
    sent a newer version of its type the channel never took. The version 1C replaced never
    goes again, whenever the item's prices came in: the refused version's companion too (the
    same package, its retry after the marketplace's refusal, ``spread_rule``) goes without it,
    as its split before sending does (review revmp2 F2: a fake strikethrough price)."""
    return held.replaced_at is not None and mapped in channel.dependent


def _awaited(
    item: Item, channel: Channel, pending: Iterable[WaitingPrice]
) -> tuple[WaitingPrice, str] | None:
    """The price of the item's SKU, still to be given to the channel, that the item waits
    for (the first due): a mapped type the item does not carry as new, a version newer than
    the one it carries; None: nothing waits, the rule's verdict is final."""
    found: tuple[WaitingPrice, str] | None = None
    for price in pending:
        mapped = channel.price_types.get(price.price_type)
        if mapped is None or mapped in item.new:
            continue
        if price.version <= item.versions.get(mapped, 0):
            continue
        if found is None or price.due < found[0].due:
            found = (price, mapped)
    return found


def _grace(
    item: Item, channel: Channel, now: datetime | None, first: Mapping[str, datetime]
) -> float | None:
    """Seconds left of ``COMPANION_GRACE`` for an item that carries a known price of another
    type beside its new ones, or only dependent prices with no price of an independent type
    known (``_orphan``), or None (nothing known beside it, or its grace is over)."""
    if now is None or not item.carried:
        return None
    if not set(item.prices) - item.new and not _orphan(item, channel):
        return None
    # From when the service took the newest of them in, not when 1C wrote it: an outage or a
    # backlog before intake never uses the grace up (review ozon 33); each from 1C's first
    # post of its price still undelivered (``_since``).
    age = (now - max(_since(m, first) for m in item.carried)).total_seconds()
    left = COMPANION_GRACE - age
    return left if left > 0 else None


def _orphan(item: Item, channel: Channel) -> bool:
    """Whether ``item`` carries only prices of dependent types (an old price, a minimum), none
    of an independent type (``price``, ``value``) new or known: a SKU new to the channel whose
    old price 1C wrote first, its price a row or a package later (review rev42b: 1C's old price
    1200 of a new SKU, committed a second before its price 1000, was quarantined at once as an
    old price without a price). It waits for it as a price broken beside a known one does."""
    return bool(item.prices) and all(f in channel.dependent for f in item.prices)


def _orphan_words(item: Item, channel: Channel, refused: str | None = None) -> str:
    """Why a price of a dependent type with no main price of its SKU known waits (``_orphan``):
    the marketplace would judge it beside a price of its own, set outside 1C. ``refused``: why
    1C's main price of the SKU, in the same batch, was refused (kopecks the channel does not
    take, say), said instead of "none known", which reads as if 1C had sent none."""
    fields = ", ".join(sorted(item.new))
    why = (
        f"1C's {channel.main} of its SKU was refused ({refused})"
        if refused
        else f"no {channel.main} of its SKU known to the channel yet"
    )
    return (
        f"{why}: {fields} goes only beside 1C's {channel.main}, never alone beside a price the "
        "marketplace holds that 1C did not state with it"
    )


def _later(
    message: OutgoingMessage,
    entries: Sequence[tuple[OutgoingMessage, str, Decimal]],
    channel: Channel,
) -> bool:
    """Whether the dependent price ``message`` was taken in after every price of an
    independent type (``price``, ``value``) carried beside it, by more than
    ``Channel.settle``: 1C sent it in a later package, so the other type's next price may be
    a package away, as where the earlier one is only known (``_grace``). Taken in together,
    or within ``pair_settle`` (rows 1C writes a moment apart are one package, whichever comes
    first: review rev44 1, 1150 then its old price 1200 1.5 s later kept 1200 waiting 10
    minutes where the other order refused it at once): False."""
    own = [m for m, mapped, _ in entries if mapped not in channel.dependent]
    if not own or message not in [m for m, mapped, _ in entries if mapped in channel.dependent]:
        return False
    return _taken(message) > max(_taken(m) for m in own) + timedelta(seconds=channel.settle)


def _grace_of(
    message: OutgoingMessage, now: datetime | None, first: Mapping[str, datetime]
) -> float | None:
    """Seconds left of ``COMPANION_GRACE`` for ``message``, counted from its intake (``_since``);
    None without ``now`` or once it is over."""
    if now is None:
        return None
    left = COMPANION_GRACE - (now - _since(message, first)).total_seconds()
    return left if left > 0 else None


def _since(message: OutgoingMessage, first: Mapping[str, datetime]) -> datetime:
    """When the wait of ``message`` for 1C's next package began: the intake of 1C's first post
    of its price still undelivered (``first``, ``WaitingPrices.taken_first``), else its own.
    1C re-exports its prices every few minutes, each a new version that supersedes the waiting
    one: counted from the newest, a raised price re-posted every 5 minutes never went (review
    rev40 B4: Ozon kept 1000 "was 1200" while 1C sent 1500 again and again); a post of another
    amount is a new price, and its wait counts from its own intake."""
    own = _taken(message)
    earlier = first.get(message.message_id)
    return earlier if earlier is not None and earlier < own else own


def _taken(message: OutgoingMessage) -> datetime:
    """When the service took ``message`` in (its intake time); 1C's own time without one."""
    return message.taken_at if message.taken_at is not None else message.created_at


def seconds_said(seconds: float) -> str:
    """A wait in a detail's words: whole seconds, rounded up (never earlier than it goes), at
    least 1; never "13.0258 s" (review ozon, item 8). The Russian words say a long one in
    minutes and hours (``exchange.words.human_age``)."""
    return str(max(1, math.ceil(seconds)))


def _waits_for_1c(
    channel: Channel,
    broken: str,
    left: float,
    most: float,
    now: datetime | None,
    *,
    without: Sequence[str] = (),
    orphan: bool = False,
) -> Classification:
    """``without``: the old prices (``Channel.struck``) the price goes without when the wait is
    over (``_no_discount``: not above it, no discount), said instead of the quarantine;
    ``orphan``: no price of an independent type of its SKU is known (``_orphan``). The
    end is said as a time too: ``find`` shows the last look's words later, when "N s from now"
    no longer holds (review rev40 words)."""
    wait = max(min(1.0, most), min(most, left))
    end = (now if now is not None else datetime.now(UTC)) + timedelta(seconds=left)
    at = f"{left:.0f} s from now (at {end:%Y-%m-%d %H:%M:%S} UTC)"
    then = (
        f"goes without {' and '.join(without)} {at} if 1C sends none by then "
        "(an old price not above the price is no discount)"
        if without
        else f"quarantined if it still breaks the rule {at}"
    )
    alone = (
        "alone, with no price of its SKU known to the channel yet,"
        if orphan
        else "alone beside the other known prices of its SKU"
    )
    return Classification(
        Verdict.AWAITING,
        f"{alone} it breaks a rule of {channel.said} ({broken}); 1C may send the other "
        f"price type in its next package: looked at again in {seconds_said(wait)} s, {then}, "
        "not charged",
        again_in=wait,
        error_class=AWAITING_1C,  # a wait on 1C, not on the marketplace (ops.waits)
        receipt=AWAITS_COMPANION,  # a claim of its SKU takes it along (queue.lease.claim)
    )


def _waits(
    awaited: tuple[WaitingPrice, str],
    channel: Channel,
    broken: str,
    now: datetime | None,
    most: float,
) -> Classification:
    price, mapped = awaited
    at = now if now is not None else datetime.now(UTC)
    least = min(1.0, most)
    wait = max(least, min(most, (price.due - at).total_seconds()))
    return Classification(
        Verdict.AWAITING,
        f"waits for {mapped} (price type {price.price_type!r}, version {price.version}), "
        f"still to be given to {channel.said}: alone it breaks a rule ({broken}); both go "
        f"together, looked at again in {seconds_said(wait)} s, not charged",
        again_in=wait,
        error_class=AWAITING_PRICE,
        receipt=AWAITS_COMPANION,  # a claim of its SKU takes it along (queue.lease.claim)
    )


def _fit(channel: Channel, mapped: str, amount: Decimal) -> Decimal | str:
    money = channel.money.get(mapped, Money())
    try:
        return money.fit(amount, channel.rounding)
    except InvalidOperation:
        return f"{amount} is not a price the channel takes"


async def gather(
    messages: Sequence[OutgoingMessage],
    channel: Channel,
    *,
    known: KnownPrices = NO_KNOWN_PRICES,
    articles: Articles = NO_ARTICLES,
    rule: Rule | None = None,
    waiting: WaitingPrices = NOTHING_WAITING,
    now: datetime | None = None,
    most: float = MOST_WAIT,
) -> Built:
    """``build``, with the known prices and the articles read from their ports (in a thread:
    they reach the database), and, only when an item breaks ``rule``, the prices of its SKU
    still waiting and when 1C first posted its own (``WaitingPrices``). When any cannot be
    read, no item is sent: every price message waits (``PAUSE``: the service's own database,
    not the marketplace, is at fault; an item half-known would send an older price of another
    type)."""
    skus = sorted({s for s in (sku_of(m) for m in messages) if s is not None})
    try:
        latest = await asyncio.to_thread(known.latest, skus) if skus else []
    except Exception as exc:  # the port's store failed
        return _unread(messages, f"the latest known prices could not be read: {type(exc).__name__}")
    found: dict[str, str] = {}
    if channel.sku_source == "article" and skus:
        try:
            found = await asyncio.to_thread(articles.of, skus)
        except Exception as exc:
            return _unread(messages, f"the articles could not be read: {type(exc).__name__}")
    built = build(messages, channel, latest, found, rule)
    if not built.broken and not (built.settling and channel.settle > 0):
        return built
    pending: list[WaitingPrice] = []
    first: dict[str, datetime] = {}
    try:
        if built.broken:
            pending = await asyncio.to_thread(waiting.waiting, sorted(built.broken))
        # 1C's first post of each price still undelivered: a wait for 1C's next package, or
        # for the other row of a pair, never restarts on a re-post of the same amount.
        looked = built.broken.keys() | built.settling
        ids = sorted(m.message_id for m in messages if sku_of(m) in looked)
        if ids:
            first = dict(await asyncio.to_thread(waiting.taken_first, ids))
    except Exception as exc:
        return _unread(messages, f"the waiting prices could not be read: {type(exc).__name__}")
    return build(
        messages, channel, latest, found, rule, waiting=pending, now=now, most=most, first=first
    )


def _unread(messages: Sequence[OutgoingMessage], detail: str) -> Built:
    unread = Classification(Verdict.PAUSE, detail, error_class=KNOWN_PRICES_UNREAD)
    return Built([], {m.message_id: unread for m in messages})
