"""The Yandex Market simulator behaves as the research says Yandex Market's Partner API does
(../shared/research/marketplaces.md section 3; its simulator list, section 7; its open points,
section 8): every behaviour of docs/simulators/yandex-market.md has a test here naming it, over
real HTTP (httpx against the loopback server), and every UNCONFIRMED switch is played both ways.
Written from the research, never from the service's target."""

from __future__ import annotations

import email.utils
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from foreground import channels, settings, start, stop
from simtables import table_problems

from exchange.dev.simclock import SimClock
from exchange.dev.ymsim import (
    Price,
    YmSimulator,
    YmSwitches,
    quarantine_verdicts,
    set_switch,
)

KEY = "ym-key-1"
BUSINESS = 1001
BASE = f"/v2/businesses/{BUSINESS}"
UPDATES = f"{BASE}/offer-prices/updates"
PRICES = f"{BASE}/offer-prices"
QUARANTINE = f"{BASE}/price-quarantine"
CONFIRM = f"{BASE}/price-quarantine/confirm"


def still() -> SimClock:
    """A clock that stands still (at a fixed moment) until the test advances it."""
    return SimClock(0, start=1_790_000_000.0)


@pytest.fixture
def ym(request: pytest.FixtureRequest) -> Iterator[YmSimulator]:
    """A simulator on a manual clock, no apply delay unless a test sets one; ``request.param``:
    keyword arguments of YmSimulator, and ``switches`` as a dict of YmSwitches fields."""
    options = dict(getattr(request, "param", {}))
    switches = YmSwitches(**{"apply_delay": 0, **options.pop("switches", {})})
    options.setdefault("clock", still())
    simulator = YmSimulator(KEY, BUSINESS, switches=switches, **options)
    simulator.start()
    yield simulator
    simulator.stop()


def post(
    ym: YmSimulator, path: str, body: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    sent = {"Api-Key": KEY} if headers is None else headers
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        ym.url + path,
        content=content,
        headers={**sent, "Content-Type": "application/json"},
        timeout=10,
    )


def offer(offer_id: str, value: Any = 100, **price: Any) -> dict[str, Any]:
    return {"offerId": offer_id, "price": {"value": value, "currencyId": "RUR", **price}}


def update(ym: YmSimulator, *offers: dict[str, Any]) -> httpx.Response:
    return post(ym, UPDATES, {"offers": list(offers)})


def body(response: httpx.Response) -> Any:
    return json.loads(response.content, parse_float=Decimal)


def messages(response: httpx.Response) -> list[str]:
    return [e["message"] for e in body(response)["errors"]]


def read(ym: YmSimulator, *offer_ids: str) -> dict[str, Any]:
    """The read-back: offerId -> its ``price`` object (absent: the offer has none shown)."""
    response = post(ym, PRICES, {"offerIds": list(offer_ids)})
    assert 200 == response.status_code, response.text
    return {o["offerId"]: o.get("price") for o in body(response)["result"]["offers"]}


def later(ym: YmSimulator, seconds: float = 61) -> None:
    assert 0 == ym.clock.scale  # a still clock
    ym.clock.advance(seconds)


# -- the update method (research §3.1, §3.4) -----------------------------------------------------


@pytest.mark.parametrize("ym", [{"switches": {"apply_delay": 60}}], indirect=True)
def test_an_update_answers_200_ok_which_only_means_accepted(ym: YmSimulator) -> None:
    """§3.4, §7.1: 200 {"status":"OK"} = "Маркет принял"; the price is applied later ("до
    нескольких минут"): the read-back shows nothing new until then, then the price with
    ``updatedAt``."""
    response = update(ym, offer("A", 1074))
    assert (200, {"status": "OK"}) == (response.status_code, body(response))
    assert {"A": None} == read(ym, "A")
    later(ym, 60)
    shown = read(ym, "A")["A"]
    assert (Decimal(1074), "RUR") == (shown["value"], shown["currencyId"])
    assert "updatedAt" in shown


@pytest.mark.parametrize("ym", [{"switches": {"apply_delay": 0}}], indirect=True)
def test_switch_apply_delay_zero_shows_the_price_at_once(ym: YmSimulator) -> None:
    """§3.4 (the delay's length is not given): played the other way, no delay."""
    assert 200 == update(ym, offer("A", 1074)).status_code
    assert Decimal(1074) == read(ym, "A")["A"]["value"]


@pytest.mark.parametrize("order", ["accepted", "newest-first"])
def test_switch_apply_order(order: str) -> None:
    """§3.5 "Races: no ordering guarantee documented": an offer's two updates due together are
    applied in the order accepted (the later one shows) or newest first (the earlier one shows
    in the end, after the later one went live)."""
    switches = YmSwitches(apply_order=order, apply_delay=60)
    ym = YmSimulator(KEY, BUSINESS, clock=still(), switches=switches)
    with ym:
        assert 200 == update(ym, offer("A", 120)).status_code
        assert 200 == update(ym, offer("A", 100)).status_code
        later(ym, 61)
        shown = read(ym, "A")["A"]["value"]
        went_live = ym.history("A")
    if order == "accepted":
        assert (Decimal(100), [Decimal(120), Decimal(100)]) == (shown, went_live)
    else:
        assert (Decimal(120), [Decimal(100), Decimal(120)]) == (shown, went_live)


