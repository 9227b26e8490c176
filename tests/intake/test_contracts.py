"""Contract 1: what a staging row becomes (``contracts.validate``).

Every test name is one promise of section 1 of the contract.
"""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain.identity import message_id
from exchange.domain.policy import DEFAULT_KINDS, Policy
from exchange.domain.reasons import Reason
from exchange.intake import contracts
from exchange.intake.contracts import Accepted, Rejected, StagingRow, validate

KINDS: dict[str, Policy] = dict(DEFAULT_KINDS)
CREATED = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
PROPERTY = settings(max_examples=200, deadline=None, database=None)


def row(
    payload: str,
    *,
    kind: str = "price",
    aggregate: str = "SKU-17",
    version: int = 184,
    schema_version: str = "1",
) -> StagingRow:
    return StagingRow(
        id=1,
        kind=kind,
        aggregate=aggregate,
        aggregate_version=version,
        payload=payload,
        schema_version=schema_version,
        source_ref="Установка цен номенклатуры 000184",
        created_at=CREATED,
    )


def price_payload(**fields: Any) -> str:
    return json.dumps({"sku": "SKU-17", "price": "840.00", **fields}, ensure_ascii=False)


def accepted(result: Accepted | Rejected) -> Accepted:
    assert isinstance(result, Accepted), f"expected Accepted, got {result!r}"
    return result


def sent(result: Accepted | Rejected) -> dict[str, Any]:
    """The canonical payload, read the way a careful site reads money."""
    parsed = json.loads(accepted(result).payload, parse_float=Decimal)
    assert isinstance(parsed, dict)
    return parsed


def reason_of(result: Accepted | Rejected) -> Reason:
    assert isinstance(result, Rejected), f"expected Rejected, got {result!r}"
    return result.reason


# -- valid prices ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price_json", "expected_text"),
    [
        ('"840.00"', "840.00"),
        ("840.00", "840.00"),
        ('"840"', "840"),
        ("840", "840"),
        ('"0"', "0"),
        ("0", "0"),
        ('"0.0001"', "0.0001"),
        ("0.0001", "0.0001"),
        ('"999999999999.9999"', "999999999999.9999"),
        ("999999999999.9999", "999999999999.9999"),
        ('"1234.5600"', "1234.5600"),
        ("0.1", "0.1"),
    ],
)
def test_valid_price_is_accepted_as_exact_decimal_with_the_same_digits(
    price_json: str, expected_text: str
) -> None:
    payload = '{"sku": "SKU-17", "price": ' + price_json + "}"

    result = validate(row(payload), KINDS)

    assert expected_text == sent(result)["price"]
    assert Decimal(expected_text) == Decimal(sent(result)["price"])


def test_valid_price_is_sent_with_exactly_the_contract_fields() -> None:
    payload = '{"sku": "SKU-17", "price": "840.00", "currency": "RUB", "price_type": "retail"}'

    result = validate(row(payload), KINDS)

    expected = {"sku": "SKU-17", "price": "840.00", "currency": "RUB", "price_type": "retail"}
    assert expected == sent(result)


def test_price_currency_defaults_to_rub_and_price_type_to_retail() -> None:
    result = validate(row('{"sku": "SKU-17", "price": 840.00}'), KINDS)

    assert {"sku": "SKU-17", "price": "840.00", "currency": "RUB", "price_type": "retail"} == sent(
        result
    )


def test_price_keeps_given_currency_and_price_type() -> None:
    result = validate(row(price_payload(currency="USD", price_type="wholesale")), KINDS)

    assert ("USD", "wholesale") == (sent(result)["currency"], sent(result)["price_type"])


def test_price_is_sent_as_a_decimal_string_never_as_a_json_number() -> None:
    result = validate(row('{"sku": "SKU-17", "price": 840.10}'), KINDS)

    parsed = json.loads(accepted(result).payload)
    assert "840.10" == parsed["price"]


def test_accepted_row_carries_the_derived_message_id() -> None:
    result = validate(row(price_payload(), version=7), KINDS)

    assert message_id("price", "SKU-17", 7) == accepted(result).message_id


def test_cyrillic_and_emoji_survive_in_a_price() -> None:
    aggregate = "Товар-№17 🍎"
    payload = json.dumps(
        {"sku": aggregate, "price": "840.00", "price_type": "розница"}, ensure_ascii=False
    )

    result = validate(row(payload, aggregate=aggregate), KINDS)

    assert (aggregate, "розница") == (sent(result)["sku"], sent(result)["price_type"])


