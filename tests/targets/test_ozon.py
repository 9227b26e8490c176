"""The ``ozon`` target (contract 14's ``ozon`` bullet, clause by clause) against the Ozon
simulator (exchange/dev/ozonsim.py), over HTTP, with the simulator's clock (still, moved by the
test) as the target's clock; each UNCONFIRMED point the target meets is run both ways."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from random import Random
from typing import TypeVar

import httpx
import pytest
from conformance import price

from exchange import app
from exchange.dev.ozonsim import IMPORT_PRICES, INFO_PRICES, ROLES, OzonSimulator
from exchange.dev.ozonsim import Item as SimItem
from exchange.domain.pause import PauseCause, pause_cause
from exchange.domain.prices import KnownPrice, WaitingPrice
from exchange.domain.reasons import Reason
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.states import Event
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ConfigurationError
from exchange.ops.attention import pause_words
from exchange.settings import load_settings
from exchange.targets.base import OutgoingMessage
from exchange.targets.marketplace.articles import MemoryArticles
from exchange.targets.ozon.target import LOST_HOLD, SPLITS, OzonTarget
from exchange.targets.prices import MemoryKnownPrices, MemoryWaitingPrices
from exchange.words import detail_words, error_words

CLIENT, KEY = "836741", "ozon-key"
T = TypeVar("T")
TYPES = {"retail": "price", "old": "old_price", "min": "min_price"}


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    simulator = OzonSimulator(CLIENT, KEY, time_scale=0)  # a still clock, moved by the tests
    simulator.start()
    yield simulator
    simulator.stop()


def target(ozon: OzonSimulator, **options: object) -> OzonTarget:
    values: dict[str, object] = {"price_types": TYPES, "timeout": 5.0, "clock": ozon.clock.now}
    values.update(options)
    return OzonTarget(ozon.url, CLIENT, lambda: KEY, **values)  # type: ignore[arg-type]


def run(made: OzonTarget, scenario: Callable[[OzonTarget], Awaitable[T]]) -> T:
    async def go() -> T:
        try:
            return await scenario(made)
        finally:
            await made.aclose()

    return asyncio.run(go())


async def send_all(made: OzonTarget, messages: list[OutgoingMessage]) -> list[Classification]:
    answers: list[Classification] = []
    for request in made.requests(messages):
        answers += await made.send(request)
    return answers


def deliver(made: OzonTarget, *messages: OutgoingMessage) -> list[Classification]:
    return run(made, lambda t: send_all(t, list(messages)))


def imports(ozon: OzonSimulator) -> int:
    return ozon.requests[IMPORT_PRICES]


# -- the request ---------------------------------------------------------------------------


def test_at_most_1000_items_a_request_with_offer_id_and_money_as_strings(
    ozon: OzonSimulator,
) -> None:
    seen: list[dict[str, object]] = []

    class Spy(httpx.AsyncBaseTransport):
        inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path == IMPORT_PRICES:
                seen.append(json.loads(request.content))
            return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    messages = [price(f"SKU-{n}", 1, f"{100 + n}.50") for n in range(1001)]
    answers = deliver(target(ozon, transport=Spy()), *messages)

    assert {a.verdict for a in answers} == {Verdict.DELIVERED}
    assert [len(body["prices"]) for body in seen] == [1000, 1]  # type: ignore[arg-type]
    first = seen[0]["prices"][0]  # type: ignore[index]
    assert first == {"offer_id": "SKU-0", "price": "100.50", "currency_code": "RUB"}
    assert ozon.largest_batch == 1000 and ozon.price("SKU-1000") == Decimal("1100.50")


def test_an_item_carries_price_old_price_and_min_price_of_one_sku(ozon: OzonSimulator) -> None:
    known = MemoryKnownPrices()
    known.remember(KnownPrice("SKU-1", "min", Decimal("600"), "RUB", 4))
    answers = deliver(
        target(ozon, known=known),
        price("SKU-1", 2, "1000.00"),
        price("SKU-1", 3, "1200.00", price_type="old"),
    )
    assert [a.verdict for a in answers] == [Verdict.DELIVERED, Verdict.DELIVERED]
    product = ozon.product("SKU-1")
    assert product is not None and ozon.price("SKU-1") == Decimal("1000")
    assert (product.old_price, product.min_price) == (Decimal("1200"), Decimal("600"))
    assert imports(ozon) == 1, "one item, one request"


# -- per-item answers inside a 200 ---------------------------------------------------------


def test_per_item_answers_updated_not_found_and_a_price_rule(ozon: OzonSimulator) -> None:
    ozon.set_category_bounds("SKU-R", Decimal(1000), Decimal(2000))
    answers = deliver(
        target(ozon),
        price("SKU-A", 1, "100.00"),
        price("NOSUCH-1", 1, "100.00"),
        price("SKU-R", 1, "100.00"),
    )
    assert [a.verdict for a in answers] == [Verdict.DELIVERED, Verdict.TERMINAL, Verdict.TERMINAL]
    assert answers[1].reason == Reason.UNKNOWN_SKU and "NOT_FOUND_ERROR" in answers[1].detail
    rule = answers[2]
    assert rule.reason == Reason.CHANNEL_RULE
    assert "invalid_category_price" in rule.detail
    assert "слишком высокую или слишком низкую цену" in rule.detail
    assert imports(ozon) == 1


def test_an_old_price_set_outside_1c_that_refuses_the_price_is_named_with_the_way_out(
    ozon: OzonSimulator,
) -> None:
    """Research §1.1, §1.4: Ozon compares a price with the old price it holds; 1C maps no old
    price, so the 1000 Ozon holds was set in the seller's cabinet, and a price of 1500 is
    refused ``old_price_less_than_price``. The words name that old price and the way out
    (an old price from 1C, or the old price cleared in the cabinet), in both languages."""
    product = ozon.product("SKU-1")
    assert product is not None
    product.old_price = Decimal(1000)  # the seller's, set in Ozon's cabinet
    (answer,) = deliver(target(ozon, price_types={"retail": "price"}), price("SKU-1", 1, "1500"))
    assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.CHANNEL_RULE)
    said = answer.detail
    assert "old_price_less_than_price" in said and "old_price 1000" in said, said
    assert "set outside 1C" in said and "map a 1C price type to old_price" in said, said
    assert "clear the old price in Ozon's seller cabinet" in said, said
    russian = detail_words(said)
    assert "1000" in russian and "вне 1С" in russian and "в кабинете продавца Ozon" in russian
    assert "outside" not in russian, russian


def test_an_old_price_set_outside_1c_with_old_price_mapped_says_to_send_it_not_to_map_it(
    ozon: OzonSimulator,
) -> None:
    """Review ozonpair, item 2 (research §1.1, §1.4): the channel maps 1C's price type ``old``
    to old_price, but 1C has sent none for this SKU; Ozon holds 1200 set in the cabinet and
    refuses 1300. The way out is 1C's old price of this SKU (or clearing it in the cabinet),
    never a mapping the channel already has, in both languages."""
    product = ozon.product("SKU-1")
    assert product is not None
    product.old_price = Decimal(1200)  # the seller's, set in Ozon's cabinet
    types = {"retail": "price", "old": "old_price"}
    (answer,) = deliver(target(ozon, price_types=types), price("SKU-1", 1, "1300"))
    assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.CHANNEL_RULE)
    said = answer.detail
    assert "old_price 1200" in said and "map a 1C price type" not in said, said
    assert "send this SKU's old price from 1C (price type 'old', mapped to old_price" in said
    assert "clear the old price in Ozon's seller cabinet" in said, said
    russian = detail_words(said)
    assert "сопоставьте" not in russian and "уже сопоставлен" in russian, russian
    assert "'old'" in russian and "outside" not in russian, russian


def test_a_200_without_one_items_result_settles_the_others_by_their_own_answers(
    ozon: OzonSimulator,
) -> None:
    """§1.4: one result per item; a 200 that leaves one out (review 32b finding 2) settles each
    answered item by its own answer (taken, refused by a rule, unknown article), and only the
    item Ozon gave no answer for is unknown, in words that say so; a later item never takes
    the answer of the one before it."""
    ozon.set_category_bounds("SKU-R", Decimal(1000), Decimal(2000))
    ozon.faults.unanswered = {"SKU-D"}
    answers = deliver(
        target(ozon),
        price("SKU-A", 1, "100.00"),
        price("SKU-D", 1, "100.00"),
        price("SKU-R", 1, "100.00"),
        price("NOSUCH-1", 1, "100.00"),
        price("SKU-B", 1, "100.00"),
    )
    assert [a.verdict for a in answers] == [
        Verdict.DELIVERED,
        Verdict.UNKNOWN,
        Verdict.TERMINAL,
        Verdict.TERMINAL,
        Verdict.DELIVERED,
    ], [a.detail for a in answers]
    assert "Ozon gave no answer for offer_id 'SKU-D'" in answers[1].detail
    assert (
        answers[2].reason == Reason.CHANNEL_RULE and "invalid_category_price" in answers[2].detail
    )
    assert answers[3].reason == Reason.UNKNOWN_SKU
    assert imports(ozon) == 1, "never sent blind again"


@pytest.mark.parametrize("boundary", ["refused", "taken"])
def test_an_old_price_gap_at_its_threshold_is_ozons_to_decide(
    ozon: OzonSimulator, boundary: str
) -> None:
    ozon.switches.gap_boundary = boundary  # type: ignore[assignment]
    (answer,) = deliver(
        target(ozon, known=_known("SKU-1", "old", "120.00")), price("SKU-1", 1, "100.00")
    )
    if boundary == "refused":
        assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.CHANNEL_RULE)
        assert "discount_for_low_price_is_too_small" in answer.detail
    else:
        assert answer.verdict is Verdict.DELIVERED


def test_a_price_rule_ozon_states_is_checked_before_sending(ozon: OzonSimulator) -> None:
    (answer,) = deliver(
        target(ozon, known=_known("SKU-1", "old", "105.00")), price("SKU-1", 1, "100.00")
    )
    assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.INVALID_FOR_CHANNEL)
    assert "gap" in answer.detail and "discount_for_low_price_is_too_small" in answer.detail
    assert imports(ozon) == 0, "never sent"


def test_kopecks_beyond_two_decimals_are_never_rounded_silently(ozon: OzonSimulator) -> None:
    (refused,) = deliver(target(ozon), price("SKU-1", 1, "99.995"))
    assert refused.reason == Reason.INVALID_FOR_CHANNEL and imports(ozon) == 0
    (rounded,) = deliver(target(ozon, rounding="half-up"), price("SKU-1", 1, "99.995"))
    assert rounded.verdict is Verdict.DELIVERED and ozon.price("SKU-1") == Decimal("100.00")


def test_an_exact_price_written_with_trailing_zeros_goes_at_two_decimals(
    ozon: OzonSimulator,
) -> None:
    """Research §1.1: money as strings, at most two decimals. 1C's "500.5000" (staging keeps 4
    decimals) is exactly 500.50: sent as "500.50" in one request, never refused for its
    notation (review ozon: 400 code 3, the request halved four times, quarantined http-400);
    "500.555" is still ``invalid-for-channel`` without ``rounding``."""
    (answer,) = deliver(target(ozon), price("SKU-1", 1, "500.5000"))
    assert answer.verdict is Verdict.DELIVERED, answer
    assert ozon.price("SKU-1") == Decimal("500.50") and imports(ozon) == 1
    (refused,) = deliver(target(ozon), price("SKU-2", 1, "500.555"))
    assert refused.reason == Reason.INVALID_FOR_CHANNEL and imports(ozon) == 1


def test_sku_source_article_sends_the_article_as_offer_id(ozon: OzonSimulator) -> None:
    made = target(ozon, sku_source="article", articles=MemoryArticles({"1c-guid": "ART-7"}))
    (answer,) = deliver(made, price("1c-guid", 1, "250.00"))
    assert answer.verdict is Verdict.DELIVERED and ozon.price("ART-7") == Decimal("250")
    assert ozon.product("1c-guid") is None or ozon.history("1c-guid") == []


# -- the hourly limit ----------------------------------------------------------------------


def test_the_target_holds_the_eleventh_update_of_a_product_within_the_hour(
    ozon: OzonSimulator,
) -> None:
    made = target(ozon)

    async def scenario(t: OzonTarget) -> tuple[list[Classification], Classification]:
        sent = []
        for v in range(1, 11):
            sent += await t.send([price("SKU-1", v, f"{100 + v}.00")])
            ozon.clock.advance(60)
        (held,) = await t.send([price("SKU-1", 11, "200.00")])
        return sent, held

    sent, held = run(made, scenario)
    assert {a.verdict for a in sent} == {Verdict.DELIVERED}
    assert held.verdict is Verdict.AWAITING and imports(ozon) == 10, "the 11th is not sent"
    assert "10 price updates of this product sent within the hour" in held.detail
    # the oldest of the ten went at 0 s, now is 600 s: it is an hour old 3,000 s from now
    assert held.again_in == 3000
    assert (
        ozon.outcomes.get("error limiting: acquire limit per item: items limit: limit exceeded", 0)
        == 0
    )


@pytest.mark.parametrize("window", ["rolling", "fixed"])
@pytest.mark.parametrize("message", ["wrapped", "plain"])
def test_a_refused_product_is_tried_an_hour_later_and_the_latest_price_lands_within_61_minutes(
    ozon: OzonSimulator, window: str, message: str
) -> None:
    """Another sender (or this one before a restart) used the product's hour: Ozon refuses the
    item; it is held, not charged, never quarantined; a newer version supersedes it, and the
    latest price lands at most 61 minutes after the refusal."""
    ozon.switches.window = window  # type: ignore[assignment]
    ozon.switches.limit_message = message  # type: ignore[assignment]
    for n in range(10):  # the hour used up before this process
        ozon.import_prices(
            [SimItem("SKU-1", 0, {"price": Decimal(50 + n), "currency_code": "RUB"})]
        )
    refused_at = ozon.clock.now()

    async def scenario(t: OzonTarget) -> list[Classification]:
        (refused,) = await t.send([price("SKU-1", 1, "300.00")])
        ozon.clock.advance(600)
        (newer,) = await t.send([price("SKU-1", 2, "310.00")])  # superseding the waiting one
        assert imports(ozon) == 1, "held without a request"
        ozon.clock.advance(int(newer.again_in or 0))
        (landed,) = await t.send([price("SKU-1", 2, "310.00")])
        return [refused, newer, landed]

    refused, newer, landed = run(target(ozon), scenario)
    assert refused.verdict is Verdict.AWAITING and "Ozon refused" in refused.detail
    assert newer.verdict is Verdict.AWAITING and imports(ozon) == 2
    assert "Ozon refused an update" in newer.detail and "sent within" not in newer.detail
    assert landed.verdict is Verdict.DELIVERED and ozon.price("SKU-1") == Decimal("310")
    assert ozon.clock.now() - refused_at <= 61 * 60

    decided = decide(
        refused,
        attempt=4,
        now=datetime(2026, 12, 5, 12, tzinfo=UTC),
        policy=RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=60.0),
        rng=Random(1),
    )
    assert (decided.event, decided.charged, decided.reason) == (
        Event.AWAITING_OUTCOME,
        False,
        None,
    )
    assert decided.next_try_at == datetime(2026, 12, 5, 13, 0, 30, tzinfo=UTC)


# -- a price not sent again ----------------------------------------------------------------


@pytest.mark.parametrize("unchanged", ["counts", "free"])
def test_a_price_equal_to_the_one_delivered_there_is_not_sent_again(
    ozon: OzonSimulator, unchanged: str
) -> None:
    ozon.switches.unchanged = unchanged  # type: ignore[assignment]

    async def scenario(t: OzonTarget) -> list[Classification]:
        first = await t.send([price("SKU-1", 1, "100.00")])
        return first + await t.send([price("SKU-1", 2, "100.00")])

    answers = run(target(ozon), scenario)
    assert [a.verdict for a in answers] == [Verdict.DELIVERED, Verdict.DELIVERED]
    assert "not sent again" in answers[1].detail
    assert imports(ozon) == 1 and len(ozon.charged("SKU-1")) == 1

    # after a restart: the channel's delivered prices say so
    (again,) = deliver(
        target(ozon, delivered=_known("SKU-1", "retail", "100.00")), price("SKU-1", 3, "100.00")
    )
    assert again.verdict is Verdict.DELIVERED and imports(ozon) == 1


def test_a_price_this_worker_saw_taken_never_stands_over_a_newer_one_another_delivered(
    ozon: OzonSimulator,
) -> None:
    """Contract 14, several workers on one channel (review 32c): worker 1 delivers 100 (v1),
    worker 2 delivers 200 (v2), 1C goes back to 100 (v3) and worker 1 takes it. What Ozon holds
    is the newest delivered (v2: 200), not worker 1's memory of v1: v3 is sent."""
    delivered = MemoryKnownPrices()  # the channel's delivered prices, the workers' database

    async def scenario(one: OzonTarget) -> list[Classification]:
        two = target(ozon, delivered=delivered)
        try:
            answers = await one.send([price("SKU-1", 1, "100.00")])
            delivered.remember(KnownPrice("SKU-1", "retail", Decimal("100.00"), "RUB", 1))
            answers += await two.send([price("SKU-1", 2, "200.00")])
            delivered.remember(KnownPrice("SKU-1", "retail", Decimal("200.00"), "RUB", 2))
            return answers + await one.send([price("SKU-1", 3, "100.00")])
        finally:
            await two.aclose()

    answers = run(target(ozon, delivered=delivered), scenario)
    assert [a.verdict for a in answers] == [Verdict.DELIVERED] * 3
    assert "not sent again" not in answers[2].detail
    assert imports(ozon) == 3 and ozon.price("SKU-1") == Decimal("100")


