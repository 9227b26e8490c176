"""Operator actions and status (contracts 3, 4, 6): quarantine list/retry/cancel, counts, blocks.

Runs on SQLite and on PostgreSQL (the ``engine`` fixture is parametrized over both).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, RowMapping, select

from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import (
    fast_settings,
    one_channel_aggregates,
    one_channel_messages,
    posting_row,
    price_row,
    raw_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.errors import OperatorError
from exchange.intake import staging_table as intake
from exchange.ops import quarantine, status
from exchange.ops.quarantine import Filters
from exchange.queue import lease, record
from exchange.queue.coalesce import quarantine_gaps
from exchange.settings import Settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

GAP = 600.0
LIST_FIELDS = {
    "message_id",
    "kind",
    "aggregate",
    "version",
    "reason",
    "attempts",
    "last_error",
    "source_ref",
    "quarantined_at",
}

# -- helpers -------------------------------------------------------------------------------


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, gap_timeout=GAP)


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def claim(engine: Engine, settings: Settings, clock: FakeClock, worker: str = "w1") -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=100,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )


def refused(status_code: int) -> Decision:
    return Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        f"{status_code} from the site",
        reason=f"http-{status_code}",
        http_status=status_code,
    )


DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="ok")


def settle(
    engine: Engine, settings: Settings, clock: FakeClock, decisions: dict[str, Decision]
) -> None:
    """Lease what is due and record the given decision for each aggregate."""
    batch = claim(engine, settings, clock)
    outcomes = [(m, decisions[m.aggregate]) for m in batch.messages if m.aggregate in decisions]
    assert len(outcomes) == len(decisions), [m.aggregate for m in batch.messages]
    with transaction(engine) as c:
        record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=outcomes,
            kinds=settings.policies,
        )
        record.release(c, batch.token)


def message(engine: Engine, message_id: str) -> RowMapping:
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(select(messages).where(messages.c.message_id == message_id)).mappings().one()
        )


def mid(engine: Engine, aggregate: str, version: int) -> str:
    with transaction(engine, read_only=True) as c:
        return str(
            c.execute(
                select(messages.c.message_id).where(
                    messages.c.aggregate == aggregate,
                    messages.c.version == version,
                    ~messages.c.rejected,
                )
            ).scalar_one()
        )


def rejected_record(engine: Engine) -> str:
    with transaction(engine, read_only=True) as c:
        return str(c.execute(select(messages.c.message_id).where(messages.c.rejected)).scalar_one())


def events(engine: Engine, message_id: str) -> list[RowMapping]:
    pk = message(engine, message_id)["id"]
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        )


def listed(engine: Engine, **filters: Any) -> list[str]:
    with transaction(engine, read_only=True) as c:
        return [e["message_id"] for e in quarantine.list_quarantined(c, Filters(**filters))]


def retry(engine: Engine, clock: FakeClock, ids: list[str], **kw: Any) -> quarantine.ActionResult:
    filters = kw.pop("filters", Filters())
    with transaction(engine) as c:
        return quarantine.retry(
            c,
            ids,
            filters,
            operator=kw.pop("operator", "ivanova"),
            note=kw.pop("note", "the site fixed the product card"),
            now=clock.now(),
            dry_run=kw.pop("dry_run", False),
        )


def cancel(
    engine: Engine, settings: Settings, clock: FakeClock, ids: list[str], note: str
) -> quarantine.ActionResult:
    with transaction(engine) as c:
        return quarantine.cancel(
            c, ids, operator="petrov", note=note, now=clock.now(), kinds=settings.policies
        )


def done_version(engine: Engine, aggregate: str) -> int:
    with transaction(engine, read_only=True) as c:
        return int(
            c.execute(
                select(aggregates.c.done_version).where(aggregates.c.aggregate == aggregate)
            ).scalar_one()
        )


@pytest.fixture
def quarantined(engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Three entries quarantined at three moments: a price (http-422), a posting (http-400)
    held in front of its next version, and a rejected staging row (unknown-kind)."""
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    settle(engine, settings, clock, {"SKU-1": refused(422)})
    clock.advance(3600)
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    settle(engine, settings, clock, {"D-1": refused(400)})
    clock.advance(3600)
    take(engine, settings, clock, [raw_row("stock", "W-1", 1, "{}", source_ref="Остатки 1")])
    return {
        "price": mid(engine, "SKU-1", 1),
        "posting": mid(engine, "D-1", 1),
        "rejected": rejected_record(engine),
    }


# -- list ----------------------------------------------------------------------------------


