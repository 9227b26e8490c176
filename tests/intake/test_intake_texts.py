"""What the intake says of what it refuses is one plain sentence (the fresh review of issue 24
item 4: «the body names a key 'a' appears twice» ran two sentences into one). The JSON
intake, the brokers' sources and a staging row's payload say a key written twice alike."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.contracts import Rejected, StagingRow, validate
from exchange.intake.intents import BodyError, parse_body
from exchange.intake.sources.common import intents_of


def test_a_body_naming_a_key_twice_says_which_key_in_one_sentence() -> None:
    with pytest.raises(BodyError) as raised:
        parse_body(b'{"intents": [{"kind": "price", "kind": "price"}]}', 1)
    assert "the body names key 'kind' twice in one object" == str(raised.value)
    with pytest.raises(BodyError) as raised:
        intents_of(b'{"a": 1, "a": 2}', 10)  # a broker's message: the same parser
    assert "the body names key 'a' twice in one object" == str(raised.value)


def test_a_payload_naming_a_key_twice_says_it_in_one_sentence() -> None:
    row = StagingRow(
        id=1,
        kind="price",
        aggregate="A/retail",
        aggregate_version=1,
        payload='{"sku": "A", "sku": "B", "price": "1.00", "price_type": "retail"}',
        schema_version="1",
        source_ref=None,
        created_at=datetime.now(UTC),
    )
    verdict = validate(row, dict(DEFAULT_KINDS))
    assert isinstance(verdict, Rejected)
    assert "payload is not valid JSON: key 'sku' appears twice in one object" == verdict.detail


def test_a_body_nested_too_deep_names_its_own_limit_and_the_payloads() -> None:
    with pytest.raises(BodyError) as raised:
        parse_body(b"[" * 300 + b"]" * 300, 1)
    assert (
        "the body nests 300 levels deep, more than the 256 allowed (a payload may nest at most 64)"
    ) == str(raised.value)
