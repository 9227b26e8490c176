"""Helpers of the operator tests: the pipeline's real pieces, driven step by step on a fake clock.

States are built the way the service builds them: rows staged as 1C writes them, taken by
``intake.take``, leased by ``lease.claim`` and settled by ``lease.record`` with a
``retry.Decision`` per aggregate, and moved by the operator functions of ``quarantine``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Engine, RowMapping, func, select

from exchange.db import schema
from exchange.db.engine import transaction
from exchange.db.schema import history, staging, workers
from exchange.dev.testing import one_channel_aggregates, one_channel_messages, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops import quarantine
from exchange.ops.quarantine import Filters
from exchange.queue import coalesce, lease, record
from exchange.settings import Settings

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="ok")


def refused(status_code: int) -> Decision:
    return Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        f"{status_code} from the site",
        reason=f"http-{status_code}",
        http_status=status_code,
    )


def stale_at_site(current: int) -> Decision:
    return Decision(
        Event.STALE_AT_SITE,
        State.CANCELLED,
        f"409 stale: the site holds version {current}",
        reason="stale-at-site",
        http_status=409,
        site_version=current,
    )


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    """Stage rows, take them and coalesce, as the start of a cycle does."""
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())
    with transaction(engine) as c:
        coalesce.coalesce(c, settings.policies, clock.now())


def claim(engine: Engine, settings: Settings, clock: FakeClock) -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=100,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )


def settle(
    engine: Engine, settings: Settings, clock: FakeClock, decisions: dict[str, Decision]
) -> None:
    """Lease what is due and record the given decision for each aggregate: exactly the named
    aggregates must be due, so that nothing is left leased behind the test's back."""
    batch = claim(engine, settings, clock)
    assert sorted(decisions) == sorted(m.aggregate for m in batch.messages), batch.messages
    outcomes = [(m, decisions[m.aggregate]) for m in batch.messages]
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


def rejected_ids(engine: Engine) -> list[str]:
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(messages.c.message_id).where(messages.c.rejected).order_by(messages.c.id)
            ).scalars()
        )


def message(engine: Engine, message_id: str) -> RowMapping:
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(select(messages).where(messages.c.message_id == message_id)).mappings().one()
        )


def states(engine: Engine) -> dict[str, tuple[str, str | None]]:
    """message_id -> (state, reason) of every message and quarantine record."""
    with transaction(engine, read_only=True) as c:
        return {
            m: (s, r)
            for m, s, r in c.execute(
                select(messages.c.message_id, messages.c.state, messages.c.reason)
            )
        }


def history_counts(engine: Engine) -> Counter[str]:
    """message_id -> how many history rows it has."""
    with transaction(engine, read_only=True) as c:
        return Counter(
            {
                m: n
                for m, n in c.execute(
                    select(messages.c.message_id, func.count(history.c.id))
                    .join(history, history.c.message_pk == messages.c.id)
                    .group_by(messages.c.message_id)
                )
            }
        )


def snapshot(engine: Engine) -> dict[str, Any]:
    """Everything prune could touch, to compare before and after."""
    with transaction(engine, read_only=True) as c:
        return {
            table.name: sorted(tuple(row) for row in c.execute(select(table)))
            for table in (
                schema.messages,
                schema.deliveries,
                history,
                schema.aggregates,
                schema.channel_aggregates,
                staging,
                workers,
            )
        }


def staging_rows(engine: Engine) -> list[tuple[int, bool]]:
    """(id, taken) of every staging row."""
    with transaction(engine, read_only=True) as c:
        return [
            (i, taken is not None)
            for i, taken in c.execute(
                select(staging.c.id, staging.c.taken_at).order_by(staging.c.id)
            )
        ]


def listed(engine: Engine, **filters: Any) -> list[str]:
    with transaction(engine, read_only=True) as c:
        return [e["message_id"] for e in quarantine.list_quarantined(c, Filters(**filters))]


def done_version(engine: Engine, aggregate: str) -> int:
    with transaction(engine, read_only=True) as c:
        return int(
            c.execute(
                select(aggregates.c.done_version).where(aggregates.c.aggregate == aggregate)
            ).scalar_one()
        )


def history_rows(engine: Engine, message_id: str) -> list[RowMapping]:
    pk = message(engine, message_id)["id"]
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        )