def test_up_to_500_offers_a_request_and_no_more(ym: YmSimulator) -> None:
    """§3.1 UpdateBusinessPricesRequest: 1..500 offers; 501 or none is a 400, nothing applied."""
    assert 200 == update(ym, *[offer(f"S{i}") for i in range(500)]).status_code
    too_many = update(ym, *[offer(f"T{i}") for i in range(501)])
    assert 400 == too_many.status_code and "BAD_REQUEST" == body(too_many)["errors"][0]["code"]
    assert 400 == update(ym).status_code
    assert ym.live("T0") is None


def test_offer_id_is_trimmed_as_yandex_trims_it(ym: YmSimulator) -> None:
    """§3.1 ShopSku, §3.6.7: leading and trailing whitespace trimmed, " SKU123 " ≡ "SKU123"."""
    assert 200 == update(ym, offer("  SKU123 ", 500)).status_code
    assert Decimal(500) == read(ym, "SKU123")["SKU123"]["value"]
    assert Decimal(500) == read(ym, " SKU123")["SKU123"]["value"]


def test_two_offer_ids_equal_after_trimming_are_a_duplicate_400(ym: YmSimulator) -> None:
    """§3.4 (YM-ERR #prices), §3.6.7: "A " and "A" collide: Duplicate offer in request."""
    response = update(ym, offer("A", 100), offer("A ", 200))
    assert 400 == response.status_code
    assert ["Duplicate offer in request: offerId = 'A'"] == messages(response)


def test_a_missing_offer_id_or_price_value_is_a_400(ym: YmSimulator) -> None:
    """§3.1 required offerId and value; §3.4 messages "Missing offerId", "Missing price value:
    offerId = '…'"."""
    response = update(ym, {"price": {"value": 1, "currencyId": "RUR"}}, {"offerId": "B"})
    assert 400 == response.status_code
    assert ["Missing offerId", "Missing price value: offerId = 'B'"] == messages(response)


def test_a_currency_other_than_the_cabinets_is_a_400(ym: YmSimulator) -> None:
    """§3.1: currencyId must be the cabinet's (RUR), else "Offer at index … should not have
    'currencyId' with '…' currency"."""
    response = update(ym, offer("A"), {"offerId": "B", "price": {"value": 1, "currencyId": "USD"}})
    assert 400 == response.status_code
    assert ["Offer at index '1' should not have 'currencyId' with 'USD' currency"] == messages(
        response
    )


def test_value_is_positive_with_at_most_seven_decimals(ym: YmSimulator) -> None:
    """§3.1 BasePriceDTO: value > 0; ≤ 7 decimal places ("…with too many digits")."""
    assert (
        200
        == post(
            ym,
            UPDATES,
            b'{"offers":[{"offerId":"A","price":{"value":1.1234567,"currencyId":"RUR"}}]}',
        ).status_code
    )
    assert Decimal("1.1234567") == read(ym, "A")["A"]["value"]
    digits = post(
        ym, UPDATES, b'{"offers":[{"offerId":"A","price":{"value":1.12345678,"currencyId":"RUR"}}]}'
    )
    assert ["Offer at index '0' should not have 'value' with too many digits"] == messages(digits)
    assert 400 == update(ym, offer("A", 0)).status_code
    assert 400 == update(ym, offer("A", "100")).status_code


def test_discount_base_is_an_integer_above_value_with_5_to_99_percent_off(
    ym: YmSimulator,
) -> None:
    """§3.1 DiscountBase: an integer, discount 5..99 %; §3.4 "discountBase is less than value"."""
    assert 200 == update(ym, offer("A", 900, discountBase=1000)).status_code
    less = update(ym, offer("A", 1100, discountBase=1000))
    assert ["discountBase is less than value: offerId = 'A'"] == messages(less)
    small = update(ym, offer("A", 990, discountBase=1000))  # 1 % off
    assert 400 == small.status_code and "between '5' and '99', actual '1'" in messages(small)[0]
    assert 400 == update(ym, offer("A", 900, discountBase=1000.5)).status_code


def test_minimum_for_bestseller_is_above_0_and_at_most_100_million(ym: YmSimulator) -> None:
    """§3.1 UpdateBusinessPricesDTO: 0 < minimumForBestseller ≤ 100 000 000."""
    assert 200 == update(ym, offer("A", 900, minimumForBestseller=850)).status_code
    assert 400 == update(ym, offer("A", 900, minimumForBestseller=0)).status_code
    assert 400 == update(ym, offer("A", 900, minimumForBestseller=100_000_001)).status_code


def test_a_body_over_512_kb_is_too_big(ym: YmSimulator) -> None:
    """§3.1 (YM-LIM functional): body ≤ 512 KB, else 400 "The request is too big"."""
    big = update(ym, offer("A"), offer("pad" * 200_000))
    assert (400, ["The request is too big"]) == (big.status_code, messages(big))