# -- invalid rows: invalid-contract ----------------------------------------------------------

SKU_101 = "S" * 101
INVALID_PAYLOADS: list[tuple[str, str, str]] = [
    # (case, payload, aggregate)
    ("not-json", "not json at all", "SKU-17"),
    ("empty-text", "", "SKU-17"),
    ("truncated-json", '{"sku": "SKU-17", "price": "840.00"', "SKU-17"),
    ("json-array", '["SKU-17", "840.00"]', "SKU-17"),
    ("json-string", '"840.00"', "SKU-17"),
    ("json-number", "840", "SKU-17"),
    ("json-null", "null", "SKU-17"),
    ("duplicate-keys", '{"sku": "SKU-17", "price": "1.00", "price": "2.00"}', "SKU-17"),
    ("duplicate-nested-keys", '{"sku": "SKU-17", "price": "1", "x": {"a": 1, "a": 2}}', "SKU-17"),
    ("nan-number", '{"sku": "SKU-17", "price": NaN}', "SKU-17"),
    ("infinity-number", '{"sku": "SKU-17", "price": Infinity}', "SKU-17"),
    ("minus-infinity-number", '{"sku": "SKU-17", "price": -Infinity}', "SKU-17"),
    ("nan-string", '{"sku": "SKU-17", "price": "NaN"}', "SKU-17"),
    ("infinity-string", '{"sku": "SKU-17", "price": "Infinity"}', "SKU-17"),
    ("exponent-number", '{"sku": "SKU-17", "price": 8.4e2}', "SKU-17"),
    ("exponent-number-upper", '{"sku": "SKU-17", "price": 8E2}', "SKU-17"),
    ("exponent-number-negative", '{"sku": "SKU-17", "price": 840e-2}', "SKU-17"),
    ("exponent-string", '{"sku": "SKU-17", "price": "8.4e2"}', "SKU-17"),
    ("exponent-string-upper", '{"sku": "SKU-17", "price": "8.4E+2"}', "SKU-17"),
    ("negative-string", '{"sku": "SKU-17", "price": "-1.00"}', "SKU-17"),
    ("negative-number", '{"sku": "SKU-17", "price": -0.01}', "SKU-17"),
    ("ten-to-twelve-string", '{"sku": "SKU-17", "price": "1000000000000"}', "SKU-17"),
    ("ten-to-twelve-number", '{"sku": "SKU-17", "price": 1000000000000}', "SKU-17"),
    ("ten-to-twelve-decimals", '{"sku": "SKU-17", "price": "1000000000000.0000"}', "SKU-17"),
    ("above-ten-to-twelve", '{"sku": "SKU-17", "price": 99999999999999999999}', "SKU-17"),
    ("five-decimals-string", '{"sku": "SKU-17", "price": "840.00001"}', "SKU-17"),
    ("five-decimals-number", '{"sku": "SKU-17", "price": 0.00001}', "SKU-17"),
    ("five-zero-decimals", '{"sku": "SKU-17", "price": "840.00000"}', "SKU-17"),
    ("bool-true-price", '{"sku": "SKU-17", "price": true}', "SKU-17"),
    ("bool-false-price", '{"sku": "SKU-17", "price": false}', "SKU-17"),
    ("null-price", '{"sku": "SKU-17", "price": null}', "SKU-17"),
    ("list-price", '{"sku": "SKU-17", "price": ["840.00"]}', "SKU-17"),
    ("object-price", '{"sku": "SKU-17", "price": {"value": "840.00"}}', "SKU-17"),
    ("empty-string-price", '{"sku": "SKU-17", "price": ""}', "SKU-17"),
    ("spaced-string-price", '{"sku": "SKU-17", "price": " 840.00"}', "SKU-17"),
    ("comma-string-price", '{"sku": "SKU-17", "price": "840,00"}', "SKU-17"),
    ("missing-price", '{"sku": "SKU-17"}', "SKU-17"),
    ("missing-sku", '{"price": "840.00"}', "SKU-17"),
    ("extra-field", '{"sku": "SKU-17", "price": "840.00", "discount": "5"}', "SKU-17"),
    ("sku-not-aggregate", '{"sku": "SKU-18", "price": "840.00"}', "SKU-17"),
    ("sku-differs-in-case", '{"sku": "sku-17", "price": "840.00"}', "SKU-17"),
    ("sku-empty", '{"sku": "", "price": "840.00"}', "SKU-17"),
    ("sku-over-100-chars", '{"sku": "' + SKU_101 + '", "price": "840.00"}', SKU_101),
    ("sku-control-char", '{"sku": "SKU\\u000017", "price": "840.00"}', "SKU\x0017"),
    ("sku-newline", '{"sku": "SKU\\n17", "price": "840.00"}', "SKU\n17"),
    ("sku-not-a-string", '{"sku": 17, "price": "840.00"}', "17"),
    ("currency-lower-case", '{"sku": "SKU-17", "price": "840.00", "currency": "rub"}', "SKU-17"),
    ("currency-four-letters", '{"sku": "SKU-17", "price": "1", "currency": "RUBL"}', "SKU-17"),
    ("currency-two-letters", '{"sku": "SKU-17", "price": "1", "currency": "RU"}', "SKU-17"),
    ("currency-empty", '{"sku": "SKU-17", "price": "1", "currency": ""}', "SKU-17"),
    ("currency-number", '{"sku": "SKU-17", "price": "1", "currency": 643}', "SKU-17"),
    ("currency-null", '{"sku": "SKU-17", "price": "1", "currency": null}', "SKU-17"),
    ("price-type-empty", '{"sku": "SKU-17", "price": "1", "price_type": ""}', "SKU-17"),
    ("price-type-blank", '{"sku": "SKU-17", "price": "1", "price_type": "  "}', "SKU-17"),
]


