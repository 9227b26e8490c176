"""Numbers, dates and texts from outside (issue 12, items 5 and 8), without a database.

- a price is a plain decimal: whitespace, line breaks, "+", digits that are not ASCII are
  refused invalid-contract, on the fast path and the full path alike; -0 is sent as 0 (its
  scale kept);
- the site's ``current_version`` is a version (1 to 2^63-1) or the answer is unknown: nothing
  outside BIGINT ever reaches the recording;
- every ``created_at`` on the wire is ISO 8601 UTC with a four-digit year;
- a staging row is held to contract 1's column limits whatever the table allows.
"""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from exchange.db.schema import staging
from exchange.domain.identity import MAX_VERSION, PACKAGE_VERSIONS_FROM
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.reasons import Reason
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.states import State
from exchange.domain.verdicts import Verdict
from exchange.intake.contracts import STAGING_TEXT_LIMITS, Accepted, Rejected, StagingRow, validate
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.answers import classify
from exchange.targets.shop_api.client import Response, body

KINDS = dict(DEFAULT_KINDS)
CREATED = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
WIRE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def row(payload: str, **fields: Any) -> StagingRow:
    values: dict[str, Any] = {
        "id": 1,
        "kind": "price",
        "aggregate": "SKU-17",
        "aggregate_version": 184,
        "payload": payload,
        "schema_version": "1",
        "source_ref": "Установка цен номенклатуры 000184",
        "created_at": CREATED,
        **fields,
    }
    return StagingRow(**values)


def price_text(price: str) -> str:
    """A price payload whose price is the JSON string ``price`` (escaped as JSON escapes it)."""
    return json.dumps({"sku": "SKU-17", "price": price, "currency": "RUB"})


# -- prices: plain decimals only ---


@pytest.mark.parametrize(
    "price",
    [
        "5.00\n",
        "5.00\r\n",
        "\n5.00",
        " 5.00",
        "5.00 ",
        "\t5.00",
        "5.00\u00a0",  # a no-break space, as a spreadsheet copies it
        "+5.00",
        "５.００",  # full-width digits
        "٥.٠٠",  # Arabic-Indic digits
        "5_000.00",
        "5.00\u2028",
    ],
)
@pytest.mark.parametrize("escaped", [True, False], ids=["json-escaped", "raw-utf8"])
def test_a_price_that_is_not_a_plain_decimal_is_refused_invalid_contract_naming_the_rule(
    price: str, escaped: bool
) -> None:
    payload = json.dumps({"sku": "SKU-17", "price": price}, ensure_ascii=escaped)
    if not escaped and re.search(r"[\x00-\x1f]", price):
        payload = price_text(price)  # raw control characters are not JSON at all
    result = validate(row(payload), KINDS)

    assert isinstance(result, Rejected), f"{price!r} was accepted as {result}"
    assert Reason.INVALID_CONTRACT == result.reason
    assert "price" in result.detail and "plain decimal" in result.detail, result.detail


@pytest.mark.parametrize(
    ("price_json", "sent"),
    [('"-0.00"', "0.00"), ("-0.00", "0.00"), ('"-0"', "0"), ("-0.0", "0.0"), ("-0", "0")],
)
def test_negative_zero_is_sent_as_zero_with_the_same_scale(price_json: str, sent: str) -> None:
    result = validate(row(f'{{"sku": "SKU-17", "price": {price_json}}}'), KINDS)

    assert isinstance(result, Accepted), result
    assert sent == json.loads(result.payload)["price"]
    plain = validate(row(f'{{"sku": "SKU-17", "price": "{sent}"}}'), KINDS)
    assert isinstance(plain, Accepted)
    assert plain.payload == result.payload, "-0 and 0 of one version are one payload"


@pytest.mark.parametrize("price", ["-0.01", "-5"])
def test_a_negative_price_is_still_refused(price: str) -> None:
    result = validate(row(price_text(price)), KINDS)

    assert isinstance(result, Rejected) and Reason.INVALID_CONTRACT == result.reason


# -- the site's current_version ---

VERSION = 184
POLICY = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=300.0)


def stale(current: Any) -> Response:
    body = json.dumps({"error": "stale", "current_version": current}).encode()
    return Response(409, body)