def test_an_update_without_discount_base_or_bestseller_minimum_clears_them(
    ym: YmSimulator,
) -> None:
    """§3.1, §3.6.2, §7.5: replace semantics; an omitted discountBase removes the discount, an
    omitted minimumForBestseller is deleted."""
    update(ym, offer("A", 900, discountBase=1000, minimumForBestseller=850))
    shown = read(ym, "A")["A"]
    assert (Decimal(1000), Decimal(850)) == (shown["discountBase"], shown["minimumForBestseller"])
    update(ym, offer("A", 910))
    shown = read(ym, "A")["A"]
    assert "discountBase" not in shown and "minimumForBestseller" not in shown


# -- the read-back (research §3.4) ---------------------------------------------------------------


def test_the_read_back_takes_at_most_200_offer_ids_and_leaves_out_unknown_offers(
    ym: YmSimulator,
) -> None:
    """§3.4 GetDefaultPricesRequest: ≤ 200 offerIds; an offer the catalogue lacks is not in the
    answer (contract 14 reads that as unknown-sku); one without a price has no ``price``."""
    ids = [f"S{i}" for i in range(201)]
    assert 400 == post(ym, PRICES, {"offerIds": ids}).status_code
    update(ym, offer("A", 5))
    assert {"A": read(ym, "A")["A"], "B": None} == read(ym, "A", "B", "NOSUCH-1")


# -- auth (research §3.2) ------------------------------------------------------------------------


def test_a_missing_or_wrong_api_key_is_401_with_the_documented_body(ym: YmSimulator) -> None:
    """§3.2, §7.7: the documented example body, status ERROR, code UNAUTHORIZED."""
    expected = {
        "errors": [{"code": "UNAUTHORIZED", "message": "Api-Key token is invalid"}],
        "status": "ERROR",
    }
    for headers in ({}, {"Api-Key": "wrong"}, {"Authorization": f"Bearer {KEY}"}):
        response = post(ym, UPDATES, {"offers": [offer("A")]}, headers)
        assert (401, expected) == (response.status_code, body(response))
    assert ym.live("A") is None


@pytest.mark.parametrize("ym", [{"oauth_token": "y0_oauth"}], indirect=True)
def test_the_legacy_oauth_header_is_taken_and_a_wrong_token_is_403(ym: YmSimulator) -> None:
    """§3.2: OAuth ``Authorization`` still works ("устаревший"); 403 "OAuth token is invalid"."""
    good = post(ym, UPDATES, {"offers": [offer("A")]}, {"Authorization": "Bearer y0_oauth"})
    assert 200 == good.status_code
    bad = post(ym, UPDATES, {"offers": [offer("A")]}, {"Authorization": "OAuth y0_other"})
    assert (403, ["OAuth token is invalid"]) == (bad.status_code, messages(bad))


@pytest.mark.parametrize("ym", [{"scope": "pricing:read-only"}], indirect=True)
def test_a_read_only_scope_reads_but_may_not_write(ym: YmSimulator) -> None:
    """§3.2, §7.7: read-only scopes serve read methods; updates (and confirm) answer 403 "Token
    does not have any of the scopes to access the API method"."""
    words = ["Token does not have any of the scopes to access the API method"]
    refused = update(ym, offer("A"))
    assert (403, words) == (refused.status_code, messages(refused))
    confirm = post(ym, CONFIRM, {"offerIds": ["A"]})
    assert (403, words) == (confirm.status_code, messages(confirm))
    assert 200 == post(ym, PRICES, {"offerIds": ["A"]}).status_code
    assert 200 == post(ym, QUARANTINE, {}).status_code


def test_another_business_is_403_and_a_mismatched_x_business_id_400(ym: YmSimulator) -> None:
    """§3.2: the key is bound to its cabinet; X-Business-Id mismatching the URL is refused."""
    other = post(ym, "/v2/businesses/999/offer-prices/updates", {"offers": [offer("A")]})
    assert 403 == other.status_code
    mismatch = post(ym, UPDATES, {"offers": [offer("A")]}, {"Api-Key": KEY, "X-Business-Id": "7"})
    assert 400 == mismatch.status_code


# -- limits (research §3.3) ----------------------------------------------------------------------


@pytest.mark.parametrize("ym", [{"offers_per_minute": 1000}], indirect=True)
def test_the_budget_counts_offers_and_refuses_with_420_until_the_window_ends(
    ym: YmSimulator,
) -> None:
    """§3.3, §7.2: the resource counts offers (the request's size), 420 "Enhance Your Calm"
    (never 429) with "Hit rate limit of …", X-RateLimit-Resource-Until an RFC 822 date, no
    Retry-After; usable again after that moment."""
    first = update(ym, *[offer(f"A{i}") for i in range(500)])
    second = update(ym, *[offer(f"B{i}") for i in range(500)])
    assert (200, 200) == (first.status_code, second.status_code)
    refused = update(ym, offer("C"))
    assert 420 == refused.status_code
    assert messages(refused)[0].startswith("Hit rate limit of '1000' requests per")
    assert "0" == refused.headers["X-RateLimit-Resource-Remaining"]
    assert "Retry-After" not in refused.headers
    until = email.utils.parsedate_to_datetime(refused.headers["X-RateLimit-Resource-Until"])
    assert 0 < until.timestamp() - ym.clock.now() <= 60
    assert ym.live("C") is None
    later(ym, until.timestamp() - ym.clock.now())
    assert 200 == update(ym, offer("C")).status_code


