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


def test_a_yandex_market_update_accepted_but_not_shown_in_time_is_in_doubt(
    db_url: str, engine: Engine
) -> None:
    """Contract 14: an offer carries, for each other price type, the newest version Yandex may
    hold. An update Yandex accepted (200) and did not show within ym_apply_timeout
    (``ym-not-applied``: sent again, or quarantined, or superseded since) may still apply
    (research §3.4: accepted is not applied, §3.5), so it is known, not the one before it."""
    skus = ["A", "B", "C"]
    stage(engine, [price_row(s, v, f"{v}00.00") for s in skus for v in (1, 2)])
    take(engine, None, dict(DEFAULT_KINDS), SystemClock().now())
    for sku in skus:
        _set(engine, sku, 1, state="delivered", attempts=1)
    _set(engine, "A", 2, state="delayed", attempts=1, receipt="ym-not-applied")
    _set(
        engine,
        "B",
        2,
        state="quarantined",
        reason="retry-limit",
        attempts=3,
        receipt="ym-not-applied",
    )
    _set(engine, "C", 2, state="cancelled", attempts=1, receipt="ym-not-applied")
    ym = bootstrap.yandex_market_target(
        fast_settings(db_url, None, target="yandex-market", ym_business_id=1, ym_api_key="k" * 8),
        engine=engine,
    )
    known = getattr(ym, "known", None)
    assert isinstance(known, DbKnownPrices)

    found = _prices(known, skus)

    for sku in skus:
        assert found[sku] == (2, Decimal("200.00")), f"{sku}: accepted, may still apply"


def test_a_yandex_market_send_that_left_counts_whatever_its_delivery_became(
    engine: Engine,
) -> None:
    """Issue 32 (``DbSentTimes.unsettled_since``, Yandex Market's earlier sends): a request that
    left may still land (research §3.4, §3.5), so its ``ym-sent:`` mark counts whether its
    delivery was then superseded, quarantined, handed back by a pause or is due again; one
    given back because its request never left (``ym-unsent``), one a 400 refused
    (``ym-refused``) and one shown (delivered) do not, nor does one neither known prices nor
    earlier sends take as a send that may have reached Yandex."""
    from exchange.db.sent_times import DbSentTimes
    from exchange.targets.yandex_market.target import ACCEPTED, NOT_APPLIED, SENT

    states = {
        "A": ("cancelled", "ym-sent:x"),
        "B": ("quarantined", "ym-sent:x"),
        "C": ("new", "ym-sent:x"),
        "D": ("delayed", "ym-sent:x"),
        "E": ("delayed", "ym-unsent"),
        "F": ("quarantined", "ym-refused"),
        "G": ("delivered", "ym-sent:x"),
    }
    stage(engine, [price_row(s, 1, "100.00") for s in states])
    take(engine, None, dict(DEFAULT_KINDS), SystemClock().now())
    for sku, (state, receipt) in states.items():
        _set(engine, sku, 1, state=state, attempts=1, receipt=receipt)

    found = DbSentTimes(engine).unsettled_since(
        list(states), datetime(2000, 1, 1, tzinfo=UTC), (ACCEPTED, SENT, NOT_APPLIED)
    )

    assert sorted(found) == ["A", "B", "C", "D"], found
    known = DbKnownPrices(engine, in_flight=False, in_doubt=True, doubt_receipts=(SENT,))
    assert sorted(_prices(known, list(states))) == ["A", "B", "C", "D", "G"]
