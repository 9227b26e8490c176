"""The Ozon simulator behaves as the research says Ozon does (../shared/research/marketplaces.md
section 1, the behaviours of section 7, the UNCONFIRMED points of section 8), through a real
HTTP client against the running server. Each test names the row of the conformance table
(docs/simulators/ozon.md) it checks; each unconfirmed switch is tested both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from foreground import channels, start, stop
from simtables import table_problems

from exchange.dev.ozonsim import (
    BATCH_LIMIT,
    CIRCLE_OPEN,
    IMPORT_PRICES,
    INFO_PRICES,
    INVALID_KEY,
    ITEM_LIMIT,
    ITEM_LIMIT_WRAPPED,
    MISSING_ROLE,
    ROLES,
    SWITCHES,
    OzonSimulator,
    set_switch,
)
from exchange.dev.simclock import SimClock

CLIENT, KEY = "836741", "key-1"
RATE_LIMITED_TEXT = "You have reached request rate limit per second"
AUTH = {"Client-Id": CLIENT, "Api-Key": KEY}
DOC = Path(__file__).resolve().parents[2] / "docs" / "simulators" / "ozon.md"


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    simulator = OzonSimulator(CLIENT, KEY)
    simulator.start()
    yield simulator
    simulator.stop()


@pytest.fixture
def client(ozon: OzonSimulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ozon.url, headers=AUTH, timeout=10) as http:
        yield http


def send(http: httpx.Client, *items: dict[str, Any], **headers: str) -> httpx.Response:
    return http.post(IMPORT_PRICES, json={"prices": list(items)}, headers=headers or None)


def results(http: httpx.Client, *items: dict[str, Any]) -> list[dict[str, Any]]:
    answer = send(http, *items)
    assert 200 == answer.status_code, answer.text
    result: list[dict[str, Any]] = answer.json()["result"]
    return result


def codes(result: dict[str, Any]) -> list[str]:
    return [e["code"] for e in result["errors"]]


def read(http: httpx.Client, *offers: str, limit: int = 100) -> dict[str, Any]:
    filter_ = {"offer_id": list(offers), "visibility": "ALL"}
    answer = http.post(INFO_PRICES, json={"filter": filter_, "cursor": "", "limit": limit})
    assert 200 == answer.status_code, answer.text
    found: dict[str, Any] = answer.json()
    return found


def item(offer_id: str, price: str = "1000", **more: Any) -> dict[str, Any]:
    return {"offer_id": offer_id, "price": price, **more}


# -- §1.4, §7.1: the answer ------------------------------------------------------------------


def test_mixed_item_outcomes_answer_200_one_result_per_item_in_order(
    client: httpx.Client,
) -> None:
    found = results(client, item("A-1"), item("NOSUCH-1"), item("A-2", "-5"))
    assert ["A-1", "NOSUCH-1", "A-2"] == [r["offer_id"] for r in found]
    assert [True, False, False] == [r["updated"] for r in found]
    assert [[], ["NOT_FOUND_ERROR"], ["price_negative"]] == [codes(r) for r in found]
    assert all({"code", "message"} == set(e) for r in found for e in r["errors"])
    assert found[0]["product_id"] > 0


def test_the_price_set_is_the_price_read_back(client: httpx.Client, ozon: OzonSimulator) -> None:
    results(client, item("A-1", "1448.50", old_price="1700", min_price="900"))
    shown = read(client, "A-1")["items"][0]
    assert "A-1" == shown["offer_id"]
    assert {"price": 1448.5, "old_price": 1700, "min_price": 900} == {
        k: shown["price"][k] for k in ("price", "old_price", "min_price")
    }
    assert "RUB" == shown["price"]["currency_code"]
    assert Decimal("1448.50") == ozon.price("A-1")
    assert ["1448.50"] == ozon.history("A-1")


@pytest.mark.parametrize("way", SWITCHES["oversize"])
def test_more_than_1000_items_is_a_400_with_code_3_switch_oversize(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "oversize", way)
    answer = send(client, *(item(f"S-{n}") for n in range(BATCH_LIMIT + 1)))
    if way == "refuse":
        assert 400 == answer.status_code
        assert 3 == answer.json()["code"]
        assert ozon.price("S-0") is None  # nothing applied
    else:
        assert 200 == answer.status_code
        assert BATCH_LIMIT + 1 == len(answer.json()["result"])
    assert 200 == send(client, *(item(f"T-{n}") for n in range(BATCH_LIMIT))).status_code


def test_a_lowered_batch_limit_refuses_a_larger_request(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.limits.batch_limit = 5
    assert 400 == send(client, *(item(f"S-{n}") for n in range(6))).status_code
    assert 200 == send(client, *(item(f"S-{n}") for n in range(5))).status_code
    assert 5 == ozon.largest_batch


@pytest.mark.parametrize("way", SWITCHES["numbers"])
def test_money_is_strings_switch_numbers(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "numbers", way)
    answer = send(client, {"offer_id": "A-1", "price": 1000})
    if way == "reject":
        assert (400, 3) == (answer.status_code, answer.json()["code"])
        assert ozon.price("A-1") is None
    else:
        assert answer.json()["result"][0]["updated"]
        assert Decimal(1000) == ozon.price("A-1")


@pytest.mark.parametrize("way", SWITCHES["decimals"])
def test_at_most_two_decimals_switch_decimals(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "decimals", way)
    answer = send(client, item("A-1", "99.995"))
    if way == "reject":
        assert (400, 3) == (answer.status_code, answer.json()["code"])
    else:
        assert answer.json()["result"][0]["updated"]
        assert Decimal("100.00") == ozon.price("A-1")


def test_a_body_that_is_not_json_is_a_400(client: httpx.Client) -> None:
    answer = client.post(IMPORT_PRICES, content=b"{prices:", headers=AUTH)
    assert (400, 3) == (answer.status_code, answer.json()["code"])
    assert {"code", "message", "details"} == set(answer.json())


# -- §1.1, §1.5, §1.6: identity and fields ---------------------------------------------------


@pytest.mark.parametrize("way", SWITCHES["not_found"])
def test_an_unknown_article_is_not_found_error_switch_not_found(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "not_found", way)
    [found] = results(client, {"product_id": 77, "price": "10"})
    assert ["NOT_FOUND_ERROR"] == codes(found) and not found["updated"]
    assert (77 if way == "echo" else 0) == found["product_id"]
    assert ozon.outcomes["NOT_FOUND_ERROR"] == 1


def test_offer_id_wins_over_product_id(client: httpx.Client, ozon: OzonSimulator) -> None:
    [b] = results(client, item("B-1", "500"))
    results(client, {"offer_id": "A-1", "product_id": b["product_id"], "price": "700"})
    assert Decimal(700) == ozon.price("A-1")
    assert Decimal(500) == ozon.price("B-1")


def test_product_id_alone_names_the_product(client: httpx.Client, ozon: OzonSimulator) -> None:
    [a] = results(client, item("A-1", "500"))
    [again] = results(client, {"product_id": a["product_id"], "price": "600"})
    assert "A-1" == again["offer_id"] and again["updated"]
    assert Decimal(600) == ozon.price("A-1")


def test_old_price_zero_clears_the_old_price(client: httpx.Client) -> None:
    results(client, item("A-1", "1000", old_price="1200"))
    results(client, item("A-1", "1000", old_price="0"))
    assert 0 == read(client, "A-1")["items"][0]["price"]["old_price"]


def test_a_field_left_out_is_left_as_it_is(client: httpx.Client) -> None:
    results(client, item("A-1", "1000", old_price="1200"))
    results(client, item("A-1", "1050"))
    assert 1200 == read(client, "A-1")["items"][0]["price"]["old_price"]


def test_unknown_flags_leave_the_state_untouched(client: httpx.Client) -> None:
    results(client, item("A-1", "1000", min_price="800", auto_action_enabled="ENABLED"))
    results(client, item("A-1", "1010", auto_action_enabled="UNKNOWN"))
    assert read(client, "A-1")["items"][0]["price"]["auto_action_enabled"] is True
    results(client, item("A-1", "1020", auto_action_enabled="DISABLED"))
    assert read(client, "A-1")["items"][0]["price"]["auto_action_enabled"] is False


# -- §1.1, §1.4: the price rules -------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "old_price", "code"),
    [
        ("300", "315", "discount_for_low_price_is_too_small"),
        ("1000", "1040", "discount_for_average_price_is_too_small"),
        ("20000", "20400", "discount_for_top_price_is_too_small"),
    ],
)
def test_old_price_gap_tiers(client: httpx.Client, price: str, old_price: str, code: str) -> None:
    [found] = results(client, item("A-1", price, old_price=old_price))
    assert [code] == codes(found) and not found["updated"]


@pytest.mark.parametrize("way", SWITCHES["gap_boundary"])
@pytest.mark.parametrize(
    ("price", "old_price"), [("300", "320"), ("950", "1000"), ("20000", "20500")]
)
def test_old_price_gap_exactly_at_the_threshold_switch_gap_boundary(
    client: httpx.Client, ozon: OzonSimulator, way: str, price: str, old_price: str
) -> None:
    set_switch(ozon.switches, "gap_boundary", way)
    [found] = results(client, item("A-1", price, old_price=old_price))
    assert found["updated"] is (way == "taken")


def test_a_gap_of_90_percent_or_more_is_discount_too_big(client: httpx.Client) -> None:
    [found] = results(client, item("A-1", "100", old_price="1000"))
    assert ["discount_too_big"] == codes(found)
    [taken] = results(client, item("A-1", "101", old_price="1000"))
    assert taken["updated"]


def test_an_old_price_below_the_price_is_old_price_less_than_price(client: httpx.Client) -> None:
    [found] = results(client, item("A-1", "1000", old_price="900"))
    assert ["old_price_less_than_price"] == codes(found)


def test_a_negative_price_is_price_negative(client: httpx.Client) -> None:
    [found] = results(client, item("A-1", "-1"))
    assert ["price_negative"] == codes(found)


def test_a_min_price_under_half_the_price_is_min_auto_price_too_small(
    client: httpx.Client,
) -> None:
    [found] = results(client, item("A-1", "1000", min_price="499"))
    assert ["min_auto_price_too_small"] == codes(found)
    [taken] = results(client, item("A-1", "1000", min_price="500"))
    assert taken["updated"]


@pytest.mark.parametrize("way", SWITCHES["min_above_price"])
def test_a_min_price_at_or_above_the_price_switch_min_above_price(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "min_above_price", way)
    [found] = results(client, item("A-1", "1000", min_price="1000"))
    assert [way] == codes(found)


def test_auto_actions_without_a_min_price_is_action_price_enabled_min_price_missing(
    client: httpx.Client,
) -> None:
    [found] = results(client, item("A-1", "1000", auto_action_enabled="ENABLED"))
    assert ["action_price_enabled_min_price_missing"] == codes(found)


def test_a_price_outside_the_category_range_is_invalid_category_price(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.set_category_bounds("A-1", Decimal(100), Decimal(5000))
    [found] = results(client, item("A-1", "6000"))
    assert ["invalid_category_price"] == codes(found)
    assert results(client, item("A-1", "4000"))[0]["updated"]


@pytest.mark.parametrize("way", SWITCHES["currency"])
def test_a_currency_other_than_the_accounts_switch_currency(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "currency", way)
    answer = send(client, item("A-1", "10", currency_code="CNY"), item("A-2", "10"))
    if way == "item":
        found = answer.json()["result"]
        assert [["currency_code_mismatch"], []] == [codes(r) for r in found]
    else:
        assert (400, 3) == (answer.status_code, answer.json()["code"])
        assert ozon.price("A-2") is None


# -- §1.3, §1.4: the hour of each product ----------------------------------------------------


def ten_changes(http: httpx.Client, offer: str = "A-1") -> None:
    for n in range(10):
        assert results(http, item(offer, str(1000 + n)))[0]["updated"]


@pytest.mark.parametrize("way", SWITCHES["limit_message"])
def test_the_eleventh_update_in_an_hour_is_the_per_item_limit_switch_limit_message(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "limit_message", way)
    ten_changes(client)
    [refused, other] = results(client, item("A-1", "2000"), item("B-1", "2000"))
    assert not refused["updated"] and other["updated"]
    [error] = refused["errors"]
    assert ITEM_LIMIT == error["code"]
    assert (ITEM_LIMIT_WRAPPED if way == "wrapped" else ITEM_LIMIT) == error["message"]
    assert Decimal(1009) == ozon.price("A-1")
    assert 10 == len(ozon.charged("A-1"))  # a refusal is never charged


def test_the_per_item_limit_comes_back_after_the_hour_on_the_simulators_clock(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ten_changes(client)
    ozon.clock.advance(3599)
    assert not results(client, item("A-1", "2000"))[0]["updated"]
    ozon.clock.advance(2)
    assert results(client, item("A-1", "2000"))[0]["updated"]


@pytest.mark.parametrize("way", SWITCHES["window"])
def test_the_hour_is_rolling_or_fixed_switch_window(ozon: OzonSimulator, way: str) -> None:
    set_switch(ozon.switches, "window", way)
    hour = 3600.0
    ozon.clock.advance(hour - ozon.clock.now() % hour + 3000)  # 50 minutes into an hour
    with httpx.Client(base_url=ozon.url, headers=AUTH) as http:
        ten_changes(http)
        ozon.clock.advance(700)  # 1 min 40 s into the next clock hour
        taken = results(http, item("A-1", "3000"))[0]["updated"]
    assert taken is (way == "fixed")


@pytest.mark.parametrize("way", SWITCHES["unchanged"])
def test_an_unchanged_price_counts_toward_the_hour_switch_unchanged(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "unchanged", way)
    for _ in range(10):
        assert results(client, item("A-1", "1000"))[0]["updated"]
    assert ozon.outcomes["unchanged"] == 9
    [eleventh] = results(client, item("A-1", "1001"))
    assert eleventh["updated"] is (way == "free")
    assert ["1000.00", *(["1001.00"] if way == "free" else [])] == ozon.history("A-1")


@pytest.mark.parametrize("way", SWITCHES["refused"])
def test_an_item_refused_by_a_rule_counts_toward_the_hour_switch_refused(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "refused", way)
    for _ in range(10):
        assert ["price_negative"] == codes(results(client, item("A-1", "-1"))[0])
    assert results(client, item("A-1", "10"))[0]["updated"] is (way == "free")


@pytest.mark.timing
def test_a_clock_scaled_3600_times_passes_the_hour_in_a_second() -> None:
    clock = SimClock(3600)
    start = clock.now()
    time.sleep(0.25)
    assert 800 < clock.now() - start < 36000  # 0.25 s of wall clock, more under load
    ozon = OzonSimulator(CLIENT, KEY, time_scale=3600)
    with ozon, httpx.Client(base_url=ozon.url, headers=AUTH) as http:
        ten_changes(http)
        assert not results(http, item("A-1", "5000"))[0]["updated"]
        time.sleep(1.1)
        assert results(http, item("A-1", "5000"))[0]["updated"]


# -- §1.3: the pace --------------------------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize("way", SWITCHES["rate_headers"])
def test_over_the_requests_a_second_is_429_code_8_switch_rate_headers(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "rate_headers", way)
    ozon.limits.rps = 3
    answers = [send(client, item("A-1", "1000")) for _ in range(6)]
    refused = [a for a in answers if a.status_code == 429]
    assert refused and all(
        a.json()
        == {
            "code": 8,
            "message": "You have reached request rate limit per second",
            "details": [],
        }
        for a in refused
    )
    assert sum(a.status_code == 200 for a in answers) <= 3
    headers = refused[0].headers
    if way == "observed":
        assert ("0", "1") == (headers["ratelimit-remaining"], headers["retry-after"])
    else:
        assert "retry-after" not in headers and "ratelimit-remaining" not in headers
    time.sleep(1.05)
    assert 200 == send(client, item("A-1", "1000")).status_code


@pytest.mark.timing
def test_a_fractional_rate_spaces_whole_requests(client: httpx.Client, ozon: OzonSimulator) -> None:
    ozon.limits.rps = 2.5  # 2 in any 0.8 s
    assert [200, 200, 429] == [send(client, item("A-1")).status_code for _ in range(3)]
    time.sleep(0.85)
    assert 200 == send(client, item("A-1")).status_code


@pytest.mark.timing
def test_a_limit_of_the_method_on_top_refuses_that_method_only(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.limits.method_rps = 1
    assert [200, 429] == [send(client, item("A-1")).status_code for _ in range(2)]
    assert RATE_LIMITED_TEXT == send(client, item("A-1")).json()["message"]
    assert 200 == client.post(ROLES).status_code


@pytest.mark.timing
def test_the_requests_a_second_count_every_method(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.limits.rps = 2
    assert 200 == client.post(ROLES).status_code
    read(client, "A-1")
    assert 429 == send(client, item("A-1")).status_code


@pytest.mark.timing
@pytest.mark.parametrize("way", SWITCHES["circle_status"])
def test_a_burst_of_refused_requests_opens_the_circle_for_minutes_switch_circle_status(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "circle_status", way)
    ozon.limits.rps, ozon.limits.circle_after = 1, 3
    for _ in range(5):
        send(client, item("A-1"))
    time.sleep(1.05)  # the second is over: what answers now is the circle, not the rate
    answer = send(client, item("A-1"))
    status, code = {"503": (503, 14), "429": (429, 8), "200": (200, 14)}[way]
    assert (status, code, CIRCLE_OPEN) == (
        answer.status_code,
        answer.json()["code"],
        answer.json()["message"],
    )
    time.sleep(1.05)
    read(client, "A-1")  # only the method is blocked
    time.sleep(1.05)
    ozon.clock.advance(ozon.limits.circle_seconds)
    assert 200 == send(client, item("A-1")).status_code


def test_a_burst_on_the_read_method_blocks_the_read_method_not_the_import(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    """§1.3: "the system temporarily blocks the method" that got the burst."""
    ozon.limits.rps, ozon.limits.circle_after = 1, 3
    body = {"filter": {"offer_id": ["A-1"], "visibility": "ALL"}, "cursor": "", "limit": 10}
    for _ in range(5):
        client.post(INFO_PRICES, json=body)
    time.sleep(1.05)
    assert 200 == send(client, item("A-1")).status_code  # the import method answers
    time.sleep(1.05)
    answer = client.post(INFO_PRICES, json=body)
    assert (503, 14, CIRCLE_OPEN) == (
        answer.status_code,
        answer.json()["code"],
        answer.json()["message"],
    )


# -- §1.2: the key -----------------------------------------------------------------------------


def test_a_wrong_key_is_404_code_5(client: httpx.Client) -> None:
    answer = send(client, item("A-1"), **{"Api-Key": "wrong"})
    assert (404, {"code": 5, "message": INVALID_KEY, "details": []}) == (
        answer.status_code,
        answer.json(),
    )
    assert 404 == send(client, item("A-1"), **{"Client-Id": "999"}).status_code


def test_a_client_id_that_is_not_a_positive_integer_is_400_code_3(client: httpx.Client) -> None:
    for bad in ("abc", "0", "-5"):
        answer = send(client, item("A-1"), **{"Client-Id": bad})
        assert (400, 3) == (answer.status_code, answer.json()["code"])
        assert "Client-Id header value should be positive integer" == answer.json()["message"]


@pytest.mark.parametrize("way", SWITCHES["missing_role_status"])
def test_a_key_without_the_prices_role_switch_missing_role_status(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "missing_role_status", way)
    ozon.faults.roles = "read"
    answer = send(client, item("A-1"))
    assert (int(way), MISSING_ROLE) == (answer.status_code, answer.json()["message"])
    assert {"403": 7, "401": 16}[way] == answer.json()["code"]
    assert read(client, "A-1")["items"]  # it may still read
    assert [INFO_PRICES, ROLES] == client.post(ROLES).json()["roles"][0]["methods"]


@pytest.mark.parametrize(
    ("state", "status", "message"),
    [
        ("deactivated", 404, "Api-key is deactivated, use another one or generate a new one"),
        ("ip-restricted", 403, "Api-Key is restricted to specific IP addresses"),
        ("offer-not-signed", 403, "Offer not signed"),
    ],
)
def test_a_key_refused_for_other_reasons_says_why(
    client: httpx.Client, ozon: OzonSimulator, state: str, status: int, message: str
) -> None:
    ozon.faults.key = state
    answer = send(client, item("A-1"))
    assert (status, message) == (answer.status_code, answer.json()["message"])


def test_an_oauth_bearer_token_takes_the_place_of_the_key() -> None:
    ozon = OzonSimulator(CLIENT, KEY, oauth_token="tok-1")
    with ozon, httpx.Client(base_url=ozon.url) as http:
        headers = {"Authorization": "Bearer tok-1"}
        assert 200 == http.post(IMPORT_PRICES, json={"prices": []}, headers=headers).status_code
        headers = {"Authorization": "Bearer other"}
        assert 400 == http.post(IMPORT_PRICES, json={"prices": []}, headers=headers).status_code


@pytest.mark.parametrize("way", SWITCHES["key_months"])
def test_roles_say_the_keys_methods_and_when_it_expires_switch_key_months(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "key_months", way)
    answer = client.post(ROLES).json()
    assert IMPORT_PRICES in answer["roles"][0]["methods"]
    expires = datetime.fromisoformat(answer["expires_at"])
    days = (expires - ozon.clock.datetime()).days
    assert days in {"6": (179, 180), "3": (89, 90)}[way]


def test_an_unknown_method_is_404_method_is_not_allowed_never_code_5(
    client: httpx.Client,
) -> None:
    """§1.2's "method is not allowed"; never code 5, a bad key's, which pauses delivery
    (contract 14): a wrong path is not a bad key."""
    for answer in (
        client.post("/v1/product/import/price", json={}),
        client.get(IMPORT_PRICES),
    ):
        assert (404, {"code": 12, "message": "method is not allowed", "details": []}) == (
            answer.status_code,
            answer.json(),
        )


def test_internal_error_is_500(client: httpx.Client, ozon: OzonSimulator) -> None:
    ozon.faults.internal_errors = 1
    answer = send(client, item("A-1"))
    assert (500, 13, "Internal error") == (
        answer.status_code,
        answer.json()["code"],
        answer.json()["message"],
    )
    assert 200 == send(client, item("A-1")).status_code


def test_a_proxy_page_is_html_not_ozons_rpc_status(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.faults.proxy_page = 404
    answer = send(client, item("A-1", "10"))
    assert 404 == answer.status_code and answer.headers["content-type"].startswith("text/html")
    assert ozon.price("A-1") is None


def test_drop_after_applies_and_cuts_the_connection(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.faults.drop_after = True
    with pytest.raises(httpx.TransportError):
        send(client, item("A-1", "777"))
    assert Decimal(777) == ozon.price("A-1")


@pytest.mark.parametrize("status", [500, 504])
def test_late_status_answers_a_5xx_at_once_and_applies_the_import_later(
    client: httpx.Client, ozon: OzonSimulator, status: int
) -> None:
    """A gateway's 504 (its page) or a 500 (Ozon's "Internal error") now, and the request
    handed on to Ozon later: applied all the same (a 5xx says nothing of the outcome)."""
    ozon.faults.late_status, ozon.faults.late_after = status, 0.3
    answer = send(client, item("A-1", "555"))
    assert answer.status_code == status
    if status == 500:
        assert answer.json()["code"] == 13
    else:
        assert answer.headers["content-type"].startswith("text/html")
    assert Decimal(555) != ozon.price("A-1"), "not yet applied"
    time.sleep(0.8)
    assert Decimal(555) == ozon.price("A-1")


def test_unanswered_leaves_an_items_result_out_of_the_200(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    ozon.faults.unanswered = {"A-2"}
    answered = results(client, item("A-1", "101"), item("A-2", "102"), item("A-3", "103"))
    assert ["A-1", "A-3"] == [r["offer_id"] for r in answered]
    assert Decimal(102) == ozon.price("A-2"), "applied as ever; only its answer is left out"


# -- §1.4: the read-back -----------------------------------------------------------------------


@pytest.mark.parametrize("way", SWITCHES["readback"])
def test_the_read_back_money_switch_readback(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "readback", way)
    results(client, item("A-1", "1448.5"))
    raw = client.post(
        INFO_PRICES, json={"filter": {"offer_id": ["A-1"]}, "limit": 1}
    ).content.decode()
    assert ('"price": 1448.5' if way == "numbers" else '"price": "1448.50"') in raw


def test_the_read_back_pages_by_cursor_within_1_to_1000(client: httpx.Client) -> None:
    results(client, *(item(f"P-{n}", str(100 + n)) for n in range(5)))
    seen: list[str] = []
    cursor = ""
    while True:
        page = client.post(
            INFO_PRICES, json={"filter": {"visibility": "ALL"}, "cursor": cursor, "limit": 2}
        ).json()
        assert 5 == page["total"]
        seen += [i["offer_id"] for i in page["items"]]
        cursor = page["cursor"]
        if not cursor:
            break
    assert [f"P-{n}" for n in range(5)] == seen
    for limit in (0, 1001):
        answer = client.post(INFO_PRICES, json={"filter": {}, "limit": limit})
        assert (400, 3) == (answer.status_code, answer.json()["code"])


@pytest.mark.parametrize("way", SWITCHES["storefront"])
def test_the_storefront_shows_the_price_switch_storefront(
    client: httpx.Client, ozon: OzonSimulator, way: str
) -> None:
    set_switch(ozon.switches, "storefront", way)
    results(client, item("A-1", "100"))
    ozon.clock.advance(ozon.limits.apply_delay)
    results(client, item("A-1", "200"))
    shown = read(client, "A-1")["items"][0]["price"]["price"]
    assert (200 if way == "at-once" else 100) == shown
    ozon.clock.advance(ozon.limits.apply_delay)
    assert 200 == read(client, "A-1")["items"][0]["price"]["price"]
    # the next update is compared with what was accepted, not with the storefront
    assert ozon.outcomes["updated"] == 2


def test_ozons_own_promotion_changes_the_price_read_back(
    client: httpx.Client, ozon: OzonSimulator
) -> None:
    results(client, item("A-1", "1000"))
    ozon.promote("A-1", Decimal(900))
    assert 900 == read(client, "A-1")["items"][0]["price"]["price"]
    results(client, item("A-1", "1000"))
    assert 1000 == read(client, "A-1")["items"][0]["price"]["price"]
    assert 0 == ozon.outcomes["unchanged"]


# -- on its own ------------------------------------------------------------------------------


def test_runnable_on_its_own_printing_the_channel_settings(tmp_path: Path) -> None:
    key_file = tmp_path / "ozon.key"
    process, lines = start("ozonsim", None, "--key-file", str(key_file), "--switch", "window=fixed")
    try:
        channel = channels(lines)["ozon"]
        assert {"target", "ozon_api_url", "ozon_client_id", "ozon_api_key_file"} <= set(channel)
        assert "ozon" == channel["target"]
        key = Path(channel["ozon_api_key_file"]).read_text().strip()
        assert "window=fixed" in "".join(lines)
        headers = {"Client-Id": channel["ozon_client_id"], "Api-Key": key}
        answer = httpx.post(channel["ozon_api_url"] + ROLES, headers=headers)
        assert 200 == answer.status_code
        assert IMPORT_PRICES in answer.json()["roles"][0]["methods"]
    finally:
        out = stop(process)
    assert "ozon-demo-api-key" == key
    assert "Ozon simulator stopped" in out


def test_a_key_file_it_is_given_is_used_and_never_printed(tmp_path: Path) -> None:
    secret = "ozon-key-of-the-owner-5c1e"
    key_file = tmp_path / "ozon.key"
    key_file.write_text(secret + "\n")
    process, lines = start("ozonsim", {**os.environ, "OZONSIM_API_KEY_FILE": str(key_file)})
    try:
        channel = channels(lines)["ozon"]
        assert str(key_file) == channel["ozon_api_key_file"]
        headers = {"Client-Id": channel["ozon_client_id"], "Api-Key": secret}
        assert 200 == httpx.post(channel["ozon_api_url"] + ROLES, headers=headers).status_code
    finally:
        out = stop(process)
    assert secret not in "".join(lines) + out
    assert secret == key_file.read_text().strip()


def test_an_unknown_switch_stops_it_with_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exchange.dev.ozonsim", "--port", "0", "--switch", "window=daily"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert 2 == done.returncode
    assert "switch window is one of rolling, fixed" in done.stderr


# -- the table -------------------------------------------------------------------------------


def test_every_row_of_the_conformance_table_has_its_test_and_every_switch_its_row() -> None:
    guard = test_every_row_of_the_conformance_table_has_its_test_and_every_switch_its_row
    assert [] == table_problems(DOC, globals(), guard, SWITCHES)