def test_every_answer_carries_the_rate_limit_headers(ym: YmSimulator) -> None:
    """§3.3: X-RateLimit-Resource-Limit, -Remaining, -Until on every response of a limited
    method (updates: 10 000 offers a minute)."""
    response = update(ym, offer("A"), offer("B"), offer("C"))
    assert "10000" == response.headers["X-RateLimit-Resource-Limit"]
    assert "9997" == response.headers["X-RateLimit-Resource-Remaining"]
    assert response.headers["X-RateLimit-Resource-Until"].endswith(" GMT")
    readback = post(ym, PRICES, {"offerIds": ["A", "B"]})
    assert "9998" == readback.headers["X-RateLimit-Resource-Remaining"]


def test_a_400_is_charged_like_a_200(ym: YmSimulator) -> None:
    """§3.3: client errors (4xx) also decrement the resource limit."""
    bad = update(ym, offer("A", 0), offer("B", 0))
    assert (400, "9998") == (bad.status_code, bad.headers["X-RateLimit-Resource-Remaining"])


@pytest.mark.parametrize("parallel", [4, 2])
def test_more_requests_at_once_than_the_parallel_cap_are_420(parallel: int) -> None:
    """§3.3, §7.2: at most N requests at once per business (4 now; 2 in the 2025 copy — a
    switch); one more is 420 "Hit rate limit of 'N' parallel requests …"."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(parallel=parallel, apply_delay=0))
    ym.faults.hold = 1.5
    with ym:
        answers: list[httpx.Response] = []
        gate = threading.Barrier(parallel + 2)

        def one(i: int) -> None:
            gate.wait()
            answers.append(update(ym, offer(f"P{i}")))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(parallel + 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    statuses = sorted(a.status_code for a in answers)
    assert [200] * parallel + [420, 420] == statuses
    refused = next(a for a in answers if a.status_code == 420)
    assert (
        f"Hit rate limit of '{parallel}' parallel requests for businessId {BUSINESS}"
        == (messages(refused)[0])
    )
    assert parallel == ym.most_in_flight


def test_the_parallel_cap_counts_every_method_and_its_420_carries_the_headers() -> None:
    """§3.3 "не более четырёх одновременных запросов" per businessId, whatever the method: an
    update, a read-back, a quarantine list and a confirm at once fill the cap of 4, and one
    more of each method is 420 "Hit rate limit of '4' parallel requests …" with the
    X-RateLimit-Resource-* headers ("Headers on every response")."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(parallel=4, apply_delay=0))
    ym.faults.hold = 1.5
    calls = [
        (UPDATES, {"offers": [offer("A")]}),
        (PRICES, {"offerIds": ["A"]}),
        (QUARANTINE, {"offerIds": ["A"]}),
        (CONFIRM, {"offerIds": ["A"]}),
    ]
    with ym:
        answers: dict[int, httpx.Response] = {}
        gate = threading.Barrier(4)

        def one(i: int) -> None:
            gate.wait()
            answers[i] = post(ym, *calls[i])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the four are in flight (each held 1.5 s)
        extra = [post(ym, *call) for call in calls]
        for thread in threads:
            thread.join()
    assert [200] * 4 == [answers[i].status_code for i in range(4)]
    assert 4 == ym.most_in_flight
    for refused in extra:
        assert 420 == refused.status_code, refused.request.url
        assert [f"Hit rate limit of '4' parallel requests for businessId {BUSINESS}"] == (
            messages(refused)
        )
        assert "10000" == refused.headers["X-RateLimit-Resource-Limit"], refused.request.url
        assert refused.headers["X-RateLimit-Resource-Until"].endswith(" GMT")


@pytest.mark.parametrize(
    "ym", [{"quarantine_offers_per_minute": 3, "confirm_offers_per_minute": 2}], indirect=True
)
def test_the_quarantine_list_and_confirm_have_their_own_resource(ym: YmSimulator) -> None:
    """§3.3: a resource limit per method, counted in offers: the quarantine list and its
    confirm each refuse over their own minute with 420 "… for resource 'R' …" and Until,
    nothing charged, and neither spends the updates' resource."""
    assert 200 == post(ym, QUARANTINE, {"offerIds": ["A", "B", "C"]}).status_code
    listed = post(ym, QUARANTINE, {"offerIds": ["D"]})
    assert 420 == listed.status_code
    assert messages(listed)[0].startswith("Hit rate limit of '3' requests per '1 minute' for ")
    assert "resource 'getBusinessQuarantineOffers'" in messages(listed)[0]
    assert listed.headers["X-RateLimit-Resource-Until"].endswith(" GMT")
    assert 200 == post(ym, CONFIRM, {"offerIds": ["A", "B"]}).status_code
    confirmed = post(ym, CONFIRM, {"offerIds": ["C"]})
    assert 420 == confirmed.status_code
    assert "resource 'confirmBusinessPrices'" in messages(confirmed)[0]
    assert "9999" == update(ym, offer("A")).headers["X-RateLimit-Resource-Remaining"]
    later(ym)
    assert 200 == post(ym, QUARANTINE, {"offerIds": ["D"]}).status_code
    assert 200 == post(ym, CONFIRM, {"offerIds": ["C"]}).status_code