@pytest.mark.parametrize(
    ("payload", "aggregate"),
    [(payload, aggregate) for _, payload, aggregate in INVALID_PAYLOADS],
    ids=[case for case, _, _ in INVALID_PAYLOADS],
)
def test_price_payload_breaking_the_rules_is_rejected_invalid_contract(
    payload: str, aggregate: str
) -> None:
    result = validate(row(payload, aggregate=aggregate), KINDS)

    assert Reason.INVALID_CONTRACT == reason_of(result)


@pytest.mark.parametrize("version", [0, -1, -(2**63)])
def test_version_below_one_is_rejected_invalid_contract(version: int) -> None:
    result = validate(row(price_payload(), version=version), KINDS)

    assert Reason.INVALID_CONTRACT == reason_of(result)


@pytest.mark.parametrize("kind", ["price", "financial_posting"])
@pytest.mark.parametrize("aggregate", ["", "   ", "SKU\x0017"], ids=["empty", "blank", "control"])
def test_empty_or_unprintable_aggregate_is_rejected_invalid_contract(
    kind: str, aggregate: str
) -> None:
    payload = json.dumps({"sku": aggregate, "price": "840.00"})

    result = validate(row(payload, kind=kind, aggregate=aggregate), KINDS)

    assert Reason.INVALID_CONTRACT == reason_of(result)


def test_rejection_keeps_the_row_and_says_why() -> None:
    bad = row('{"sku": "SKU-17", "price": "-1"}')

    result = validate(bad, KINDS)

    assert isinstance(result, Rejected)
    assert bad == result.row
    assert "price" in result.detail


# -- kinds and schemas ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["stock", "Price", "financial_refund", ""])
def test_kind_not_configured_is_rejected_unknown_kind(kind: str) -> None:
    result = validate(row(price_payload(), kind=kind), KINDS)

    assert Reason.UNKNOWN_KIND == reason_of(result)


def test_configured_extra_kind_is_accepted_and_passed_through() -> None:
    kinds = {**KINDS, "stock": Policy.LATEST_WINS}

    result = validate(row('{"qty": 5}', kind="stock", aggregate="SKU-17"), kinds)

    assert {"qty": 5} == sent(result)


@pytest.mark.parametrize("kind", ["price", "financial_posting"])
@pytest.mark.parametrize("schema_version", ["2", "0", "1.0", ""])
def test_schema_version_other_than_1_is_rejected_unsupported_schema(
    kind: str, schema_version: str
) -> None:
    result = validate(row(price_payload(), kind=kind, schema_version=schema_version), KINDS)

    assert Reason.UNSUPPORTED_SCHEMA == reason_of(result)


# -- financial postings ---------------------------------------------------------------------