def test_quarantine_list_shows_every_entry_with_the_contract_fields(
    engine: Engine, quarantined: dict[str, str]
) -> None:
    with transaction(engine, read_only=True) as c:
        entries = quarantine.list_quarantined(c, Filters())
    assert [e["message_id"] for e in entries] == [
        quarantined["price"],
        quarantined["posting"],
        quarantined["rejected"],
    ]
    for entry in entries:
        assert set(entry) >= LIST_FIELDS
    by_id = {e["message_id"]: e for e in entries}
    assert by_id[quarantined["price"]]["reason"] == "http-422"
    assert by_id[quarantined["price"]]["attempts"] == 1
    assert by_id[quarantined["rejected"]]["reason"] == "unknown-kind"
    assert by_id[quarantined["rejected"]]["source_ref"] == "Остатки 1"
    assert by_id[quarantined["rejected"]]["last_error"]


def test_quarantine_list_filters_by_kind_aggregate_reason_and_time(
    engine: Engine, clock: FakeClock, quarantined: dict[str, str]
) -> None:

    start = message(engine, quarantined["price"])["updated_at"]  # the first quarantined
    price, posting, rejected = quarantined["price"], quarantined["posting"], quarantined["rejected"]
    assert listed(engine, kind="price") == [price]
    assert listed(engine, kind="financial_posting") == [posting]
    assert listed(engine, kind="stock") == [rejected]
    assert listed(engine, aggregate="D-1") == [posting]
    assert listed(engine, reason="http-400") == [posting]
    assert listed(engine, reason="unknown-kind") == [rejected]
    assert listed(engine, reason="retry-limit") == []
    assert listed(engine, since=start + timedelta(minutes=30)) == [posting, rejected]
    assert listed(engine, until=start + timedelta(minutes=30)) == [price]
    assert listed(
        engine, since=start + timedelta(minutes=30), until=start + timedelta(minutes=90)
    ) == [posting]
    assert listed(engine, kind="price", reason="http-400") == []


# -- retry -----------------------------------------------------------------------------------