@pytest.mark.parametrize(
    "current",
    [2**63, 2**64, 10**30, -1, 0, -(2**63) - 1],
    ids=repr,
)
def test_a_409_with_a_version_beyond_bigint_is_an_unknown_answer_never_recorded(
    current: Any,
) -> None:
    classification = classify(stale(current), VERSION)
    decision = decide(classification, attempt=1, now=CREATED, policy=POLICY, rng=random.Random(1))

    assert Verdict.UNKNOWN == classification.verdict
    assert None is classification.site_version, "an impossible version is never recorded"
    assert (State.QUARANTINED, Reason.UNKNOWN_RESPONSE) == (decision.to_state, decision.reason)
    assert None is decision.site_version
    assert "current_version" in classification.detail


def test_a_409_with_a_version_beyond_bigint_as_a_huge_literal_is_an_unknown_answer() -> None:
    body = b'{"error": "stale", "current_version": 9223372036854775808}'

    assert Verdict.UNKNOWN == classify(Response(409, body), VERSION).verdict


def test_a_409_with_the_largest_bigint_is_still_a_newer_version_at_the_site() -> None:
    classification = classify(stale(MAX_VERSION), VERSION)

    assert (Verdict.STALE_AT_SITE, MAX_VERSION) == (
        classification.verdict,
        classification.site_version,
    )


# -- created_at on the wire ---


def wire_created_at(created_at: datetime) -> str:
    message = OutgoingMessage("m", "price", "SKU-17", 1, "{}", created_at)
    value = json.loads(body(message))["created_at"]
    assert isinstance(value, str)
    return value


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
        (datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59Z"),
        (datetime(2026, 8, 23, 7, 20, 5, 999999, tzinfo=UTC), "2026-08-23T07:20:05Z"),
        (
            datetime(2026, 8, 23, 10, 20, tzinfo=timezone(timedelta(hours=3))),
            "2026-08-23T07:20:00Z",
        ),
        (datetime(2026, 8, 23, 7, 20), "2026-08-23T07:20:00Z"),  # naive: UTC by convention
    ],
)
def test_created_at_is_sent_as_iso_8601_utc_with_a_four_digit_year(
    created_at: datetime, expected: str
) -> None:
    sent = wire_created_at(created_at)

    assert expected == sent
    assert WIRE_TIME.fullmatch(sent)


# -- the staging row held to contract 1's column limits ---


def test_the_row_contract_has_the_staging_tables_own_limits() -> None:
    declared = {name: staging.c[name].type.length for name in STAGING_TEXT_LIMITS}

    assert declared == STAGING_TEXT_LIMITS
    assert {"kind": 64, "aggregate": 200, "schema_version": 32, "source_ref": 500} == declared


@pytest.mark.parametrize(("column", "limit"), sorted(STAGING_TEXT_LIMITS.items()))
def test_a_text_longer_than_its_staging_column_allows_is_invalid_contract_naming_column_and_limit(
    column: str, limit: int
) -> None:
    posting = row('{"amount": "1.00"}', kind="financial_posting", aggregate="D-1")
    fields = {
        "kind": posting.kind,
        "aggregate": posting.aggregate,
        "schema_version": posting.schema_version,
        "source_ref": posting.source_ref,
    }
    at_limit = validate(
        row(posting.payload, **{**fields, column: (fields[column] or "x").ljust(limit, "x")}),
        KINDS,
    )
    over = validate(
        row(posting.payload, **{**fields, column: (fields[column] or "x").ljust(limit + 1, "x")}),
        KINDS,
    )

    if column in ("kind", "schema_version"):  # at the limit: a kind/schema nobody configured
        assert isinstance(at_limit, Rejected) and Reason.INVALID_CONTRACT != at_limit.reason
    else:
        assert isinstance(at_limit, Accepted), at_limit
    assert isinstance(over, Rejected)
    assert Reason.INVALID_CONTRACT == over.reason
    assert column in over.detail and str(limit) in over.detail and "too long" in over.detail


@pytest.mark.parametrize("version", [MAX_VERSION + 1, 2**64, Decimal("1.5"), 184.0, "184", True])
def test_a_version_that_is_no_positive_bigint_is_invalid_contract(version: Any) -> None:
    result = validate(row(price_text("5.00"), aggregate_version=version), KINDS)

    assert isinstance(result, Rejected)
    assert Reason.INVALID_CONTRACT == result.reason
    assert "aggregate_version" in result.detail


def test_the_largest_version_a_sender_may_write_is_accepted() -> None:
    # 2^62 - 1: the numbers from 2^62 up are the 1C packages' (contract 1)
    assert isinstance(
        validate(row(price_text("5.00"), aggregate_version=PACKAGE_VERSIONS_FROM - 1), KINDS),
        Accepted,
    )