def test_a_price_equal_to_the_last_delivered_is_sent_after_a_send_that_timed_out(
    ozon: OzonSimulator,
) -> None:
    """Contract 14: a price equal to the one Ozon is known to hold is not sent again. v3 timed
    out at the target and Ozon applied it anyway: what Ozon holds is no longer known, so v4,
    equal to v2, is sent (the old code took it as unchanged, and Ozon kept v3's 800)."""

    async def scenario(t: OzonTarget) -> list[Classification]:
        answers = await t.send([price("SKU-1", 1, "1000.00")])
        answers += await t.send([price("SKU-1", 2, "900.00")])
        ozon.faults.delay = 0.6  # a proxy that forwards at once and answers late
        answers += await t.send([price("SKU-1", 3, "800.00")])
        await asyncio.sleep(0.8)  # Ozon applied it meanwhile
        ozon.faults.delay = 0.0
        assert ozon.price("SKU-1") == Decimal("800")
        # Shown, 800 may be another sender's: v4 waits out the bound (review ozlost38 H4).
        ozon.clock.advance(LOST_HOLD + 1)
        return answers + await t.send([price("SKU-1", 4, "900.00")])

    answers = run(target(ozon, timeout=0.3), scenario)
    assert answers[2].verdict is not Verdict.DELIVERED
    assert answers[3].verdict is Verdict.DELIVERED and "not sent again" not in answers[3].detail
    assert imports(ozon) == 4 and ozon.price("SKU-1") == Decimal("900")