def test_retry_by_id_puts_the_message_back_to_new_with_attempts_zero_and_history(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    clock.advance(60)
    result = retry(engine, clock, [quarantined["price"]], operator="ivanova", note="card fixed")
    assert result.touched == [quarantined["price"]]

    row = message(engine, quarantined["price"])
    assert (row["state"], row["attempts"]) == ("new", 0)
    last = events(engine, quarantined["price"])[-1]
    assert (last["event"], last["from_state"], last["to_state"]) == (
        Event.OPERATOR_RETRY.value,
        "quarantined",
        "new",
    )
    assert (last["operator"], last["note"], last["at"]) == ("ivanova", "card fixed", clock.now())
    batch = claim(engine, settings, clock)
    assert [(m.message_id, m.attempt) for m in batch.messages] == [(quarantined["price"], 1)]
    assert listed(engine) == [quarantined["posting"], quarantined["rejected"]]


def test_retry_dry_run_changes_nothing(
    engine: Engine, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    before = {k: (dict(message(engine, v)), len(events(engine, v))) for k, v in quarantined.items()}
    by_id = retry(engine, clock, [quarantined["price"]], dry_run=True)
    bulk = retry(engine, clock, [], filters=Filters(kind="financial_posting"), dry_run=True)
    assert by_id.touched == [quarantined["price"]]
    assert bulk.touched == [quarantined["posting"]]
    after = {k: (dict(message(engine, v)), len(events(engine, v))) for k, v in quarantined.items()}
    assert after == before


def test_retry_of_a_rejected_staging_row_is_refused_by_id_and_skipped_in_bulk(
    engine: Engine, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    with pytest.raises(OperatorError, match="rejected staging row"):
        retry(engine, clock, [quarantined["rejected"]])
    with pytest.raises(OperatorError):
        retry(engine, clock, [quarantined["price"], quarantined["rejected"]])
    assert message(engine, quarantined["price"])["state"] == "quarantined", "nothing half-done"

    result = retry(engine, clock, [], filters=Filters(since=clock.now() - timedelta(days=1)))
    assert sorted(result.touched) == sorted([quarantined["price"], quarantined["posting"]])
    assert [mid_ for mid_, _ in result.skipped] == [quarantined["rejected"]]
    assert message(engine, quarantined["rejected"])["state"] == "quarantined"
    assert [e["event"] for e in events(engine, quarantined["rejected"])] == ["rejected"]


def test_retry_of_a_message_that_is_not_quarantined_is_refused(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    waiting = mid(engine, "D-1", 2)
    with pytest.raises(OperatorError, match="only quarantined"):
        retry(engine, clock, [waiting])
    with pytest.raises(OperatorError, match="no such message"):
        retry(engine, clock, ["price.NOPE.v1.000000000000000000000000"])


def test_operator_retry_starts_the_gap_clock_again(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-9", 2)])
    clock.advance(GAP + 1)
    with transaction(engine) as c:
        assert quarantine_gaps(c, settings.policies, clock.now(), GAP) == 1
    gap = mid(engine, "D-9", 2)
    clock.advance(3600)
    retry(engine, clock, [gap])
    clock.advance(GAP - 1)
    with transaction(engine) as c:
        assert quarantine_gaps(c, settings.policies, clock.now(), GAP) == 0
    clock.advance(2)
    with transaction(engine) as c:
        assert quarantine_gaps(c, settings.policies, clock.now(), GAP) == 1
    assert message(engine, gap)["reason"] == "sequence-gap"


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_needs_a_note(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    for note in ("", "   "):
        with pytest.raises(OperatorError, match="note"):
            cancel(engine, settings, clock, [quarantined["price"]], note)
    assert message(engine, quarantined["price"])["state"] == "quarantined"


def test_cancel_ends_cancelled_with_reason_operator_and_writes_operator_and_note(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    clock.advance(5)
    ids = [quarantined["price"], quarantined["rejected"]]
    result = cancel(engine, settings, clock, ids, "duplicate card, closed by hand")
    assert sorted(result.touched) == sorted(ids)
    for message_id in ids:
        row = message(engine, message_id)
        assert (row["state"], row["reason"]) == ("cancelled", "operator")
        last = events(engine, message_id)[-1]
        assert (last["event"], last["from_state"], last["to_state"]) == (
            Event.OPERATOR_CANCEL.value,
            "quarantined",
            "cancelled",
        )
        assert (last["operator"], last["note"]) == ("petrov", "duplicate card, closed by hand")
    assert listed(engine) == [quarantined["posting"]]
    with pytest.raises(OperatorError):
        cancel(engine, settings, clock, [quarantined["price"]], "again")


def test_cancel_of_a_strict_predecessor_lets_the_next_version_be_leased(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    assert claim(engine, settings, clock).messages == [], "D-1 v2 is held behind v1"
    cancel(engine, settings, clock, [quarantined["posting"]], "posted by hand in the shop")
    assert done_version(engine, "D-1") == 1
    batch = claim(engine, settings, clock)
    assert [(m.aggregate, m.version) for m in batch.messages] == [("D-1", 2)]


def test_retry_of_a_strict_predecessor_sends_it_before_the_next_version(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    retry(engine, clock, [quarantined["posting"]])
    assert [(m.aggregate, m.version) for m in claim(engine, settings, clock).messages] == [
        ("D-1", 1)
    ]
    assert done_version(engine, "D-1") == 0


# -- status ----------------------------------------------------------------------------------


def test_status_counts_every_state_and_a_rejected_row_counts_as_quarantined(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    take(engine, settings, clock, [price_row("SKU-2", 1), price_row("SKU-3", 1)])
    settle(engine, settings, clock, {"SKU-2": DELIVERED, "SKU-3": DELIVERED})
    cancel(engine, settings, clock, [quarantined["price"]], "not needed")
    with transaction(engine, read_only=True) as c:
        report = status.status(c, clock.now(), settings.policies)
    assert report.counts == {
        "new": 1,  # D-1 v2
        "in_progress": 0,
        "delivered": 2,
        "delayed": 0,
        "quarantined": 2,  # D-1 v1 and the rejected staging row
        "cancelled": 1,
        "withheld": 0,  # contract 13: counted from the start
    }
    assert report.new_messages == 1
    assert report.delivery_rate_per_min > 0


def test_blocked_aggregates_shows_a_strict_aggregate_held_behind_its_quarantined_predecessor(
    engine: Engine, settings: Settings, clock: FakeClock, quarantined: dict[str, str]
) -> None:
    with transaction(engine, read_only=True) as c:
        blocked = status.blocked_aggregates(c, settings.policies)
        report = status.status(c, clock.now(), settings.policies)
    assert [(b["kind"], b["aggregate"]) for b in blocked] == [("financial_posting", "D-1")]
    assert quarantined["posting"] in blocked[0]["cause"]
    assert "quarantined" in blocked[0]["cause"]
    assert blocked[0]["delivered_through"] == 0
    assert report.blocked == blocked

    cancel(engine, settings, clock, [quarantined["posting"]], "done by hand")
    with transaction(engine, read_only=True) as c:
        assert status.blocked_aggregates(c, settings.policies) == []


def test_blocked_aggregates_shows_a_gap_with_the_missing_version(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-5", 1), posting_row("D-5", 3)])
    settle(engine, settings, clock, {"D-5": DELIVERED})
    with transaction(engine, read_only=True) as c:
        [blocked] = status.blocked_aggregates(c, settings.policies)
    assert (blocked["aggregate"], blocked["delivered_through"]) == ("D-5", 1)
    assert "version 2" in blocked["cause"]


def test_an_aggregate_whose_next_version_is_in_flight_is_not_shown_as_blocked(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-7", 1), posting_row("D-7", 2)])
    batch = claim(engine, settings, clock)
    assert [(m.aggregate, m.version) for m in batch.messages] == [("D-7", 1)]
    with transaction(engine, read_only=True) as c:
        blocked = status.blocked_aggregates(c, settings.policies)
    assert blocked == [], f"D-7 v1 is being sent, nothing is missing: {blocked}"