POSTING = (
    '{"z_amount": 0.1, "tiny": 1e-30, "big": 12345678901234567890.123456789, '
    '"int": 123456789012345678901234567890, "text": "Оплата 💰", "flag": true, "none": null, '
    '"lines": [{"b": 0.10, "a": "x"}, 2.50]}'
)


def test_posting_numbers_keep_their_exact_decimal_value() -> None:
    result = validate(row(POSTING, kind="financial_posting", aggregate="DOC-1"), KINDS)

    payload = sent(result)
    assert Decimal("0.1") == payload["z_amount"]
    assert Decimal("1e-30") == payload["tiny"]
    assert Decimal("12345678901234567890.123456789") == payload["big"]
    assert 123456789012345678901234567890 == payload["int"]
    assert [{"a": "x", "b": Decimal("0.10")}, Decimal("2.50")] == payload["lines"]


def test_posting_big_decimal_is_kept_digit_for_digit_in_the_canonical_text() -> None:
    result = validate(row(POSTING, kind="financial_posting", aggregate="DOC-1"), KINDS)

    assert "12345678901234567890.123456789" in accepted(result).payload
    assert "123456789012345678901234567890" in accepted(result).payload


def test_posting_allows_exponent_numbers() -> None:
    result = validate(
        row('{"amount": 1e-30, "rate": 8.4E2}', kind="financial_posting", aggregate="DOC-1"),
        KINDS,
    )

    assert {"amount": Decimal("1e-30"), "rate": Decimal("840")} == sent(result)


def test_posting_passes_other_values_through_unchanged() -> None:
    result = validate(row(POSTING, kind="financial_posting", aggregate="DOC-1"), KINDS)

    payload = sent(result)
    assert ("Оплата 💰", True, None) == (payload["text"], payload["flag"], payload["none"])


def test_posting_canonical_payload_has_keys_sorted() -> None:
    result = validate(row(POSTING, kind="financial_posting", aggregate="DOC-1"), KINDS)

    keys = list(sent(result))
    assert sorted(keys) == keys
    assert ["a", "b"] == list(sent(result)["lines"][0])


def test_posting_canonical_payload_is_the_same_for_reordered_keys() -> None:
    first = validate(row('{"a": 1.50, "b": "x"}', kind="financial_posting"), KINDS)
    second = validate(row('{"b": "x", "a": 1.50}', kind="financial_posting"), KINDS)

    assert accepted(first).payload == accepted(second).payload


@pytest.mark.parametrize(
    "payload",
    [
        "[1, 2]",
        "42",
        "not json",
        '{"a": 1, "a": 2}',
        '{"amount": NaN}',
        '{"amount": Infinity}',
    ],
)
def test_posting_that_is_not_a_json_object_is_rejected_invalid_contract(payload: str) -> None:
    result = validate(row(payload, kind="financial_posting", aggregate="DOC-1"), KINDS)

    assert Reason.INVALID_CONTRACT == reason_of(result)


@pytest.mark.parametrize("kind", ["financial_posting", "price"])
@pytest.mark.parametrize("escape", ["\\ud800", "\\udc00x"], ids=["high", "low"])
def test_accepted_payload_is_always_valid_utf8_text(kind: str, escape: str) -> None:
    # A JSON text may spell a lone UTF-16 surrogate as an escape. Whatever the row holds,
    # an accepted payload must be text the database and the site can take (UTF-8);
    # otherwise the row must be rejected invalid-contract, not break intake.
    if kind == "price":
        payload = '{"sku": "SKU-17", "price": "840.00", "price_type": "r' + escape + '"}'
    else:
        payload = '{"comment": "x' + escape + '"}'

    result = validate(row(payload, kind=kind), KINDS)

    if isinstance(result, Accepted):
        result.payload.encode("utf-8")  # must not raise
    else:
        assert Reason.INVALID_CONTRACT == result.reason


def test_surrogate_pair_escape_is_read_as_one_character() -> None:
    result = validate(row('{"comment": "\\ud83c\\udf4e"}', kind="financial_posting"), KINDS)

    assert {"comment": "🍎"} == sent(result)


