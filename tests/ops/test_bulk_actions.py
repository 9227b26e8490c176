"""Bulk retry and cancel (issue 3, contract 6): a filter is required, a bulk action shows what
it would touch before it acts, and one over the bulk limit is refused unless the operator
names the number. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from optools import (
    DELIVERED,
    claim,
    done_version,
    history_counts,
    history_rows,
    listed,
    message,
    mid,
    refused,
    rejected_ids,
    settle,
    states,
    take,
)
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.testing import posting_row, price_row, raw_row
from exchange.domain.clock import FakeClock
from exchange.domain.states import Event
from exchange.errors import OperatorError
from exchange.ops import quarantine
from exchange.ops.quarantine import ActionResult, Filters
from exchange.settings import Settings

SKUS = ["SKU-1", "SKU-2", "SKU-3", "SKU-4", "SKU-5"]


@pytest.fixture
def refused_prices(engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Five prices refused by the site (http-422), a posting refused (http-400) with its next
    version held behind it, and a rejected staging row (unknown-kind)."""
    take(engine, settings, clock, [price_row(sku, 1) for sku in SKUS])
    settle(engine, settings, clock, {sku: refused(422) for sku in SKUS})
    clock.advance(60)
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    settle(engine, settings, clock, {"D-1": refused(400)})
    take(engine, settings, clock, [raw_row("stock", "W-1", 1, "{}")])
    ids = {sku: mid(engine, sku, 1) for sku in SKUS}
    ids["D-1"] = mid(engine, "D-1", 1)
    [ids["rejected"]] = rejected_ids(engine)
    return ids


def bulk(
    action: str,
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    filters: Filters,
    *,
    ids: list[str] | None = None,
    **options: Any,
) -> ActionResult:
    with transaction(engine) as c:
        if action == "retry":
            return quarantine.retry(
                c,
                ids or [],
                filters,
                operator="ivanova",
                note=options.pop("note", "the site fixed the cards"),
                now=clock.now(),
                dry_run=options.pop("dry_run", False),
                **options,
            )
        return quarantine.cancel(
            c,
            ids or [],
            filters,
            operator="ivanova",
            note=options.pop("note", "not needed any more"),
            now=clock.now(),
            kinds=settings.policies,
            dry_run=options.pop("dry_run", False),
            **options,
        )


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_bulk_action_without_a_filter_is_refused_and_changes_nothing(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    refused_prices: dict[str, str],
    action: str,
) -> None:
    before = states(engine)
    with pytest.raises(OperatorError, match="needs at least one filter"):
        bulk(action, engine, settings, clock, Filters())
    # a blank beginning of an aggregate (``--aggregate ""``) begins every one: no filter
    for blank in ("", "  "):
        with pytest.raises(OperatorError, match="needs at least one filter"):
            bulk(action, engine, settings, clock, Filters(aggregate=blank, search=blank))
    assert before == states(engine)


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_message_ids_and_filters_together_are_refused(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    refused_prices: dict[str, str],
    action: str,
) -> None:
    before = states(engine)
    with pytest.raises(OperatorError, match="not both"):
        bulk(action, engine, settings, clock, Filters(kind="price"), ids=[refused_prices["SKU-1"]])
    assert before == states(engine)


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_bulk_action_over_the_limit_is_refused_naming_the_count_and_how_to_raise_it(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    refused_prices: dict[str, str],
    action: str,
) -> None:
    before, history_before = states(engine), history_counts(engine)
    with pytest.raises(OperatorError) as refusal:
        bulk(action, engine, settings, clock, Filters(reason="http-422"), limit=4)
    assert "would touch 5 messages" in str(refusal.value)
    assert "more than the limit of 4" in str(refusal.value)
    assert "--limit 5" in str(refusal.value)
    assert "EXCHANGE_BULK_LIMIT" in str(refusal.value)
    assert before == states(engine)
    assert history_before == history_counts(engine)


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_bulk_action_over_the_limit_is_refused_even_as_a_dry_run(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    refused_prices: dict[str, str],
    action: str,
) -> None:
    with pytest.raises(OperatorError, match="--limit 5"):
        bulk(action, engine, settings, clock, Filters(kind="price"), limit=4, dry_run=True)


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_bulk_action_of_exactly_the_limit_goes_ahead(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    refused_prices: dict[str, str],
    action: str,
) -> None:
    result = bulk(action, engine, settings, clock, Filters(reason="http-422"), limit=5)
    expected_state = "new" if action == "retry" else "cancelled"
    assert sorted(refused_prices[sku] for sku in SKUS) == sorted(result.touched)
    assert {expected_state} == {states(engine)[refused_prices[sku]][0] for sku in SKUS}
    assert "quarantined" == states(engine)[refused_prices["D-1"]][0]