# -- the pace and the pauses ---------------------------------------------------------------


def test_429_code_8_is_the_pace(ozon: OzonSimulator) -> None:
    ozon.limits.rps = 1

    async def scenario(t: OzonTarget) -> list[Classification]:
        first = await t.send([price("SKU-1", 1)])
        return first + await t.send([price("SKU-2", 1)])

    first, limited = run(target(ozon), scenario)
    assert first.verdict is Verdict.DELIVERED
    assert (limited.verdict, limited.http_status, limited.retry_after) == (
        Verdict.TEMPORARY,
        429,
        "1",
    )


@pytest.mark.parametrize("status", ["503", "429", "200"])
def test_circle_is_open_holds_the_method_minutes_not_charged_whatever_its_status(
    ozon: OzonSimulator, status: str
) -> None:
    """Research §1.3: "Circle is open": the method "starts working as usual in a few
    minutes" (status UNCONFIRMED, §8: both ways). The refused item and every item after it wait
    minutes without a request, not charged; the status is said as Ozon gave it, never as a 429
    it was not; after the wait one request tries again, and lands."""
    ozon.switches.circle_status = status  # type: ignore[assignment]
    ozon.open_circle()

    async def scenario(t: OzonTarget) -> list[Classification]:
        (refused,) = await t.send([price("SKU-1", 1)])
        ozon.clock.advance(5)
        (held,) = await t.send([price("SKU-2", 1)])
        assert imports(ozon) == 1, "held without a request while the circle is open"
        ozon.clock.advance(int(held.again_in or 0))
        return [refused, held, *await t.send([price("SKU-2", 1)])]

    refused, held, landed = run(target(ozon), scenario)
    assert refused.verdict is Verdict.AWAITING and f"HTTP {status}" in refused.detail
    assert "Circle is open" in refused.detail and refused.http_status is None
    assert (refused.again_in or 0) >= 120, "a few minutes (§1.3)"
    assert held.verdict is Verdict.AWAITING and held.again_in == (refused.again_in or 0) - 5
    assert landed.verdict is Verdict.DELIVERED and imports(ozon) == 2
    decided = decide(
        refused,
        attempt=3,
        now=datetime(2026, 12, 5, 12, tzinfo=UTC),
        policy=RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=5.0),
        rng=Random(1),
    )
    assert not decided.charged and decided.delay_s == refused.again_in, decided


