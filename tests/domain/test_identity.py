"""Contract 2: message identity (``identity.message_id``)."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain.identity import legacy_message_id, message_id

HEADER_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")
BIGINT_MAX = 2**63 - 1
PROPERTY = settings(max_examples=200, deadline=None, database=None)

SAMPLES: list[tuple[str, str, int]] = [
    ("price", "SKU-17", 184),
    ("financial_posting", "Поступление товаров 000184", 1),
    ("price", "Товар " * 33 + "яя", 1),  # 200 Cyrillic characters
    ("price", "🍎" * 200, BIGINT_MAX),
    ("price", "a/b\\c:d e\tf\r\ng", 2),
    ("k" * 64, "x" * 200, BIGINT_MAX),
    ("price", ".", 1),
    ("price", "_", 1),
]


@pytest.mark.parametrize(("kind", "aggregate", "version"), SAMPLES)
def test_message_id_is_deterministic(kind: str, aggregate: str, version: int) -> None:
    assert message_id(kind, aggregate, version) == message_id(kind, aggregate, version)


@pytest.mark.parametrize(("kind", "aggregate", "version"), SAMPLES)
def test_message_id_is_ascii_at_most_200_chars_and_header_safe(
    kind: str, aggregate: str, version: int
) -> None:
    identity = message_id(kind, aggregate, version)

    assert identity.isascii()
    assert len(identity) <= 200
    assert HEADER_SAFE.match(identity), identity


def test_long_cyrillic_aggregate_of_200_chars_fits() -> None:
    aggregate = "Ж" * 200

    identity = message_id("price", aggregate, 1)

    assert 200 == len(aggregate)
    assert len(identity) <= 200
    assert HEADER_SAFE.match(identity), identity


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("price", "SKU 17", 1), ("price", "SKU_17", 1)),
        (("price", "SKU.17", 1), ("price", "SKU_17", 1)),
        (("price", "Ж-1", 1), ("price", "Я-1", 1)),
        (("price", "Ж" * 200, 1), ("price", "Ж" * 199 + "Я", 1)),
        (("price", "x" * 199 + "a", 1), ("price", "x" * 199 + "b", 1)),
        (("price", "SKU-17", 1), ("price", "SKU-17", 2)),
        (("price", "SKU-17", 1), ("financial_posting", "SKU-17", 1)),
        (("price", "SKU-1", 71), ("price", "SKU-17", 1)),
        (("price", "a\nb", 1), ("price\na", "b", 1)),
        (("price", "SKU-17", BIGINT_MAX), ("price", "SKU-17", BIGINT_MAX - 1)),
    ],
)
def test_message_id_differs_for_distinct_kind_aggregate_version(
    first: tuple[str, str, int], second: tuple[str, str, int]
) -> None:
    assert message_id(*first) != message_id(*second)


def test_message_id_keeps_a_readable_aggregate() -> None:
    assert "SKU-17" in message_id("price", "SKU-17", 184)


@PROPERTY
@given(
    kind=st.sampled_from(["price", "financial_posting"]) | st.text(min_size=1, max_size=64),
    aggregate=st.text(min_size=1, max_size=200),
    version=st.integers(min_value=1, max_value=BIGINT_MAX),
)
def test_message_id_property_ascii_short_header_safe_deterministic(
    kind: str, aggregate: str, version: int
) -> None:
    identity = message_id(kind, aggregate, version)

    assert identity == message_id(kind, aggregate, version)
    assert identity.isascii()
    assert len(identity) <= 200
    assert HEADER_SAFE.match(identity), identity


@PROPERTY
@given(
    aggregates=st.lists(st.text(min_size=1, max_size=200), min_size=2, max_size=2, unique=True),
    version=st.integers(min_value=1, max_value=BIGINT_MAX),
)
def test_message_id_property_distinct_aggregates_give_distinct_ids(
    aggregates: list[str], version: int
) -> None:
    first, second = aggregates

    assert message_id("price", first, version) != message_id("price", second, version)


@PROPERTY
@given(
    versions=st.lists(
        st.integers(min_value=1, max_value=BIGINT_MAX), min_size=2, max_size=2, unique=True
    ),
    aggregate=st.text(min_size=1, max_size=200),
)
def test_message_id_property_distinct_versions_give_distinct_ids(
    versions: list[int], aggregate: str
) -> None:
    first, second = versions

    assert message_id("price", aggregate, first) != message_id("price", aggregate, second)


def test_a_cyrillic_aggregate_reads_in_latin_letters_not_underscores() -> None:
    """GOST 7.79-2000 system B without its marks: people read ``Kofe_molotyj_roznicza``
    where the id said ``____________________``; the hash is what it was."""
    identity = message_id("price", "Кофе молотый/розница", 1)

    assert "price.Kofe_molotyj_roznicza.v1.afb302e30b335f5b4271d5f5" == identity
    assert "ZhZh" in message_id("price", "Ж" * 200, 1)
    assert "Shhuka_Yolka_Ivi-Ye" in message_id("price", "Щука Ёлка ЪЬІви-Є", 1)


def test_the_legacy_id_is_the_formula_every_release_before_2026_12_used() -> None:
    """Messages made before keep their ids (intake finds them by this): pinned to what the
    formula gave then."""
    assert "price.____________________.v1.afb302e30b335f5b4271d5f5" == legacy_message_id(
        "price", "Кофе молотый/розница", 1
    )
    assert f"price.{'_' * 80}.v1.666317415873cbfbd7b07d93" == legacy_message_id(
        "price", "Ж" * 200, 1
    )


@PROPERTY
@given(
    kind=st.text(alphabet=st.characters(max_codepoint=0x3FF), min_size=1, max_size=64),
    aggregate=st.text(alphabet=st.characters(max_codepoint=0x3FF), min_size=1, max_size=200),
    version=st.integers(min_value=1, max_value=BIGINT_MAX),
)
def test_an_id_without_cyrillic_is_what_it_was(kind: str, aggregate: str, version: int) -> None:
    """Only a Cyrillic letter reads otherwise now: every other intent's id is unchanged."""
    assert legacy_message_id(kind, aggregate, version) == message_id(kind, aggregate, version)