# -- properties ------------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
PRICE_FIELD_VALUES = JSON_SCALARS | st.sampled_from(
    ["840.00", "8.4e2", "-1", "1e12", "0.00001", "NaN", "SKU-17", "RUB", "rub", ""]
)
PRICE_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "sku": st.sampled_from(["SKU-17", ""]) | st.text(max_size=5),
        "price": PRICE_FIELD_VALUES,
        "currency": PRICE_FIELD_VALUES,
        "price_type": PRICE_FIELD_VALUES,
        "extra": JSON_SCALARS,
    },
)
PAYLOADS = (
    st.text(max_size=60)
    | JSON_VALUES.map(json.dumps)
    | PRICE_LIKE.map(json.dumps)
    | st.sampled_from(
        ['{"price": NaN}', '{"sku": "SKU-17", "price": 1e999999}', "[" * 5000, "{" * 100000]
    )
)
ROWS = st.builds(
    StagingRow,
    id=st.integers(min_value=1, max_value=2**63 - 1),
    kind=st.sampled_from(["price", "financial_posting"]) | st.text(max_size=10),
    aggregate=st.sampled_from(["SKU-17", "", " "]) | st.text(max_size=120),
    aggregate_version=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    payload=PAYLOADS,
    schema_version=st.sampled_from(["1", "2"]) | st.text(max_size=3),
    source_ref=st.none() | st.text(max_size=20),
    created_at=st.just(CREATED),
)


@PROPERTY
@given(staging_row=ROWS)
def test_validate_never_raises_and_always_decides(staging_row: StagingRow) -> None:
    result = validate(staging_row, KINDS)

    assert isinstance(result, Accepted | Rejected)
    assert staging_row == result.row


PRICES = st.decimals(
    min_value=0,
    max_value=Decimal("999999999999.9999"),
    places=4,
    allow_nan=False,
    allow_infinity=False,
)


@PROPERTY
@given(price=PRICES, as_number=st.booleans())
def test_any_price_in_range_with_at_most_four_places_is_accepted_exactly(
    price: Decimal, as_number: bool
) -> None:
    text = format(price, "f")
    literal = text if as_number else json.dumps(text)
    payload = '{"sku": "SKU-17", "price": ' + literal + "}"

    result = validate(row(payload), KINDS)

    sent_price = sent(result)["price"]
    assert text == sent_price
    assert price == Decimal(sent_price)


def test_a_check_that_trips_over_unexpected_data_still_gives_a_quarantine_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """validate never raises for bad data: a check's own ValueError, TypeError or
    RecursionError on data it did not expect rejects the row instead of failing the chunk."""

    def trips(row: StagingRow) -> tuple[str, None]:
        raise TypeError("unexpected shape")

    monkeypatch.setattr(contracts, "_canonical", trips)
    result = validate(price_row_for_test(), KINDS)
    assert isinstance(result, Rejected)
    assert (
        Reason.INVALID_CONTRACT,
        "the row could not be checked: TypeError: unexpected shape",
    ) == (
        result.reason,
        result.detail,
    )


def price_row_for_test() -> StagingRow:
    payload = '{"sku": "SKU-17", "price": "1.00"}'
    return StagingRow(1, "price", "SKU-17", 1, payload, "1", None, CREATED)


# -- the limits of issue 21: versions below 2^62, nesting at most 64, text that is Unicode -----

PRICE_TEXT = '{"sku": "SKU-17", "price": "840.00"}'


@pytest.mark.parametrize(
    ("version", "package", "accepted"),
    [
        (2**62 - 1, False, True),
        (2**62, False, False),
        (2**63 - 1, False, False),
        (2**62, True, True),  # a 1C package's number: the numbers from 2^62 up are theirs
        (2**63 - 1, True, True),
    ],
)
def test_a_version_from_2_62_up_is_a_packages_only(
    version: int, package: bool, accepted: bool
) -> None:
    staged = StagingRow(
        1, "price", "SKU-17", version, PRICE_TEXT, "1", None, CREATED, package=package
    )
    result = validate(staged, KINDS)
    assert isinstance(result, Accepted) is accepted, result
    if not accepted:
        assert isinstance(result, Rejected) and Reason.INVALID_CONTRACT == result.reason
        assert "2^62" in result.detail and str(2**62) in result.detail


def _nested(depth: int) -> str:
    """A price payload whose JSON nests ``depth`` levels (the object itself is level 1)."""
    inner = "1"
    for _ in range(depth - 1):
        inner = '{"x": ' + inner + "}"
    return '{"sku": "SKU-17", "price": "1", "extra": ' + inner + "}"


