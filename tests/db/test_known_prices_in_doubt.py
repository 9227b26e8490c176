"""``DbKnownPrices(in_doubt=True)``: what a marketplace channel may hold is the newest version
that may have reached it, delivered or in doubt (review ozon 33): a version whose attempt ended
with its result unknown (its history says ``result-unknown:``, or its lease was taken over),
one quarantined ``unknown-response``, or one whose receipt the target marked as a send that may
still land (Yandex Market's ``ym-sent:``). A version refused outright, or only waiting, is not.
Both marketplace channels that carry known prices (Ozon, Yandex Market) read it so."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import Engine, insert, select, update

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.schema import deliveries, history, messages
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take


def _pk(engine: Engine, sku: str, version: int) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(
            connection.execute(
                select(messages.c.id).where(
                    messages.c.aggregate == sku, messages.c.version == version
                )
            ).scalar_one()
        )


def _set(
    engine: Engine, sku: str, version: int, detail: str | None = None, **values: object
) -> None:
    pk = _pk(engine, sku, version)
    with transaction(engine) as connection:
        connection.execute(update(deliveries).where(deliveries.c.message_pk == pk).values(**values))
        if detail is not None:
            channel = connection.execute(
                select(deliveries.c.channel_id).where(deliveries.c.message_pk == pk)
            ).scalar_one()
            connection.execute(
                insert(history).values(
                    message_pk=pk,
                    channel_id=channel,
                    at=datetime(2026, 12, 5, tzinfo=UTC),
                    event="quarantined",
                    detail=detail,
                )
            )


def _prices(known: DbKnownPrices, skus: list[str]) -> dict[str, tuple[int, Decimal]]:
    return {k.sku: (k.version, k.amount) for k in known.latest(skus)}


def test_the_newest_version_that_may_have_reached_the_channel_is_known(engine: Engine) -> None:
    skus = [f"S{n}" for n in range(1, 8)]
    stage(
        engine,
        [price_row(s, v, f"{v}00.00") for s in skus for v in (1, 2)],
    )
    take(engine, None, dict(DEFAULT_KINDS), SystemClock().now())
    for sku in skus:
        _set(engine, sku, 1, state="delivered", attempts=1)
    timeout = "result-unknown: /v1/product/import/prices: ReadTimeout: ReadTimeout"
    _set(engine, "S1", 2, timeout, state="quarantined", reason="retry-limit", attempts=2)
    _set(engine, "S2", 2, timeout, state="delayed", attempts=1)  # waits for its retry
    _set(engine, "S3", 2, state="quarantined", reason="unknown-response", attempts=1)
    _set(engine, "S4", 2, state="delayed", attempts=1, receipt="ym-sent:S4")
    _set(engine, "S5", 2, "http 503", state="quarantined", reason="retry-limit", attempts=2)
    _set(engine, "S6", 2, state="quarantined", reason="invalid-for-channel", attempts=1)
    # S7 v2 stays new: never sent

    in_doubt = DbKnownPrices(engine, in_flight=False, in_doubt=True, doubt_receipts=("ym-sent:",))
    found = _prices(in_doubt, skus)
    for sku in ("S1", "S2", "S3", "S4"):
        assert found[sku] == (2, Decimal("200.00")), sku
    for sku in ("S5", "S6", "S7"):
        assert found[sku] == (1, Decimal("100.00")), f"{sku}: never reached the channel"
    delivered = _prices(DbKnownPrices(engine, in_flight=False), skus)
    assert all(v == (1, Decimal("100.00")) for v in delivered.values()), "without in_doubt"


def test_ozon_and_yandex_market_read_what_they_may_hold(db_url: str, engine: Engine) -> None:
    ozon = bootstrap.ozon_target(
        fast_settings(db_url, None, target="ozon", ozon_client_id="1", ozon_api_key="k" * 8),
        engine=engine,
    )
    ym = bootstrap.yandex_market_target(
        fast_settings(db_url, None, target="yandex-market", ym_business_id=1, ym_api_key="k" * 8),
        engine=engine,
    )
    assert isinstance(ozon.known, DbKnownPrices) and ozon.known.in_doubt
    known = getattr(ym, "known", None)
    assert isinstance(known, DbKnownPrices) and known.in_doubt
    assert "ym-sent:" in known.doubt_receipts