def test_a_scaled_clock_makes_the_minute_last_60_over_scale_seconds() -> None:
    """Contract 14 ``--time-scale``; research §3.3's minute: at scale 60 the window lasts one
    real second and Until is the real moment it ends."""
    ym = YmSimulator(KEY, BUSINESS, clock=SimClock(60), offers_per_minute=10)
    with ym:
        assert 200 == update(ym, *[offer(f"A{i}") for i in range(10)]).status_code
        refused = update(ym, offer("B"))
        if refused.status_code == 200:  # the window turned between the two: try once more
            update(ym, *[offer(f"C{i}") for i in range(9)])
            refused = update(ym, offer("B"))
        assert 420 == refused.status_code
        until = email.utils.parsedate_to_datetime(refused.headers["X-RateLimit-Resource-Until"])
        assert 0 < until.timestamp() - time.time() <= 1.01
        time.sleep(max(0.0, until.timestamp() - time.time()) + 0.05)
        assert 200 == update(ym, offer("B")).status_code


# -- Yandex's price quarantine (research §3.4, §7.6) ---------------------------------------------


def test_a_sharp_change_is_accepted_with_200_but_withheld_in_quarantine(ym: YmSimulator) -> None:
    """§3.4, §7.6: 200 says nothing; the offer is listed with verdict PRICE_CHANGE
    (CURRENT_PRICE, LAST_VALID_PRICE), the last valid price stays live."""
    update(ym, offer("A", 1000))
    assert 200 == update(ym, offer("A", 100)).status_code
    assert Decimal(1000) == ym.live("A").value  # type: ignore[union-attr]
    listed = body(post(ym, QUARANTINE, {}))["result"]["offers"]
    assert [
        {
            "offerId": "A",
            "currentPrice": {"value": Decimal(100), "currencyId": "RUR"},
            "lastValidPrice": {"value": Decimal(1000), "currencyId": "RUR"},
            "verdicts": [
                {
                    "type": "PRICE_CHANGE",
                    "params": [
                        {"name": "CURRENT_PRICE", "value": "100"},
                        {"name": "LAST_VALID_PRICE", "value": "1000"},
                    ],
                }
            ],
        }
    ] == listed


def test_a_price_under_the_market_minimum_is_withheld_as_low_price(ym: YmSimulator) -> None:
    """§3.4: "слишком сильно отличается от рыночной": LOW_PRICE with CURRENT_PRICE and
    MIN_PRICE, even for an offer's first price."""
    ym.market_min["A"] = Decimal(500)
    assert 200 == update(ym, offer("A", 400)).status_code
    (listed,) = body(post(ym, QUARANTINE, {"offerIds": ["A"]}))["result"]["offers"]
    assert "LOW_PRICE" == listed["verdicts"][0]["type"]
    assert {"name": "MIN_PRICE", "value": "500"} in listed["verdicts"][0]["params"]
    assert "lastValidPrice" not in listed


@pytest.mark.parametrize("ym", [{"switches": {"apply_delay": 30}}], indirect=True)
def test_confirm_releases_the_quarantined_price(ym: YmSimulator) -> None:
    """§3.4 ConfirmPricesRequest: 1..200 unique offerIds, 200 {"status":"OK"}; the price then
    goes live (as any price, after the apply delay) and the offer leaves the list."""
    update(ym, offer("A", 1000))
    later(ym, 30)
    update(ym, offer("A", 100))
    later(ym, 30)
    assert ["A"] == list(ym.quarantined())
    assert 400 == post(ym, CONFIRM, {"offerIds": ["A", "A"]}).status_code
    assert 400 == post(ym, CONFIRM, {"offerIds": [f"S{i}" for i in range(201)]}).status_code
    response = post(ym, CONFIRM, {"offerIds": ["A"]})
    assert (200, {"status": "OK"}) == (response.status_code, body(response))
    later(ym, 30)
    assert Decimal(100) == read(ym, "A")["A"]["value"]
    assert [] == body(post(ym, QUARANTINE, {}))["result"]["offers"]


def test_a_price_that_passes_ends_the_quarantine(ym: YmSimulator) -> None:
    """§3.4: "установите верную" — a corrected price releases the offer."""
    update(ym, offer("A", 1000))
    update(ym, offer("A", 100))
    assert ["A"] == list(ym.quarantined())
    update(ym, offer("A", 990))
    assert {} == ym.quarantined()
    assert Decimal(990) == read(ym, "A")["A"]["value"]