def test_a_refused_key_is_asked_about_once_per_probe_interval_or_at_once_when_replaced(
    ozon: OzonSimulator,
) -> None:
    """Research §1.3: Ozon may restrict a sender of erroneous requests. While the key is
    refused, health (a paused worker's probe every cycle) asks ``/v1/roles`` once per
    ``probe_every`` seconds; a key replaced in its file is asked about at once."""
    keys = ["a-wrong-key"]
    made = OzonTarget(
        ozon.url, CLIENT, lambda: keys[0], price_types=TYPES, clock=ozon.clock.now, probe_every=60
    )

    async def scenario(t: OzonTarget) -> list[tuple[Verdict, int]]:
        seen = []
        for step in (0, 10, 40, 9, 1, 0):  # seconds since the last look: 0, 10, 50, 59, 60, 60
            ozon.clock.advance(step)
            t.reload_credentials()
            seen.append(((await t.health()).verdict, ozon.requests[ROLES]))
        keys[0] = KEY
        t.reload_credentials()
        seen.append(((await t.health()).verdict, ozon.requests[ROLES]))
        return seen

    seen = run(made, scenario)
    pause = Verdict.PAUSE
    assert seen == [
        (pause, 1),
        (pause, 1),
        (pause, 1),
        (pause, 1),
        (pause, 2),
        (pause, 2),
        (Verdict.DELIVERED, 3),
    ]


def test_a_404_with_code_5_pauses_delivery_with_the_cause_in_words(ozon: OzonSimulator) -> None:
    made = OzonTarget(ozon.url, CLIENT, lambda: "a-wrong-key", price_types=TYPES)
    (answer,) = deliver(made, price("SKU-1", 1))
    assert (answer.verdict, answer.http_status) == (Verdict.PAUSE, 404)
    assert "ozon_api_key_file" in answer.detail and "a-wrong-key" not in answer.detail
    assert pause_cause("ozon", answer, write_refused=False) is PauseCause.OZON_KEY


@pytest.mark.parametrize("status", ["403", "401"])
def test_a_key_without_the_prices_role_pauses_delivery(ozon: OzonSimulator, status: str) -> None:
    ozon.switches.missing_role_status = status  # type: ignore[assignment]
    ozon.faults.roles = "read"
    (answer,) = deliver(target(ozon), price("SKU-1", 1))
    assert answer.verdict is Verdict.PAUSE and "role" in answer.detail
    assert pause_cause("ozon", answer, write_refused=False) is PauseCause.OZON_KEY


@pytest.mark.parametrize(
    ("fault", "cause", "ru", "en"),
    [
        ("offer-not-signed", PauseCause.OZON_OFFER, "оферт", "accepts the new offer"),
        ("ip-restricted", PauseCause.OZON_KEY_IP, "IP-адрес", "public IP address"),
    ],
)
def test_an_offer_not_signed_and_a_key_bound_to_other_ips_pause_with_their_own_advice(
    ozon: OzonSimulator, fault: str, cause: PauseCause, ru: str, en: str
) -> None:
    """Research §1.2: "Offer not signed" (the seller's offer with Ozon is outdated) and "Api-Key
    is restricted to specific IP addresses" are mended in the seller's account, never by a new
    key (review ozon, item 4: both said to create one); the paused worker's probe asks once per
    ``probe_every``, as for a refused key."""
    ozon.faults.key = fault
    made = target(ozon, probe_every=60)

    async def scenario(t: OzonTarget) -> tuple[Classification, list[Classification]]:
        (answer,) = await t.send([price("SKU-1", 1)])
        return answer, [await t.health(), await t.health()]

    answer, probes = run(made, scenario)
    assert answer.verdict is Verdict.PAUSE and ozon.requests[ROLES] == 1
    assert {p.verdict for p in probes} == {Verdict.PAUSE}
    assert pause_cause("ozon", answer, write_refused=False) is cause
    said = {lang: pause_words(cause.value, answer.detail, lang) for lang in ("ru", "en")}
    assert ru in said["ru"] and en in said["en"], said
    for lang in ("ru", "en"):
        assert "создаёт ключ" not in said[lang] and "creates a key" not in said[lang]