def test_the_limit_counts_what_a_bulk_retry_would_change_not_the_rejected_rows_it_skips(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    # Everything quarantined: 5 prices, the posting and the rejected row; the row is skipped.
    everything = Filters(since=clock.now() - timedelta(days=1))
    result = bulk("retry", engine, settings, clock, everything, limit=6)
    assert 6 == len(result.touched)
    assert [refused_prices["rejected"]] == [message_id for message_id, _ in result.skipped]


def test_a_bulk_dry_run_shows_what_it_would_touch_and_changes_nothing(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    before, history_before = states(engine), history_counts(engine)
    for action in ("retry", "cancel"):
        result = bulk(action, engine, settings, clock, Filters(kind="price"), dry_run=True)
        assert sorted(refused_prices[sku] for sku in SKUS) == sorted(result.touched)
    assert before == states(engine)
    assert history_before == history_counts(engine)


def test_bulk_cancel_ends_every_match_with_who_when_and_the_note_in_history(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    clock.advance(300)
    result = bulk(
        "cancel", engine, settings, clock, Filters(kind="price"), note="prices re-sent by hand"
    )

    assert sorted(refused_prices[sku] for sku in SKUS) == sorted(result.touched)
    for sku in SKUS:
        row = message(engine, refused_prices[sku])
        assert ("cancelled", "operator") == (row["state"], row["reason"])
    assert [refused_prices["D-1"], refused_prices["rejected"]] == listed(engine)
    last = history_rows(engine, refused_prices["SKU-3"])[-1]
    assert (Event.OPERATOR_CANCEL.value, "quarantined", "cancelled") == (
        last["event"],
        last["from_state"],
        last["to_state"],
    )
    assert ("ivanova", "prices re-sent by hand", clock.now()) == (
        last["operator"],
        last["note"],
        last["at"],
    )


def test_bulk_cancel_closes_rejected_staging_rows_too(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    result = bulk("cancel", engine, settings, clock, Filters(reason="unknown-kind"))
    assert [refused_prices["rejected"]] == result.touched
    assert ("cancelled", "operator") == states(engine)[refused_prices["rejected"]]


def test_bulk_cancel_of_a_strict_predecessor_lets_the_versions_held_behind_it_go(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    bulk("cancel", engine, settings, clock, Filters(kind="financial_posting"))

    assert 1 == done_version(engine, "D-1")
    batch = claim(engine, settings, clock)
    assert [("D-1", 2)] == [(m.aggregate, m.version) for m in batch.messages]


def test_bulk_retry_puts_every_match_back_in_its_place_with_attempts_zero(
    engine: Engine, settings: Settings, clock: FakeClock, refused_prices: dict[str, str]
) -> None:
    bulk("retry", engine, settings, clock, Filters(reason="http-400"))

    assert ("new", 0) == (
        message(engine, refused_prices["D-1"])["state"],
        message(engine, refused_prices["D-1"])["attempts"],
    )
    settle(engine, settings, clock, {"D-1": DELIVERED})
    assert 1 == done_version(engine, "D-1")