def test_a_price_set_in_the_cabinet_ends_the_quarantine(ym: YmSimulator) -> None:
    """§3.4: "or set a correct price" — set in the cabinet (``price_in_cabinet``), it is live
    at once and the offer leaves the list, the price withheld never applied."""
    update(ym, offer("A", 1000))
    update(ym, offer("A", 100))
    assert ["A"] == list(ym.quarantined())
    ym.price_in_cabinet("A", Decimal(1000))
    assert {} == ym.quarantined()
    assert Decimal(1000) == read(ym, "A")["A"]["value"]


def test_a_tests_hand_in_the_cabinet_acts_before_the_request_it_names(ym: YmSimulator) -> None:
    """For tests, not Yandex's: ``on_request`` is told each request's method before it is
    served, so a seller's confirmation in the cabinet can land between two of a client's
    requests: the quarantine list read after it no longer names the offer, and the read-back
    shows the price confirmed."""
    update(ym, offer("A", 1000))
    update(ym, offer("A", 100))
    assert ["A"] == list(ym.quarantined())
    told: list[str] = []

    def seller(method: str) -> None:
        told.append(method)
        if method == "price-quarantine":
            ym.confirm(["A"])  # applied at once: no apply delay here

    ym.on_request = seller
    assert [] == body(post(ym, QUARANTINE, {"offerIds": ["A"]}))["result"]["offers"]
    assert Decimal(100) == read(ym, "A")["A"]["value"]
    assert ["price-quarantine", "offer-prices"] == told


# -- faults (research §3.3, §3.4) ----------------------------------------------------------------


def test_a_business_in_migration_is_423(ym: YmSimulator) -> None:
    """§3.4, §7.3: 423 "Business is in migration" on both price methods."""
    ym.faults.in_migration = True
    response = update(ym, offer("A"))
    assert (423, ["Business is in migration"]) == (response.status_code, messages(response))


@pytest.mark.parametrize("status", [500, 503])
def test_an_outage_is_500_or_503(ym: YmSimulator, status: int) -> None:
    """§3.3 last bullet: 500 (retry later), 503 "Service temporarily unavailable…"."""
    ym.faults.outage = status
    assert status == update(ym, offer("A")).status_code


# -- the UNCONFIRMED switches, both ways (research §8) -------------------------------------------


@pytest.mark.parametrize("atomic", [True, False])
def test_switch_atomic_400(atomic: bool) -> None:
    """§3.4, §8 "atomicity of a 400 batch": all-or-nothing, or the valid offers go on and the
    400 names the bad ones."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(atomic_400=atomic, apply_delay=0))
    with ym:
        response = update(ym, offer("GOOD", 10), offer("BAD", 0))
        assert 400 == response.status_code
        assert ["Offer at index '1' should have positive 'value'"] == messages(response)
        live = ym.live("GOOD")
    assert (None if atomic else Decimal(10)) == (live.value if live else None)


@pytest.mark.parametrize("way", ["accept", "reject"])
def test_switch_unknown_offer(way: str) -> None:
    """§3.4, §8 "behaviour for unknown offerId": 200 and never applied (absent from the
    read-back), or a 400 naming it."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(unknown_offer=way, apply_delay=0))
    with ym:
        response = update(ym, offer("NOSUCH-1"))
        if way == "accept":
            assert 200 == response.status_code
        else:
            assert 400 == response.status_code
            assert "OFFER_NOT_FOUND" == body(response)["errors"][0]["code"]
            assert "offerId = 'NOSUCH-1'" in messages(response)[0]
        assert {} == read(ym, "NOSUCH-1")


@pytest.mark.parametrize("threshold", [None, Decimal("0.5"), Decimal("0.05")])
def test_switch_quarantine_threshold(threshold: Decimal | None) -> None:
    """§3.4, §8 "quarantine thresholds" (set in the cabinet): off, half, or 5 %."""
    switches = YmSwitches(quarantine_change=threshold, apply_delay=0)
    ym = YmSimulator(KEY, BUSINESS, switches=switches)
    with ym:
        update(ym, offer("A", 1000))
        update(ym, offer("A", 800))  # a 20 % drop
        expected = Decimal(1000) if threshold == Decimal("0.05") else Decimal(800)
        assert expected == read(ym, "A")["A"]["value"]
    assert () == quarantine_verdicts(Price(Decimal(1)), Price(Decimal(1000)), None, None)


@pytest.mark.parametrize("way", ["touch", "ignore", "refuse"])
def test_switch_repeat_price(way: str) -> None:
    """§3.5 "sending the same price twice … expect 200; UNCONFIRMED": applied again (updatedAt
    moves), ignored (it stays), or refused with a 400 naming the offer."""
    clock = still()
    ym = YmSimulator(
        KEY, BUSINESS, clock=clock, switches=YmSwitches(repeat_price=way, apply_delay=0)
    )
    with ym:
        update(ym, offer("A", 100))
        before = read(ym, "A")["A"]["updatedAt"]
        clock.advance(3600)
        again = update(ym, offer("A", 100))
        after = read(ym, "A")["A"]["updatedAt"]
    assert (400 if way == "refuse" else 200) == again.status_code
    assert (way == "touch") == (after != before)


