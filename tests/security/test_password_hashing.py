"""The cost of an operator's password hash (contract 11): production hashes with argon2id at
RFC 9106's low-memory parameters. The other tests hash at argon2's minimum
(tests/support/quickhash.py), so this is where the production cost is held."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from argon2 import Type
from argon2.profiles import RFC_9106_LOW_MEMORY
from quickhash import PRODUCTION, QUICK
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.ops import operators

SECRET = "s3cret-Password!"


def test_production_hashes_with_argon2id_at_rfc_9106s_low_memory_parameters() -> None:
    assert PRODUCTION is not QUICK
    assert (PRODUCTION.type, PRODUCTION.time_cost, PRODUCTION.memory_cost) == (
        Type.ID,
        RFC_9106_LOW_MEMORY.time_cost,
        RFC_9106_LOW_MEMORY.memory_cost,
    )
    assert PRODUCTION.parallelism == RFC_9106_LOW_MEMORY.parallelism
    assert PRODUCTION.hash(SECRET).startswith("$argon2id$v=19$m=65536,t=3,p=4$")


def test_an_operator_added_in_production_signs_in_whatever_the_tests_hash_with(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored hash carries its parameters: one made at production's cost verifies."""
    monkeypatch.setattr(operators, "_hasher", PRODUCTION)
    with transaction(engine) as connection:
        operators.add(connection, "olga", "operator", SECRET, datetime.now(UTC))
    monkeypatch.setattr(operators, "_hasher", QUICK)
    with transaction(engine) as connection:
        assert operators.authenticate(connection, "olga", SECRET) == "operator"
        assert operators.authenticate(connection, "olga", "wrong-password") is None
