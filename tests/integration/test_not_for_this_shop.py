"""A price type mapped to null in a target's mapping is left out of that shop on purpose
(contract 10): its messages end ``cancelled`` with reason ``not-for-this-shop``, are counted
in ``status``, never quarantined and never sent; on SQLite and PostgreSQL, for both targets
that map price types (WooCommerce's EXCHANGE_WOO_PRICE_FIELDS, 1C-Bitrix's
EXCHANGE_BITRIX_PRICE_TYPES)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, run_worker, stage
from exchange.dev.woosim import WooSimulator
from exchange.domain.clock import SystemClock
from exchange.domain.policy import KindPolicies, Policy
from exchange.errors import ConfigurationError
from exchange.ops.status import status
from exchange.settings import load_settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

KINDS = KindPolicies.of({"price": Policy.LATEST_WINS})


def typed_row(sku: str, version: int, price: str, price_type: str) -> dict[str, Any]:
    row = price_row(sku, version, price, aggregate=f"{sku}/{price_type}")
    row["payload"] = row["payload"].replace('"retail"', f'"{price_type}"')
    return row


def outcomes(engine: Engine) -> dict[str, tuple[str, str | None, int]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.aggregate, messages.c.state, messages.c.reason, messages.c.attempts)
        )
        return {a: (s, r, n) for a, s, r, n in rows}


def events(engine: Engine, aggregate: str) -> list[tuple[str, str | None, str | None]]:
    with transaction(engine, read_only=True) as connection:
        return [
            tuple(row)
            for row in connection.execute(
                select(history.c.event, history.c.to_state, history.c.detail)
                .join(messages, messages.c.id == history.c.message_pk)
                .where(messages.c.aggregate == aggregate)
                .order_by(history.c.id)
            )
        ]


@pytest.fixture
def woo() -> Iterator[WooSimulator]:
    simulator = WooSimulator(key="ck_k", secret="cs_s")
    simulator.start()
    yield simulator
    simulator.stop()


@pytest.fixture
def bitrix() -> Iterator[BitrixSimulator]:
    simulator = BitrixSimulator("exchange", "secret", zip=False, file_limit=65536, step_size=50)
    simulator.start()
    yield simulator
    simulator.stop()


def test_woocommerce_leaves_a_price_type_mapped_to_null_out_cancelled_counted_never_sent(
    db_url: str, engine: Engine, woo: WooSimulator
) -> None:
    settings = fast_settings(
        db_url,
        None,
        target="woocommerce",
        woo_url=woo.url,
        woo_key="ck_k",
        woo_secret="cs_s",
        woo_price_fields={"retail": "regular_price", "purchase": None},
    )
    stage(
        engine,
        [
            typed_row("SKU-1", 1, "10.00", "retail"),
            typed_row("SKU-1", 1, "7.00", "purchase"),
            typed_row("SKU-1", 2, "7.50", "purchase"),
            typed_row("SKU-2", 1, "5.00", "wholesale"),  # not listed at all: a person's
        ],
    )

    run_worker(bootstrap.worker(settings, engine, rng=random.Random(3)))

    got = outcomes(engine)
    assert ("delivered", None) == got["SKU-1/retail"][:2]
    assert ("cancelled", "not-for-this-shop", 0) == got["SKU-1/purchase"], "not charged"
    assert ("quarantined", "unmapped-price-type") == got["SKU-2/wholesale"][:2]
    assert "10.00" == woo.price("SKU-1"), "the purchase price never reached the shop"
    assert 1 == woo.requests["POST products/batch"], "one write: the retail price"
    story = events(engine, "SKU-1/purchase")
    assert story[-1][:2] == ("not-for-this-shop", "cancelled")
    assert "EXCHANGE_WOO_PRICE_FIELDS" in (story[-1][2] or "")
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, SystemClock().now(), KINDS)
    assert 1 == figures.cancelled_by_reason.get("not-for-this-shop"), figures.cancelled_by_reason
    assert {"unmapped-price-type"} == set(figures.quarantine_by_reason), "never quarantined"


def test_bitrix_leaves_a_price_type_mapped_to_null_out_of_the_package(
    db_url: str, engine: Engine, bitrix: BitrixSimulator
) -> None:
    settings = fast_settings(
        db_url,
        None,
        target="bitrix",
        bitrix_url=bitrix.url + PATH,
        bitrix_user="exchange",
        bitrix_password="secret",
        bitrix_catalog_id="catalog-1",
        bitrix_price_types={"retail": "Розничная", "purchase": None},
    )
    stage(
        engine,
        [typed_row("SKU-1", 1, "10.00", "retail"), typed_row("SKU-1", 1, "7.00", "purchase")],
    )

    run_worker(bootstrap.worker(settings, engine, rng=random.Random(3)))

    got = outcomes(engine)
    assert ("delivered", None) == got["SKU-1/retail"][:2]
    assert ("cancelled", "not-for-this-shop") == got["SKU-1/purchase"][:2]
    assert bitrix.packages, "the retail price travelled"
    assert all(b"7.00" not in package for package in bitrix.packages)
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, SystemClock().now(), KINDS)
    assert {"not-for-this-shop": 1} == figures.cancelled_by_reason
    assert {} == figures.quarantine_by_reason


def test_only_a_purchase_price_staged_sends_nothing_at_all(
    db_url: str, engine: Engine, bitrix: BitrixSimulator
) -> None:
    settings = fast_settings(
        db_url,
        None,
        target="bitrix",
        bitrix_url=bitrix.url + PATH,
        bitrix_user="exchange",
        bitrix_password="secret",
        bitrix_catalog_id="catalog-1",
        bitrix_price_types={"retail": "Розничная", "purchase": None},
    )
    stage(engine, [typed_row("SKU-1", 1, "7.00", "purchase")])

    run_worker(bootstrap.worker(settings, engine, rng=random.Random(3)))

    assert ("cancelled", "not-for-this-shop", 0) == outcomes(engine)["SKU-1/purchase"]
    assert 0 == sum(bitrix.requests.values()), "no exchange with the site for it"


def test_toml_spells_null_as_false_and_true_stays_an_error(tmp_path: Any) -> None:
    config = tmp_path / "exchange.toml"
    config.write_text(
        'bitrix_price_types = { "retail" = "Розничная", "purchase" = false }\n', encoding="utf-8"
    )
    settings = load_settings(config_file=config)
    assert {"retail": "Розничная", "purchase": None} == settings.bitrix_price_types
    config.write_text('bitrix_price_types = { "purchase" = true }\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="EXCHANGE_BITRIX_PRICE_TYPES"):
        load_settings(config_file=config)