@pytest.mark.parametrize("way", ["last-valid", "new"])
def test_switch_readback_of_a_quarantined_offer(way: str) -> None:
    """Research silent (§3.4 lists verdicts, not what offer-prices then shows): the last valid
    price, or the price sent while it is withheld."""
    switches = YmSwitches(readback_quarantined=way, apply_delay=0)
    ym = YmSimulator(KEY, BUSINESS, switches=switches)
    ym.market_min["B"] = Decimal(500)
    with ym:
        update(ym, offer("A", 1000))
        update(ym, offer("A", 100))
        update(ym, offer("B", 400))  # withheld from its first price on (LOW_PRICE)
        shown = read(ym, "A", "B")
    if way == "last-valid":
        assert (Decimal(1000), None) == (shown["A"]["value"], shown["B"])
    else:
        assert (Decimal(100), Decimal(400)) == (shown["A"]["value"], shown["B"]["value"])


@pytest.mark.parametrize("answers", [False, True])
def test_switch_unversioned_paths(answers: bool) -> None:
    """§8 "whether unversioned paths (without /v2) still work"."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(unversioned_paths=answers, apply_delay=0))
    with ym:
        response = post(
            ym, f"/businesses/{BUSINESS}/offer-prices/updates", {"offers": [offer("A")]}
        )
        assert 200 == post(ym, UPDATES, {"offers": [offer("B")]}).status_code
    assert (200 if answers else 404) == response.status_code


@pytest.mark.parametrize("way", ["refuse", "overdraft"])
def test_switch_overdraft(way: str) -> None:
    """Research silent on a request bigger than what the window has left: refused whole, or
    taken while anything is left."""
    switches = YmSwitches(overdraft=way, apply_delay=0)
    ym = YmSimulator(KEY, BUSINESS, clock=still(), offers_per_minute=10, switches=switches)
    with ym:
        assert 200 == update(ym, *[offer(f"A{i}") for i in range(8)]).status_code
        big = update(ym, *[offer(f"B{i}") for i in range(5)])  # 2 left
        one = update(ym, offer("C"))
    if way == "refuse":
        assert (420, 200) == (big.status_code, one.status_code)
    else:
        assert (200, 420) == (big.status_code, one.status_code)


@pytest.mark.parametrize("by", ["offerId", "index"])
def test_switch_discount_error_form(by: str) -> None:
    """§3.4: the discount-out-of-range message comes in two forms, by offerId and by index."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(discount_error_by=by, apply_delay=0))
    with ym:
        (message,) = messages(update(ym, offer("A", 990, discountBase=1000)))
    assert message.startswith("Offer 'A'" if by == "offerId" else "Offer at index '0'")


@pytest.mark.parametrize("bounds", ["inclusive", "exclusive"])
def test_switch_discount_bounds(bounds: str) -> None:
    """§3.1: a discount of 5..99 %; whether exactly 5 % (or 99 %) is taken is not said: taken
    (``inclusive``), or refused with the out-of-range message naming the offer."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(discount_bounds=bounds, apply_delay=0))
    with ym:
        five = update(ym, offer("A", 950, discountBase=1000))  # exactly 5 % off
        ninety_nine = update(ym, offer("B", 10, discountBase=1000))  # exactly 99 % off
        inside = update(ym, offer("C", 949, discountBase=1000))  # 5.1 % off
    assert 200 == inside.status_code
    if bounds == "inclusive":
        assert (200, 200) == (five.status_code, ninety_nine.status_code)
    else:
        assert (400, 400) == (five.status_code, ninety_nine.status_code)
        assert messages(five) == [
            "Offer 'A' should have valid discount value. Discount percentage must be between "
            "'5' and '99', actual '5'"
        ]


@pytest.mark.parametrize("status", ["ERROR", "OK"])
def test_switch_error_status(status: str) -> None:
    """§3.4: ApiErrorResponse says ``"status":"ERROR"``, but the published examples show
    ``"status":"OK"`` inside 4xx bodies: the HTTP status and ``errors`` are what count."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(error_status=status, apply_delay=0))
    with ym:
        response = update(ym, offer("A", 0))
    assert (400, status) == (response.status_code, body(response)["status"])
    assert 1 == len(body(response)["errors"])


@pytest.mark.parametrize("way", ["page", "refuse"])
def test_switch_read_without_ids(way: str) -> None:
    """Research silent (§3.4 says "≤ 200 offerIds per call", not whether they may be left
    out): a read-back without offerIds is a page of the catalogue, or refused (400)."""
    ym = YmSimulator(KEY, BUSINESS, switches=YmSwitches(read_without_ids=way, apply_delay=0))
    with ym:
        update(ym, offer("A"), offer("B"))
        response = post(ym, PRICES + "?limit=1", {})
    if way == "page":
        assert 200 == response.status_code
        assert ["A"] == [o["offerId"] for o in body(response)["result"]["offers"]]
    else:
        assert 400 == response.status_code


