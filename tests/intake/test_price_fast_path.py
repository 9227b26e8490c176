"""The fast path for ordinary price payloads (``contracts._plain_price``) gives exactly the
verdict of the full path (JSON with duplicate-key checks, then the ``PriceV1`` model), or
steps aside; it never accepts what the full path rejects.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import contracts
from exchange.intake.contracts import ContractError, Rejected, StagingRow, validate

PROPERTY = settings(max_examples=300, deadline=None, database=None)


def price_row(payload: str, aggregate: str = "SKU-17") -> StagingRow:
    return StagingRow(
        1, "price", aggregate, 3, payload, "1", None, datetime(2026, 8, 23, tzinfo=UTC)
    )


def full_verdict(row: StagingRow) -> str | None:
    """The canonical payload by the full path, or None when it rejects the row."""
    try:
        return contracts._full_payload(row)
    except ContractError:
        return None


@pytest.mark.parametrize(
    "payload",
    [
        '{"sku": "SKU-17", "price": "840.00"}',
        '{"sku": "SKU-17", "price": "0", "currency": "USD", "price_type": "wholesale"}',
        '{"price_type": "розница", "price": "999999999999.9999", "sku": "SKU-17"}',
        '{"sku":"SKU-17","price":"1234.5600","currency":"RUB"}',
    ],
)
def test_ordinary_price_takes_the_fast_path_and_matches_the_full_path(payload: str) -> None:
    row = price_row(payload)

    fast = contracts._plain_price(row)

    assert fast is not None, "an ordinary price payload should not need the full path"
    assert full_verdict(row) == fast


@pytest.mark.parametrize(
    "payload",
    [
        '{"sku": "SKU-17", "price": "1.00", "price": "2.00"}',  # duplicate key
        '{"sku": "SKU-17", "price": "1.00", "\\u0070rice": "2.00"}',  # duplicate via an escape
        '{"sku": "SKU-17", "price": "840.00001"}',
        '{"sku": "SKU-17", "price": "-1"}',
        '{"sku": "SKU-17", "price": "1000000000000"}',
        '{"sku": "SKU-17", "price": "8.4e2"}',
        '{"sku": "SKU-17", "price": "NaN"}',
        '{"sku": "SKU-17", "price": 840.00}',  # a JSON number: the full path decides
        '{"sku": "SKU-17", "price": true}',
        '{"sku": "SKU-18", "price": "1"}',
        '{"sku": "SKU-17", "price": "1", "currency": "rub"}',
        '{"sku": "SKU-17", "price": "1", "price_type": "  "}',
        '{"sku": "SKU-17", "price": "1", "discount": "5"}',
        '{"sku": "SKU-17"}',
        '{"sku": "SKU-17", "price": "1", "price_type": "\x7f"}',
        '["SKU-17", "1"]',
        "not json",
    ],
)
def test_fast_path_never_accepts_what_the_full_path_rejects(payload: str) -> None:
    row = price_row(payload)

    fast = contracts._plain_price(row)

    assert fast is None or fast == full_verdict(row)
    if full_verdict(row) is None:
        assert fast is None


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
_PRICES = st.one_of(
    st.from_regex(r"[1-9][0-9]{0,5}(\.[0-9]{1,4})?", fullmatch=True),
    st.from_regex(r"-?[0-9]{1,14}(\.[0-9]{0,6})?", fullmatch=True),
    st.sampled_from(["840.00", "0", "0.0001", "999999999999.9999", "1e3", "NaN", " 1", "1,5"]),
)
_VALUES = st.one_of(
    _TEXT,
    _PRICES,
    st.sampled_from(["SKU-17", "RUB", "USD", "rub", "retail", "sku", "price", " ", "\x7f"]),
    st.integers(),
    st.booleans(),
    st.none(),
)
_KEYS = st.sampled_from(["sku", "price", "currency", "price_type", "extra"])


def dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def price_like_pairs(draw: st.DrawFn) -> list[tuple[str, object]]:
    """Mostly valid prices, with every kind of flaw now and then; keys may repeat."""
    flawed = st.integers(0, 4).map(lambda n: n == 0)
    fields: dict[str, object] = {
        "sku": draw(_VALUES) if draw(flawed) else "SKU-17",
        "price": draw(_VALUES) if draw(flawed) else draw(_PRICES),
    }
    for key, values in [
        ("currency", st.sampled_from(["RUB", "USD", "EUR", "RUB", "usd", "", 643, None])),
        ("price_type", st.sampled_from(["retail", "розница", "retail", " ", "", None])),
        ("extra", _VALUES),
    ]:
        if draw(st.booleans()):
            fields[key] = draw(values)
    pairs = list(fields.items())
    if draw(flawed):
        pairs.append((draw(_KEYS), draw(_VALUES)))
    return draw(st.permutations(pairs))


@given(
    pairs=price_like_pairs(),
    spacing=st.sampled_from([(", ", ": "), (",", ":"), (", ", ": "), (" , ", " :\n")]),
)
@PROPERTY
def test_fast_path_agrees_with_the_full_path_on_any_price_like_object(
    pairs: list[tuple[str, object]], spacing: tuple[str, str]
) -> None:
    # Written by hand so that keys may repeat, as 1C could write them.
    items, colon = spacing
    payload = "{" + items.join(f"{json.dumps(k)}{colon}{dump(v)}" for k, v in pairs) + "}"
    row = price_row(payload)

    fast = contracts._plain_price(row)

    if fast is not None:
        assert full_verdict(row) == fast


@given(
    pairs=price_like_pairs(),
    spacing=st.sampled_from([(", ", ": "), (",", ":"), (" , ", " :\n")]),
)
@PROPERTY
def test_an_accepted_price_carries_the_sku_and_price_type_its_payload_names(
    pairs: list[tuple[str, object]], spacing: tuple[str, str]
) -> None:
    """Intake fixes a price aggregate's identity from ``Accepted.price`` without parsing the
    payload again: by either path, it is exactly what the canonical payload says."""
    items, colon = spacing
    payload = "{" + items.join(f"{json.dumps(k)}{colon}{dump(v)}" for k, v in pairs) + "}"
    for aggregate in ("SKU-17", "SKU-17/retail", "SKU-17/розница"):
        verdict = validate(price_row(payload, aggregate), dict(DEFAULT_KINDS))
        if isinstance(verdict, Rejected):
            continue
        wire = json.loads(verdict.payload)
        assert verdict.price == (wire["sku"], wire["price_type"])


def test_a_posting_carries_no_price_identity() -> None:
    row = StagingRow(
        1,
        "financial_posting",
        "DOC-1",
        1,
        '{"document": "DOC-1", "line": 1, "amount": "1.00"}',
        "1",
        None,
        datetime(2026, 8, 23, tzinfo=UTC),
    )
    verdict = validate(row, dict(DEFAULT_KINDS))
    assert not isinstance(verdict, Rejected)
    assert verdict.price is None


@pytest.mark.parametrize("kind", ["price", "financial_posting"])
@pytest.mark.parametrize(
    "payload",
    [
        "[" * 5000,
        "{" * 100_000,
        "[" * 3000 + "]" * 3000,
        '{"sku": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
    ids=["open-arrays", "open-objects", "closed-arrays", "nested-in-a-field"],
)
def test_json_nested_past_the_recursion_limit_is_a_quarantine_reason_not_a_crash(
    kind: str, payload: str
) -> None:
    """The fast path let json's RecursionError out of validate (hypothesis found it in CI):
    one such row would have failed its intake chunk, and every row behind it, every cycle."""
    result = validate(
        StagingRow(1, kind, "SKU-17", 1, payload, "1", None, datetime(2026, 1, 1, tzinfo=UTC)),
        DEFAULT_KINDS,
    )
    assert isinstance(result, Rejected)
    # contract 1: nested deeper than 64 levels, refused by its depth before any parser runs
    assert "levels deep" in result.detail and "at most 64" in result.detail
