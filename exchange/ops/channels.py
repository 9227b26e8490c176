"""``exchange channels list`` (contract 13): every registered channel, its target, the kinds
it takes, when it was added and dropped, whether this process has it configured, and its
deliveries counted by state (a delayed one that waits, not for a retry, counted apart by what
it waits for: ``waits.wait_of``, ``status``'s rule)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, func, select

from exchange.db.channels import registry
from exchange.db.schema import deliveries
from exchange.domain.states import State
from exchange.ops.status import awaiting_by_kind


def delivery_counts(connection: Connection) -> dict[int, dict[str, int]]:
    """Each channel's deliveries by state (every state named, 0 when none), by channel id."""
    found: dict[int, dict[str, int]] = {}
    query = select(deliveries.c.channel_id, deliveries.c.state, func.count()).group_by(
        deliveries.c.channel_id, deliveries.c.state
    )
    for channel_id, state, count in connection.execute(query):
        counts = found.setdefault(channel_id, {s.value: 0 for s in State})
        counts[state] = int(count)
    return found


def list_channels(connection: Connection, configured: Iterable[str]) -> list[dict[str, Any]]:
    """The registry, oldest first, as ``channels list --json`` prints it. ``configured``: the
    names of this process's configuration (a dropped channel is never configured: a name
    configured again is registered afresh)."""
    names = set(configured)
    counts = delivery_counts(connection)
    return [
        {
            "name": channel.name,
            "target": channel.target,
            "takes": list(channel.takes),
            "added_at": channel.added_at.isoformat(),
            "dropped_at": channel.dropped_at.isoformat() if channel.dropped_at else None,
            "configured": channel.dropped_at is None and channel.name in names,
            "seed_mark": channel.seed_mark,
            "counts": counts.get(channel.id, {s.value: 0 for s in State}),
            # of the delayed, those waiting (for the marketplace, 1C or a person), not for a
            # retry (seller 34 item 3: Ozon's hourly limit is no retry, as ``status`` says)
            "awaiting": (
                awaiting_by_kind(connection, [channel.id])
                if counts.get(channel.id, {}).get(State.DELAYED.value)
                else {}
            ),
        }
        for channel in registry(connection)
    ]
