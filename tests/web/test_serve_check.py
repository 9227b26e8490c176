"""``exchange check`` covers serve when one of its ways in is configured; the aggregate
``<sku>/<price_type>`` (contract 1) passes the row contract on both of its paths."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from exchange.intake.contracts import Accepted, Rejected, StagingRow, validate
from exchange.ops.check import Status, check_serve
from exchange.settings import DEFAULT_KINDS, load_settings


def test_no_way_in_configured_no_serve_lines() -> None:
    assert [] == check_serve(load_settings(database_url="sqlite:///x.db"))


def test_an_open_exchange_with_types_and_a_writable_folder_passes(tmp_path: Path) -> None:
    settings = load_settings(
        database_url="sqlite:///x.db",
        **{"1c_user": "u", "1c_password": "pass-word-1", "1c_price_types": {"Розничная": "retail"}},
        **{"1c_dir": str(tmp_path / "1c")},
    )
    lines = check_serve(settings)
    assert [Status.OK, Status.OK, Status.OK, Status.SKIP] == [r.status for r in lines]
    assert "Розничная" in lines[1].detail and "pass-word-1" not in lines[1].detail


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"http_host": "0.0.0.0"}, "not loopback"),
        ({"1c_price_types": {}}, "EXCHANGE_1C_PRICE_TYPES is empty"),
        ({"1c_password_file": "/nonexistent/pw"}, "EXCHANGE_1C_PASSWORD_FILE cannot be read"),
    ],
)
def test_what_would_stop_serve_fails(overrides: dict[str, object], fragment: str) -> None:
    values: dict[str, object] = {
        "database_url": "sqlite:///x.db",
        "1c_user": "u",
        "1c_password": "secret-pw",
        "1c_price_types": {"Розничная": "retail"},
    }
    values.update(overrides)
    lines = check_serve(load_settings(**values))
    failed = [r for r in lines if r.status is Status.FAIL]
    assert failed and fragment in failed[0].detail
    assert all("secret-pw" not in r.line() for r in lines)


def row(aggregate: str, payload: str) -> StagingRow:
    return StagingRow(1, "price", aggregate, 1, payload, "1", None, datetime.now(UTC))


@pytest.mark.parametrize(
    ("aggregate", "accepted"),
    [("S-1/retail", True), ("S-1", True), ("S-1/wholesale", False), ("S-2/retail", False)],
)
@pytest.mark.parametrize(
    "payload",
    [
        '{"sku": "S-1", "price": "10.00", "currency": "RUB", "price_type": "retail"}',
        '{"sku": "S-1", "price": 10.00, "price_type": "retail"}',  # the full path
    ],
)
def test_the_aggregate_names_the_sku_and_its_price_type(
    aggregate: str, accepted: bool, payload: str
) -> None:
    verdict = validate(row(aggregate, payload), DEFAULT_KINDS)
    assert isinstance(verdict, Accepted if accepted else Rejected)