@pytest.mark.parametrize("way", ["all", "first", "none"])
def test_switch_errors_named(way: str) -> None:
    """Research silent on whether a 400 names every bad offer, the first only, or none."""
    switches = YmSwitches(errors_named=way, unknown_offer="reject", apply_delay=0)
    ym = YmSimulator(KEY, BUSINESS, switches=switches)
    with ym:
        response = update(ym, offer("A"), offer("NOSUCH-1"), offer("NOSUCH-2"))
    if way == "none":
        assert (400, ["Internal validation failed"]) == (response.status_code, messages(response))
        return
    named = ["NOSUCH-1", "NOSUCH-2"] if way == "all" else ["NOSUCH-1"]
    assert (400, named) == (response.status_code, [m.split("'")[1] for m in messages(response)])


@pytest.mark.parametrize("way", ["up", "down"])
def test_switch_until_rounding(way: str) -> None:
    """§3.3: X-RateLimit-Resource-Until is an RFC 822 date, whole seconds: the window's end
    rounded up (a request at that moment goes), or the second before it (still refused)."""
    switches = YmSwitches(until_rounding=way, apply_delay=0)
    ym = YmSimulator(KEY, BUSINESS, clock=still(), offers_per_minute=2, switches=switches)
    with ym:
        update(ym, offer("A"), offer("B"))
        refused = update(ym, offer("C"))
        until = email.utils.parsedate_to_datetime(refused.headers["X-RateLimit-Resource-Until"])
        later(ym, until.timestamp() - ym.clock.now())
        at_until = update(ym, offer("C"))
        later(ym, 1)
        after = update(ym, offer("D"))
    assert 420 == refused.status_code
    assert (200 if way == "up" else 420) == at_until.status_code
    assert 200 == after.status_code


def test_switches_are_set_by_name_from_the_command_line() -> None:
    switches = YmSwitches()
    set_switch(switches, "atomic_400", "false")
    set_switch(switches, "apply_delay", "5")
    set_switch(switches, "quarantine_change", "off")
    set_switch(switches, "unknown_offer", "reject")
    assert (False, 5.0, None, "reject") == (
        switches.atomic_400,
        switches.apply_delay,
        switches.quarantine_change,
        switches.unknown_offer,
    )
    with pytest.raises(ValueError):
        set_switch(switches, "unknown_offer", "maybe")
    with pytest.raises(ValueError):
        set_switch(switches, "nothing", "1")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("atomic_400=maybe", "switch atomic_400 is one of true, false, not 'maybe'"),
        ("apply_delay=abc", "switch apply_delay is a number, not 'abc'"),
        ("parallel=two", "switch parallel is a whole number, not 'two'"),
        ("quarantine_change=half", "switch quarantine_change is a share such as 0.5, or none"),
        ("unknown_offer=maybe", "switch unknown_offer is one of accept, reject, not 'maybe'"),
    ],
)
def test_a_bad_switch_value_stops_it_with_one_line(given: str, said: str) -> None:
    """As ozonsim's ``--switch``: the switch named with what it takes, exit 2, nothing
    accepted silently (``maybe`` is not false)."""
    done = subprocess.run(
        [sys.executable, "-m", "exchange.dev.ymsim", "--port", "0", "--unconfirmed", given],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert 2 == done.returncode
    [line] = done.stderr.splitlines()
    assert said in line, line


# -- on its own ----------------------------------------------------------------------------------


def test_runnable_on_its_own_printing_the_channel_settings(tmp_path: Path) -> None:
    """``python -m exchange.dev.ymsim --port 0`` listens and prints EXCHANGE_CHANNELS naming
    contract 14's settings (ym_api_url, ym_business_id, ym_api_key_file, the pace); a key in
    the file named answers 200, the key itself is never printed."""
    key_path = tmp_path / "key"
    key_path.write_text("secret-ym-key\n")
    process, lines = start("ymsim", None, "--api-key-file", str(key_path), "--time-scale", "60")
    try:
        assert ["EXCHANGE_CHANNELS"] == list(settings(lines))
        channel = channels(lines)["yandex-market"]
        assert {
            "target": "yandex-market",
            "ym_business_id": 1001,
            "ym_api_key_file": str(key_path),
            "ym_parallel": 4,
            "ym_offers_per_minute": 600_000,
            "ym_apply_timeout": 10.0,
            "ym_price_types": {"retail": "value"},
            "currency": "RUB",
        }.items() <= channel.items()
        assert any(line.startswith("  # switches in force: atomic_400=") for line in lines)
        url = channel["ym_api_url"]
        response = httpx.post(
            f"{url}/v2/businesses/1001/offer-prices/updates",
            json={"offers": [offer("A")]},
            headers={"Api-Key": "secret-ym-key"},
        )
        assert 200 == response.status_code
        assert "secret-ym-key" not in "".join(lines)
    finally:
        out = stop(process)
    assert "stopped" in out


# -- the conformance table -----------------------------------------------------------------------

TABLE = Path(__file__).resolve().parents[2] / "docs" / "simulators" / "yandex-market.md"


def test_the_conformance_table_names_a_test_for_every_row() -> None:
    """docs/simulators/yandex-market.md: every row cites a research section (or says it is
    silent) and names tests that exist here; every test here is named in a row, every switch
    too."""
    guard = test_the_conformance_table_names_a_test_for_every_row
    assert [] == table_problems(TABLE, globals(), guard, [f.name for f in fields(YmSwitches)])
