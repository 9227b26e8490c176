"""``exchange check`` for a wildberries channel (contract 14, issue 32 item 2): the token's
rights read from its own claims (the Prices category; read-only), WB accepts it, a sample of
the service's SKUs resolves to nmIDs, and the limits in words. Against the simulator, over
HTTP; nothing is uploaded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from exchange.dev.testing import price_row, stage
from exchange.dev.wbsim import ACC_BASE, ACC_TEST, WbSimulator
from exchange.intake.staging_table import take
from exchange.ops.check import Status, check_target
from exchange.settings import load_settings


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    simulator = WbSimulator()
    simulator.start()
    simulator.add_good("SKU-1")
    simulator.add_good("SKU-2")
    yield simulator
    simulator.stop()


def wb_check(
    sim: WbSimulator, token: str, database_url: str = "sqlite://"
) -> list[tuple[Status, str]]:
    settings = load_settings(
        target="wildberries", wb_api_url=sim.url, wb_token=token, database_url=database_url
    )
    return [(r.status, r.detail) for r in check_target(settings)]


def test_a_token_that_may_write_prices_passes_with_the_limits_in_words(wb: WbSimulator) -> None:
    (rights, said), (accepted, limits), (sample, found) = wb_check(wb, wb.token())

    assert (Status.OK, Status.OK, Status.OK) == (rights, accepted, sample)
    assert "Personal token, «Цены и скидки», read and write" in said
    assert "10 requests per 6 s with a burst of 5" in limits
    assert "2 vendor codes" in found
    assert 0 == wb.requests["/api/v2/upload/task"], "nothing uploaded"


def test_a_read_only_token_fails_its_rights_from_its_claims(wb: WbSimulator) -> None:
    (rights, said), (accepted, _), _ = wb_check(wb, wb.token(read_only=True))
    assert (Status.FAIL, Status.OK) == (rights, accepted), "it may read, not write"
    assert "read-only" in said


def test_a_token_without_the_prices_category_or_a_base_token_fails(wb: WbSimulator) -> None:
    (no_prices, said), *_ = wb_check(wb, wb.token(scopes=1 << 1))
    (base, base_said), *_ = wb_check(wb, wb.token(acc=ACC_BASE))
    assert (Status.FAIL, Status.FAIL) == (no_prices, base)
    assert "«Цены и скидки»" in said and "4 requests an hour" in base_said


def test_a_base_token_is_told_its_own_limit_and_spends_no_request_it_cannot_afford(
    wb: WbSimulator,
) -> None:
    """Research §2.3: a Base token has 4 requests an hour with a burst of 1 for the whole
    category: the check says so, and reads nothing after the one read it may make (never a
    429 from WB turned into a failed catalogue check)."""
    results = wb_check(wb, wb.token(acc=ACC_BASE))
    (rights, _), (accepted, limits), (sample, why) = results

    assert (Status.FAIL, Status.OK, Status.SKIP) == (rights, accepted, sample), results
    assert "4 requests an hour with a burst of 1" in limits
    assert "10 requests per 6 s" not in limits
    assert "4 requests an hour" in why
    assert 1 == sum(wb.requests.values()), dict(wb.requests)


def test_a_refused_token_fails_and_is_never_shown(wb: WbSimulator) -> None:
    token = wb.token()
    wb.revoke(token)
    results = wb_check(wb, token)
    assert [Status.OK, Status.FAIL, Status.SKIP] == [status for status, _ in results]
    assert all(token not in detail for _, detail in results)


def test_a_sample_of_the_services_skus_resolves_to_nmids(
    wb: WbSimulator, db_url: str, engine: Engine
) -> None:
    stage(engine, [price_row("SKU-1", 1), price_row("GONE-9", 1)])
    take(engine, None, load_settings().kinds, datetime.now(UTC))

    *_, (sample, found) = wb_check(wb, wb.token(), db_url)

    assert Status.FAIL == sample
    assert "of 2 of the service's SKUs, 1 found, not found: GONE-9" in found


def test_a_test_token_fails_its_rights_anywhere_but_wbs_sandbox(wb: WbSimulator) -> None:
    """rev32p: a Test token (acc 2, research §2.7: the sandbox only) aimed at another host
    read OK on its rights line, and the next line failed; the rights line says it now."""
    (rights, said), *_ = wb_check(wb, wb.token(acc=ACC_TEST))
    assert rights is Status.FAIL, said
    assert "sandbox only (https://discounts-prices-api-sandbox.wildberries.ru)" in said, said
    assert "Personal or Service token" in said
