"""A stopped worker's pause is no current pause once a later worker of its channel ran
(second review, finding 4; contract 15, "one pause, one truth"): Ozon's 403 code 7 paused
worker A, A stopped; worker B (another id, the same channel) ran after and stopped with no
pause. ``exchange status`` said ``delivery_paused`` from A's frozen row. On SQLite and
PostgreSQL; several workers per channel each keep their own row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, insert

from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.domain.policy import KindPolicies
from exchange.ops.attention import attention
from exchange.ops.status import holding, status, worker_rows

KINDS = KindPolicies.of({})
REFUSED = "the key may read but not write (Ozon: HTTP 403 code 7)"


def _row(engine: Engine, worker_id: str, stopped: datetime, **values: object) -> None:
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=worker_id,
                started_at=stopped - timedelta(minutes=1),
                heartbeat_at=stopped,
                **{"breaker_state": "closed", "stopped_at": stopped, **values},
            )
        )


def _paused(engine: Engine, worker_id: str, stopped: datetime, channel: str = "ozon") -> None:
    _row(engine, worker_id, stopped, channel=channel, paused_reason=REFUSED,
         paused_at=stopped - timedelta(seconds=10), pause_cause="read-only-key")  # fmt: skip


def _figures(engine: Engine, now: datetime) -> tuple[object, list[str], list[str]]:
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, KINDS, live_within=60.0)
        found = attention(connection, None, figures, now, KINDS, 60.0)
        held = [w["worker_id"] for w in holding(worker_rows(connection, now))]
    return figures, [cause.code for cause in found.causes], held


def test_a_later_worker_of_the_channel_supersedes_a_stopped_ones_pause(engine: Engine) -> None:
    now = datetime.now(UTC)
    _paused(engine, "vm-1/ozon", now - timedelta(minutes=12))
    _row(engine, "vm-2/ozon", now - timedelta(minutes=5), channel="ozon")
    figures, codes, held = _figures(engine, now)
    assert (figures.delivery_paused, figures.pause) == (False, None)
    assert "paused" not in codes
    assert held == ["vm-2/ozon"]


def test_the_last_stopped_workers_own_pause_still_holds(engine: Engine) -> None:
    """No worker of the channel ran after it: its last word about the key stands, also when
    a worker of the same channel stopped before it, or one of another channel after it."""
    now = datetime.now(UTC)
    _row(engine, "vm-1/ozon", now - timedelta(minutes=12), channel="ozon")
    _paused(engine, "vm-2/ozon", now - timedelta(minutes=8))
    _row(engine, "vm-3/wb", now - timedelta(minutes=2), channel="wb")
    figures, codes, _ = _figures(engine, now)
    assert figures.delivery_paused is True
    assert figures.pause is not None and figures.pause["cause"] == "read-only-key"
    assert "paused" in codes


def test_a_killed_workers_pause_is_superseded_by_a_later_worker_of_its_channel(
    engine: Engine,
) -> None:
    """A worker killed (``kill -9``: no stopped_at) after the 403, then another worker of the
    channel ran: the killed one's frozen pause is no current pause either."""
    now = datetime.now(UTC)
    _row(engine, "vm-1/ozon", now - timedelta(minutes=12), stopped_at=None, channel="ozon",
         paused_reason=REFUSED, paused_at=now - timedelta(minutes=13),
         pause_cause="read-only-key")  # fmt: skip
    _row(engine, "vm-2/ozon", now - timedelta(minutes=5), channel="ozon")
    figures, codes, held = _figures(engine, now)
    assert (figures.delivery_paused, "paused" in codes) == (False, False)
    assert held == ["vm-2/ozon"]