def test_a_client_id_ozon_cannot_read_pauses_delivery_in_one_request_never_split(
    ozon: OzonSimulator,
) -> None:
    """Research §1.2: a Client-Id Ozon cannot read (above a 64-bit number) gets a 400 code 3
    on every request; §1.3: erroneous requests may get the account restricted. 64 prices: one
    request, every price waits in a pause that names ozon_client_id (review 32c: 127 refused
    requests and every price quarantined), and the paused worker's probe asks once per
    ``probe_every``."""
    made = OzonTarget(
        ozon.url, "9" * 20, lambda: KEY, price_types=TYPES, clock=ozon.clock.now, probe_every=60
    )

    async def scenario(t: OzonTarget) -> tuple[list[Classification], list[Classification]]:
        answers = await t.send([price(f"SKU-{n}", 1) for n in range(64)])
        probes = [await t.health()]
        ozon.clock.advance(30)
        probes.append(await t.health())
        return answers, probes

    answers, probes = run(made, scenario)
    assert imports(ozon) == 1 and ozon.requests[ROLES] == 1
    assert {(a.verdict, a.http_status) for a in answers + probes} == {(Verdict.PAUSE, 400)}
    cause = pause_cause("ozon", answers[0], write_refused=False)
    assert cause is PauseCause.OZON_CLIENT_ID
    assert "ozon_client_id" in answers[0].detail and KEY not in answers[0].detail
    for lang in ("ru", "en"):
        assert "ozon_client_id" in pause_words(cause.value, answers[0].detail, lang)


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ("Client-Id header value should be positive integer", PauseCause.OZON_CLIENT_ID),
        ("Invalid Api-Key, please check the key and try again", PauseCause.OZON_KEY),
        (
            "Api-key is deactivated, use another one or generate a new one",
            PauseCause.OZON_KEY,
        ),
    ],
)
def test_a_400_in_words_of_the_client_id_or_the_key_pauses_delivery_never_split(
    message: str, cause: PauseCause
) -> None:
    """§1.2: Ozon's words of the Client-Id or of the key, whatever the status (a 400 too): a
    pause naming what to mend, from one request."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(400, json={"code": 3, "message": message, "details": []})

    made = OzonTarget(
        "http://ozon.test",
        CLIENT,
        lambda: KEY,
        price_types=TYPES,
        transport=httpx.MockTransport(answer),
        requests_per_second=None,
    )
    answers = run(made, lambda t: t.send([price(f"SKU-{n}", 1) for n in range(64)]))
    assert seen == [IMPORT_PRICES]
    assert {a.verdict for a in answers} == {Verdict.PAUSE}
    assert pause_cause("ozon", answers[0], write_refused=False) is cause


def test_a_400_refusing_a_request_whole_is_split_within_a_bound(ozon: OzonSimulator) -> None:
    """A 400 of no words the target reads (here: the account's currency, §1.1) is halved to
    find the items it refuses, the others sent, within SPLITS more requests: never 2n-1
    refused requests in a burst (§1.3: erroneous requests may get the account restricted)."""
    ozon.switches.currency = "request"
    made = target(ozon, currency="RUB")
    ozon.currency = "BYN"
    answers = run(made, lambda t: t.send([price(f"SKU-{n}", 1) for n in range(64)]))
    assert 1 < imports(ozon) <= 1 + SPLITS
    assert {(a.verdict, a.http_status) for a in answers} == {(Verdict.TERMINAL, 400)}


def test_any_other_404_is_an_unknown_response(ozon: OzonSimulator) -> None:
    made = OzonTarget(ozon.url + "/wrong", CLIENT, lambda: KEY, price_types=TYPES)
    (answer,) = deliver(made, price("SKU-1", 1))
    assert (answer.verdict, answer.http_status) == (Verdict.UNKNOWN, 404)
    decided = decide(
        answer,
        attempt=1,
        now=datetime(2026, 12, 5, tzinfo=UTC),
        policy=RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=60.0),
        rng=Random(1),
    )
    assert decided.reason == Reason.UNKNOWN_RESPONSE


def test_the_key_is_read_again_and_never_shown(ozon: OzonSimulator) -> None:
    keys = ["a-wrong-key"]
    made = OzonTarget(ozon.url, CLIENT, lambda: keys[0], price_types=TYPES)

    async def scenario(t: OzonTarget) -> tuple[Classification, Classification]:
        refused = await t.health()
        keys[0] = KEY
        t.reload_credentials()
        return refused, await t.health()

    refused, accepted = run(made, scenario)
    assert (refused.verdict, accepted.verdict) == (Verdict.PAUSE, Verdict.DELIVERED)
    assert "a-wrong-key" not in refused.detail


def test_read_prices_shows_what_ozon_holds_after_its_own_promotion(ozon: OzonSimulator) -> None:
    message = price("SKU-1", 1, "500.00")
    deliver(target(ozon), message)
    ozon.promote("SKU-1", Decimal("450"))

    held = run(target(ozon), lambda t: t.read_prices([message, price("NOSUCH-1", 1)]))

    assert (held[0].sent, held[0].held, held[0].agrees) == (
        Decimal("500.00"),
        Decimal("450"),
        False,
    )
    assert held[1].found is False


def _known(sku: str, price_type: str, amount: str) -> MemoryKnownPrices:
    known = MemoryKnownPrices()
    known.remember(KnownPrice(sku, price_type, Decimal(amount), "RUB", 1))
    return known


def test_an_ozon_channel_builds_the_ozon_target_with_its_settings(tmp_path: Path) -> None:
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key\n", encoding="utf-8")
    settings = load_settings(
        target="ozon",
        ozon_api_url="http://127.0.0.1:9",
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price", "old": "old_price"},
        sku_source="article",
        currency="BYN",
    )
    made = app.target(settings)
    assert isinstance(made, OzonTarget) and made.url == "http://127.0.0.1:9"
    assert (made.channel.currency, made.channel.sku_source) == ("BYN", "article")
    assert made.channel.price_types == {"retail": "price", "old": "old_price"}
    asyncio.run(made.aclose())
    with pytest.raises(ConfigurationError, match="ozon_client_id"):
        app.target(load_settings(target="ozon", ozon_api_key_file=str(key)))


# -- the other switches the target meets, both ways ------------------------------------------


@pytest.mark.parametrize("refused", ["free", "counts"])
def test_items_refused_by_a_rule_do_not_hold_the_next_price_switch_refused(
    ozon: OzonSimulator, refused: str
) -> None:
    """Whether a refused item counts toward Ozon's hour (UNCONFIRMED): the target counts only
    what Ozon took; if Ozon counted more, its own refusal holds the product an hour."""
    ozon.switches.refused = refused  # type: ignore[assignment]
    ozon.set_category_bounds("SKU-1", Decimal(1), Decimal(150))

    async def scenario(t: OzonTarget) -> list[Classification]:
        answers = []
        for v in range(1, 12):
            answers += await t.send([price("SKU-1", v, f"{200 + v}.00")])
            ozon.clock.advance(10)
        ozon.set_category_bounds("SKU-1", Decimal(1), Decimal(10_000))
        return answers + await t.send([price("SKU-1", 12, "120.00")])

    answers = run(target(ozon), scenario)
    assert {a.reason for a in answers[:10]} == {Reason.CHANNEL_RULE}
    eleventh, last = answers[10], answers[-1]
    if refused == "free":
        assert eleventh.reason == Reason.CHANNEL_RULE and last.verdict is Verdict.DELIVERED
    else:
        assert eleventh.verdict is Verdict.AWAITING and "Ozon refused" in eleventh.detail
        assert last.verdict is Verdict.AWAITING and imports(ozon) == 11, "held without a request"


@pytest.mark.parametrize("not_found", ["zero", "echo"])
def test_an_unknown_article_is_unknown_sku_whatever_its_product_id(
    ozon: OzonSimulator, not_found: str
) -> None:
    ozon.switches.not_found = not_found  # type: ignore[assignment]
    (answer,) = deliver(target(ozon), price("NOSUCH-9", 1))
    assert (answer.verdict, answer.reason) == (Verdict.TERMINAL, Reason.UNKNOWN_SKU)


@pytest.mark.parametrize("currency", ["item", "request"])
def test_a_channel_currency_other_than_the_accounts_is_never_taken_as_delivered(
    currency: str,
) -> None:
    """The channel's ``currency`` set to RUB for a BYN account: Ozon's refusal (its form
    UNCONFIRMED: an item error or a 400) is never read as delivered nor as a pace."""
    ozon = OzonSimulator(CLIENT, KEY, currency="BYN", time_scale=0)
    ozon.switches.currency = currency  # type: ignore[assignment]
    ozon.start()
    try:
        answers = deliver(target(ozon), price("SKU-1", 1), price("SKU-2", 1))
    finally:
        ozon.stop()
    expected = Verdict.UNKNOWN if currency == "item" else Verdict.TERMINAL
    assert [a.verdict for a in answers] == [expected, expected]


@pytest.mark.parametrize("readback", ["numbers", "strings"])
@pytest.mark.parametrize("storefront", ["at-once", "delayed"])
def test_read_prices_reads_ozons_money_either_way(
    ozon: OzonSimulator, readback: str, storefront: str
) -> None:
    ozon.switches.readback = readback  # type: ignore[assignment]
    ozon.switches.storefront = storefront  # type: ignore[assignment]
    message = price("SKU-1", 1, "499.90")
    deliver(target(ozon), message)
    ozon.clock.advance(ozon.limits.apply_delay)
    (held,) = run(target(ozon), lambda t: t.read_prices([message]))
    assert held.agrees and held.held == Decimal("499.90")


@pytest.mark.parametrize("headers", ["none", "observed"])
def test_the_rate_limits_retry_after_is_one_second_with_or_without_headers(
    ozon: OzonSimulator, headers: str
) -> None:
    ozon.switches.rate_headers = headers  # type: ignore[assignment]
    ozon.limits.rps = 1

    async def scenario(t: OzonTarget) -> list[Classification]:
        return await t.send([price("SKU-1", 1)]) + await t.send([price("SKU-2", 1)])

    _, limited = run(target(ozon), scenario)
    assert (limited.http_status, limited.retry_after) == (429, "1")


# -- an old price claimed while its price waits (issue 32) --------------------------------------


def test_an_old_price_beside_a_price_waiting_for_its_retry_waits_never_invalid_for_channel(
    ozon: OzonSimulator,
) -> None:
    """Issue 32 on Ozon: 1C lowered the price 1000 → 500 and set old_price 600; the price waits
    for its retry (a 503, or the hourly limit) while old_price is claimed alone. Beside the
    delivered price 1000 the old price breaks Ozon's rule (below the price), but the new price
    makes it right: the old price waits for it (uncharged, until it is due), nothing is sent:
    never 1000 without the discount 1C states before 500 lands. With no newer price waiting,
    600 is not above the price it stands beside, 1000: no discount (review rev40 A4,
    docs/marketplaces.md "Ending a discount"; before, ``invalid-for-channel``), it goes as
    old_price "0" and is delivered."""
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    known = _known("SKU-1", "retail", "1000.00")  # version 1, delivered
    old = price("SKU-1", 2, "600.00", price_type="old")
    newer = WaitingPrice("SKU-1", "retail", 2, now + timedelta(seconds=20))

    (waits,) = deliver(target(ozon, known=known, waiting=MemoryWaitingPrices(newer)), old)
    assert (waits.verdict, waits.reason) == (Verdict.AWAITING, None), waits
    assert 0 < (waits.again_in or 0) <= 60.0 and "price" in waits.detail
    decision = decide(waits, attempt=1, now=now, policy=RetryPolicy(3, 1.0, 60.0), rng=Random(1))
    assert decision.charged is False
    assert imports(ozon) == 0, "never sent"

    same = WaitingPrice("SKU-1", "retail", 1, now)  # the known version itself: nothing newer
    for pending in (MemoryWaitingPrices(), MemoryWaitingPrices(same)):
        (ended,) = deliver(target(ozon, known=known, waiting=pending), old)
        assert ended.verdict is Verdict.DELIVERED, ended
        said = "old_price 600.00 was not above price 1000.00: it went as no discount"
        assert ended.detail.endswith(said), ended.detail
    pairs = {(u.get("price"), u.get("old_price")) for u in ozon.updates("SKU-1")}
    assert pairs == {(1000, 0)}, "1000 without an old price, only once nothing newer waits"


@pytest.mark.parametrize(
    ("sent", "answered", "settled"),
    [
        (["A", "B", "C"], ["A", "B", "C"], ["A", "B", "C"]),
        (["A", "B"], ["B", "A"], ["A", "B"]),  # by offer_id, whatever the order
        (["A", "O", "B"], ["A", "", "B"], ["A", "", "B"]),  # an empty offer_id: its place
        (["A", "D", "B"], ["A", "B"], ["A", None, "B"]),  # one left out: that one alone
        (["A", "O", "D", "B"], ["A", "", "B"], ["A", None, None, "B"]),  # whose? never guessed
        (["O", "A", "D"], ["", "A"], ["", "A", None]),
        (["A", "B"], [""], [None, None]),
    ],
)
def test_each_item_is_settled_by_its_own_result_or_by_none(
    sent: list[str], answered: list[str], settled: list[str | None]
) -> None:
    """§1.4: one result per item, naming its offer_id; a result without an offer_id is an
    item's only where its place is sure (review 32b finding 2)."""
    from types import SimpleNamespace

    from exchange.targets.ozon.answers import matched

    items = [SimpleNamespace(offer_id=offer) for offer in sent]
    results = [{"offer_id": offer, "n": n} for n, offer in enumerate(answered)]
    found = matched(items, results)
    assert [None if r is None else r["offer_id"] for r in found] == settled


# -- a product Ozon holds no price of yet (review words34 item 2) -------------------------------


@pytest.mark.parametrize("readback", ["numbers", "strings"])
def test_a_product_ozon_never_priced_reads_no_price_yet_never_price_0(
    ozon: OzonSimulator,
    readback: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A product in the seller's catalogue never priced reads price "0" in
    ``/v5/product/info/prices`` (§1.4's read-back; the simulator's too). Ozon holds no price 0
    the service gave it (the channel refuses a zero price: ``Money``; old_price "0" is none,
    §1.1), so the 0 is "no price yet": ``verify`` says «цены ещё нет», never «0». A cleared old
    price (1C's 0, sent as "0") still agrees with Ozon's "0"."""
    from exchange.cli.verifying import _print
    from exchange.ops.verify import Verification

    ozon.switches.readback = readback  # type: ignore[assignment]
    ozon.add("SKU-9")  # in the catalogue, never priced
    cleared = [price("SKU-1", 1, "500.00"), price("SKU-1", 1, "0", "old")]
    sent = deliver(target(ozon), *cleared)
    assert [a.verdict for a in sent] == [Verdict.DELIVERED] * 2, sent
    never = price("SKU-9", 1, "700.00")

    held = run(target(ozon), lambda t: t.read_prices([never, *cleared]))

    assert (held[0].found, held[0].held, held[0].agrees) == (True, None, False)
    assert held[1].agrees and held[2].agrees, held
    monkeypatch.setenv("EXCHANGE_LANG", "ru")
    _print(Verification("ozon", held, []), False, marketplace=True)
    row = next(line for line in capsys.readouterr().out.splitlines() if "SKU-9" in line)
    assert "цены ещё нет" in row and " 0 " not in f"{row} ", row


@pytest.mark.parametrize("message", ["wrapped", "plain"])
def test_ozons_limit_refusal_says_its_hourly_limit_never_a_number_it_did_not_say(
    ozon: OzonSimulator, message: str
) -> None:
    """Review ozon 34b: Ozon refused the 3rd update of a product (its limit was 2 there) and
    the words said "more than 10 price updates"; and the refusal read "waits: Ozon refused
    it…" where the product held after it read "held: …". Whichever message Ozon wraps it in,
    both say "held: Ozon refused an update of this product for its hourly limit", in English
    and in Russian, with no number Ozon did not give."""
    ozon.limits.item_limit = 2
    ozon.switches.limit_message = message  # type: ignore[assignment]

    async def scenario(t: OzonTarget) -> list[Classification]:
        said = []
        for v in range(1, 5):
            said += await t.send([price("SKU-1", v, f"{100 + v}.00")])
            ozon.clock.advance(60)
        return said

    first, second, refused, newer = run(target(ozon), scenario)
    assert {first.verdict, second.verdict} == {Verdict.DELIVERED}
    for held in (refused, newer):
        assert held.verdict is Verdict.AWAITING
        assert held.detail.startswith(
            "held: Ozon refused an update of this product for its hourly limit"
        ), held.detail
        assert "10" not in held.detail, held.detail
        ru = error_words(held.detail, "ru")
        assert ru.startswith("ждёт: Ozon отказал в обновлении этого товара"), ru
        assert "10" not in ru and "held" not in ru, ru
    assert "acquire limit per item" in refused.detail  # Ozon's own words, quoted


def test_a_first_send_reads_ozons_prices_once_for_the_batch_and_skips_what_ozon_shows(
    ozon: OzonSimulator,
) -> None:
    """Review ozonleft35 item 1: the channel has no delivered price of these SKUs yet (a
    channel added, or dropped and added again, and seeded). Ozon's prices are read first, and
    what Ozon shows at exactly 1C's prices is delivered without an import (research §1.3: each
    import is one of the product's 10 updates an hour). A batch of five SKUs in requests of two,
    sent together as the worker sends them, reads once (§1.4: up to 1,000 offer_ids a read),
    not once a request: each read is one of Ozon's requests a second."""
    for n in (0, 1):
        ozon.set_price(f"SKU-{n}", Decimal(f"{100 + n}.50"))
    ozon.set_price("SKU-2", Decimal("555"))  # another price than 1C's: it goes
    messages = [price(f"SKU-{n}", 1, f"{100 + n}.50") for n in range(5)]
    made = target(ozon, delivered=MemoryKnownPrices(), max_items=2)

    async def scenario(t: OzonTarget) -> list[Classification]:
        answered = await asyncio.gather(*(t.send(r) for r in t.requests(messages)))
        return [a for answers in answered for a in answers]

    answers = run(made, scenario)
    assert [a.verdict for a in answers] == [Verdict.DELIVERED] * 5
    assert all("first send of it" in a.detail for a in answers[:2]), answers[:2]
    assert not any("already" in a.detail for a in answers[2:]), answers[2:]
    assert ozon.requests[INFO_PRICES] == 1, "one read for the batch"
    assert imports(ozon) == 2 and ozon.charged("SKU-0") == ozon.charged("SKU-1") == []
    assert [ozon.price(f"SKU-{n}") for n in range(5)] == [
        Decimal(f"{100 + n}.50") for n in range(5)
    ]


def test_a_first_send_goes_when_ozons_prices_cannot_be_read(ozon: OzonSimulator) -> None:
    """A send of 1C's price is never wrong: the read before the first send refused (Ozon's
    5xx), the price goes as before."""
    ozon.set_price("SKU-1", Decimal("100.00"))
    ozon.faults.internal_errors = 1  # the read's
    answers = deliver(target(ozon, delivered=MemoryKnownPrices()), price("SKU-1", 1, "100.00"))
    assert answers[0].verdict is Verdict.DELIVERED and "already" not in answers[0].detail
    assert imports(ozon) == 1


def _import_arrivals(ozon: OzonSimulator) -> list[float]:
    """The real moments the simulator takes up an import request (``gate``: before its
    answer), recorded from now on."""
    arrived: list[float] = []
    gate = ozon.gate

    def recorded(path: str, headers: object) -> object:
        if path == IMPORT_PRICES:
            arrived.append(time.monotonic())
        return gate(path, headers)  # type: ignore[arg-type]

    ozon.gate = recorded  # type: ignore[assignment,method-assign]
    return arrived


def test_after_circle_is_open_one_request_goes_first_and_the_rest_once_it_is_answered(
    ozon: OzonSimulator,
) -> None:
    """Review ozonleft35 item 2: research §1.3, "Circle is open" blocks the method "for a few
    minutes", and the docs say one request probes first after the wait. Every item held for it
    is due at the wait's end, so a batch's requests (sent together, as the worker sends them)
    all left at once: two requests 0.17 s apart into a method that may still be blocked. Now
    one goes first; the others leave only once it is answered (Ozon answers it 0.5 s later)."""
    ozon.open_circle()

    async def scenario(t: OzonTarget) -> list[Classification]:
        (refused,) = await t.send([price("SKU-1", 1)])
        assert refused.verdict is Verdict.AWAITING and imports(ozon) == 1
        ozon.clock.advance(int(refused.again_in or 0))  # the wait is over
        ozon.faults.slow_after = 0.5  # the first request's answer takes half a second
        messages = [price(f"SKU-{n}", 1) for n in range(1, 4)]
        answered = await asyncio.gather(*(t.send(r) for r in t.requests(messages)))
        return [a for answers in answered for a in answers]

    made = target(ozon, max_items=1)
    arrived = _import_arrivals(ozon)
    answers = run(made, scenario)
    after = arrived[1:]  # the first met the circle
    assert len(after) == 3 and [a.verdict for a in answers] == [Verdict.DELIVERED] * 3
    assert [t - after[0] < 0.45 for t in after] == [True, False, False], after


def test_a_first_send_ozon_shows_still_waits_for_a_lost_send_that_may_land_over_it(
    ozon: OzonSimulator,
) -> None:
    """A first send delivered by a read only where nothing may land after the read: Ozon
    shows 900, the send of 1100 lost its answer (a gateway's 504; Ozon applies it later,
    research §1.5: no order between two racing updates), and 1C's 900 comes. Delivered at
    once because Ozon shows 900, the late 1100 would land over it while 900 reads delivered:
    it waits for the lost send instead (``_late``)."""
    from exchange.targets.marketplace.late import LOST_SEND

    ozon.set_price("SKU-1", Decimal("900"))

    async def scenario(t: OzonTarget) -> list[Classification]:
        ozon.faults.late_status, ozon.faults.late_after = 504, 30.0
        answers = await t.send([price("SKU-1", 1, "1100.00")])
        ozon.faults.late_status = None
        return answers + await t.send([price("SKU-1", 2, "900.00")])

    lost, second = run(target(ozon, delivered=MemoryKnownPrices()), scenario)
    assert lost.verdict is not Verdict.DELIVERED and ozon.price("SKU-1") == Decimal("900")
    assert second.verdict is Verdict.AWAITING and second.error_class == LOST_SEND, second
    assert imports(ozon) == 1


def test_verify_never_says_no_price_yet_of_an_old_price_the_service_cleared(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review ozwords38 item 5: Ozon shows 950 with no old price because the service cleared
    the delivered 1400 (1C's 990 beside it quarantined, old_price "0"); ``verify`` said "no
    price yet" of a product that has a price. Of an old price it says none, and that the
    service cleared it, 1C's newer one being quarantined; of the price itself, a product
    never priced, "no price yet" as before."""
    from exchange.cli.common import out
    from exchange.cli.verifying import _print
    from exchange.ops.verify import Newer, Verification
    from exchange.targets.base import HeldPrice

    monkeypatch.setattr(out, "width", 400)  # each cell on one line

    held = [
        HeldPrice("m-old", "SKU-1", "old_price", Decimal(1400), None, True),
        HeldPrice("m-9", "SKU-9", "price", Decimal(700), None, True),
    ]
    newer = {"m-old": Newer("m-old-2", 2, "quarantined", False, "990.00")}
    for lang, cleared, never in (
        ("en", "none (cleared by the service)", "no price yet"),
        ("ru", "нет (убрана сервисом)", "цены ещё нет"),
    ):
        monkeypatch.setenv("EXCHANGE_LANG", lang)
        _print(Verification("ozon", held, [], newer=newer), False, marketplace=True)
        lines = capsys.readouterr().out.splitlines()
        old = next(line for line in lines if "SKU-1" in line)
        assert cleared in old and never not in old, old
        assert never in next(line for line in lines if "SKU-9" in line), lines
