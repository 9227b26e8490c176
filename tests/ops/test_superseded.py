"""Superseded after quarantine (issue 3): a quarantined price whose aggregate has since had a
version at least as new applied at the site. Replaying it could only end ``stale``, so it can
be found and cancelled in bulk with one filter. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import pytest
from optools import (
    DELIVERED,
    claim,
    listed,
    mid,
    refused,
    rejected_ids,
    settle,
    stale_at_site,
    states,
    take,
)
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.testing import posting_row, price_row, raw_row
from exchange.domain.clock import FakeClock
from exchange.ops import quarantine
from exchange.ops.quarantine import Filters
from exchange.settings import Settings


@pytest.fixture
def quarantine_mix(engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Quarantined entries, of which exactly two are superseded after quarantine:

    SKU-NEWER   v1 refused (422), then v2 delivered             -> superseded
    SKU-SITE    v1 refused (422), then v2 answered 409 stale by
                a site that holds v7                            -> superseded (the cursor is 7)
    SKU-ALONE   v1 refused, nothing newer                        -> not superseded
    SKU-BOTH    v1 refused, then v2 refused too (nothing newer
                delivered)                                       -> neither superseded
    D-1         posting v1 refused (strict)                      -> not superseded
    a rejected staging row                                       -> not superseded
    """
    skus = ["SKU-NEWER", "SKU-SITE", "SKU-ALONE", "SKU-BOTH"]
    take(engine, settings, clock, [price_row(sku, 1) for sku in skus] + [posting_row("D-1", 1)])
    settle(engine, settings, clock, {sku: refused(422) for sku in skus} | {"D-1": refused(400)})
    clock.advance(60)
    take(
        engine,
        settings,
        clock,
        [price_row(sku, 2) for sku in ["SKU-NEWER", "SKU-SITE", "SKU-BOTH"]],
    )
    settle(
        engine,
        settings,
        clock,
        {"SKU-NEWER": DELIVERED, "SKU-SITE": stale_at_site(7), "SKU-BOTH": refused(422)},
    )
    take(engine, settings, clock, [raw_row("stock", "W-1", 1, "{}")])
    ids = {sku: mid(engine, sku, 1) for sku in skus}
    ids["SKU-BOTH v2"] = mid(engine, "SKU-BOTH", 2)
    ids["D-1"] = mid(engine, "D-1", 1)
    [ids["rejected"]] = rejected_ids(engine)
    return ids


def test_the_superseded_filter_selects_exactly_the_prices_a_newer_delivered_version_made_pointless(
    engine: Engine, quarantine_mix: dict[str, str]
) -> None:
    expected = [quarantine_mix["SKU-NEWER"], quarantine_mix["SKU-SITE"]]
    assert expected == listed(engine, superseded_after_quarantine=True)
    assert [quarantine_mix["SKU-SITE"]] == listed(
        engine, superseded_after_quarantine=True, aggregate="SKU-SITE"
    )
    assert [] == listed(engine, superseded_after_quarantine=True, kind="financial_posting")


def test_every_list_entry_says_whether_it_is_superseded_after_quarantine(
    engine: Engine, quarantine_mix: dict[str, str]
) -> None:
    with transaction(engine, read_only=True) as c:
        entries = quarantine.list_quarantined(c, Filters())
    flags = {e["message_id"]: e["superseded_after_quarantine"] for e in entries}
    assert {
        quarantine_mix["SKU-NEWER"]: True,
        quarantine_mix["SKU-SITE"]: True,
        quarantine_mix["SKU-ALONE"]: False,
        quarantine_mix["SKU-BOTH"]: False,
        quarantine_mix["SKU-BOTH v2"]: False,
        quarantine_mix["D-1"]: False,
        quarantine_mix["rejected"]: False,
    } == flags
    assert all(type(flag) is bool for flag in flags.values())


def test_one_filter_is_enough_to_cancel_every_superseded_price_in_bulk(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine_mix: dict[str, str]
) -> None:
    before = states(engine)
    with transaction(engine) as c:
        result = quarantine.cancel(
            c,
            [],
            Filters(superseded_after_quarantine=True),
            operator="ivanova",
            note="a newer price is on the site",
            now=clock.now(),
            kinds=settings.policies,
        )

    superseded = [quarantine_mix["SKU-NEWER"], quarantine_mix["SKU-SITE"]]
    assert superseded == result.touched
    after = states(engine)
    assert {m: ("cancelled", "operator") for m in superseded} == {m: after[m] for m in superseded}
    assert {m: s for m, s in before.items() if m not in superseded} == {
        m: s for m, s in after.items() if m not in superseded
    }
    assert [] == listed(engine, superseded_after_quarantine=True)


def test_a_superseded_price_retried_anyway_is_never_sent(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine_mix: dict[str, str]
) -> None:
    # Why the filter exists: the cursor is past it, so a replay ends stale without a request.
    with transaction(engine) as c:
        quarantine.retry(
            c,
            [quarantine_mix["SKU-NEWER"]],
            Filters(),
            operator="ivanova",
            note=None,
            now=clock.now(),
            dry_run=False,
        )
    take(engine, settings, clock, [])
    assert ("cancelled", "stale") == states(engine)[quarantine_mix["SKU-NEWER"]]
    assert [] == claim(engine, settings, clock).messages


def test_a_superseded_price_retried_while_a_worker_is_mid_cycle_is_not_claimed_then_ends_stale(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine_mix: dict[str, str]
) -> None:
    # Issue 12: a worker claims in a loop and coalesces only at the start of a cycle; a retry
    # that lands in between used to be claimed and sent. The claim itself refuses it now, and
    # the retry is accepted: the next cycle's coalescing ends it stale, without a request.
    with transaction(engine) as c:
        result = quarantine.retry(
            c,
            [quarantine_mix["SKU-NEWER"]],
            Filters(),
            operator="ivanova",
            note=None,
            now=clock.now(),
            dry_run=False,
        )
    assert [quarantine_mix["SKU-NEWER"]] == result.touched
    assert [] == claim(engine, settings, clock).messages  # no coalesce has run since
    take(engine, settings, clock, [])
    assert ("cancelled", "stale") == states(engine)[quarantine_mix["SKU-NEWER"]]