@pytest.mark.parametrize(
    ("payload", "verdict"),
    [
        ('{"a": ' * 63 + "1" + "}" * 63, "accepted"),  # 63 levels
        ('{"a": ' * 64 + "1" + "}" * 64, "accepted"),  # 64: the limit
        ('{"a": ' * 65 + "1" + "}" * 65, "65 levels"),
        ('{"a": ' + "[" * 969 + "]" * 969 + "}", "970 levels"),
        ("[" * 100_000 + "]" * 100_000, "100000 levels"),  # refused without recursion
        ("{" * 100_000, "100000 levels"),  # not even JSON: its depth alone refuses it
        ('{"a": "' + "[" * 500 + '"}', "accepted"),  # brackets inside a string do not count
        ('{"a": "\\"' + "{" * 500 + '"}', "accepted"),  # nor after an escaped quote
    ],
)
def test_a_payload_nests_at_most_64_levels(payload: str, verdict: str) -> None:
    result = validate(row(payload, kind="financial_posting"), KINDS)
    if verdict == "accepted":
        assert isinstance(result, Accepted), result
    else:
        assert isinstance(result, Rejected) and Reason.INVALID_CONTRACT == result.reason
        assert verdict in result.detail and "at most 64" in result.detail, result.detail


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ('{"a": "\\\\"}' + "{" * 70, 70),  # an escaped backslash, then the closing quote
        ("{" * 65 + '"' + "{" * 100, 65),  # a string left open runs to the end of the text
        ("{" * 65 + '"' + '\\"' * 10 + "{" * 100, 65),
        ("{" * 65 + '"\\', 65),  # an escape cut by the end of the text
        ("[" * 40 + "{" * 40 + "]" * 40 + "}" * 40 + "[[{" * 30, 90),  # runs of either
    ],
)
def test_nesting_reads_open_strings_and_runs_of_brackets(text: str, depth: int) -> None:
    assert contracts.nesting(text) == depth


@pytest.mark.timing
@pytest.mark.parametrize(
    "shape",
    [
        lambda n: "{" * 65 + '"' + '\\"' * n,  # R3-1: an open string of escaped quotes
        lambda n: "{" * 65 + '"' * (2 * n),
        lambda n: "[" * (2 * n),
        lambda n: "{" * 65 + "[]" * n,
        lambda n: "{" * 65 + '"a\\"' * n,
    ],
    ids=["escaped-quotes", "quotes", "open-brackets", "bracket-pairs", "strings"],
)
def test_measuring_nesting_is_linear_in_the_text(shape: Callable[[int], str]) -> None:
    """R3-1: every staging row, broker message and JSON intake body is measured by
    ``contracts.nesting`` before it is parsed, so its cost must grow with the text, not with its
    square (an open string of ``\\"`` once made it rescan the rest of the text from each
    quote: 32 KB took seconds). Sixteen times the text may cost at most 64 times as much: linear
    is 16, quadratic 256. Best of several runs, with 5 ms to spare for a busy machine."""

    def best(text: str, runs: int) -> float:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            contracts.nesting(text)
            times.append(time.perf_counter() - started)
        return min(times)

    once, sixteen = shape(1_000), shape(16_000)
    # Seven runs of the long text, not three: a loaded CI run (load 8) once had every one of
    # three slowed past the bound (55 ms against 36), where quadratic would be ~125 ms.
    assert best(sixteen, 7) < 64 * best(once, 9) + 0.005


def test_a_price_payload_nested_too_deep_gets_the_same_verdict_as_a_posting() -> None:
    result = validate(row(_nested(65)), KINDS)
    assert isinstance(result, Rejected) and "nests 65 levels" in result.detail


@pytest.mark.parametrize(
    ("field", "value"),
    [("aggregate", "SKU-\ud800"), ("source_ref", "doc \udfff"), ("kind", "price\ud800")],
)
def test_text_with_a_lone_surrogate_is_invalid_contract_naming_the_field(
    field: str, value: str
) -> None:
    fields: dict[str, Any] = {
        "id": 1,
        "kind": "price",
        "aggregate": "SKU-17",
        "aggregate_version": 1,
        "payload": PRICE_TEXT,
        "schema_version": "1",
        "source_ref": None,
        "created_at": CREATED,
    }
    fields[field] = value
    result = validate(StagingRow(**fields), KINDS)
    assert isinstance(result, Rejected) and Reason.INVALID_CONTRACT == result.reason
    assert field in result.detail and "surrogate" in result.detail
