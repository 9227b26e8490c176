"""The dual write of issue 31, step 2, as one check: ``deliveries`` and ``channel_aggregates``
hold, for the one channel, exactly what ``messages`` and ``aggregates`` hold in their delivery
columns, and every history row of a delivery names that channel.

``differences`` says where they part (one line each; empty: they agree).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from exchange.db.schema import (
    CURSOR_COLUMNS,
    DELIVERY_COLUMNS,
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
)
from exchange.queue.deliveries import COPIED, INTAKE_EVENTS

MIRRORED = (*COPIED, *DELIVERY_COLUMNS)


def differences(connection: Connection) -> list[str]:
    live = connection.execute(
        select(channels.c.id).where(channels.c.dropped_at.is_(None)).order_by(channels.c.id)
    ).scalars()
    (channel,) = list(live)  # one channel until several are configured
    lines: list[str] = []
    records: set[int] = set()
    expected: dict[tuple[int, int], tuple[Any, ...]] = {}
    for row in connection.execute(select(messages)).mappings():
        if row["rejected"]:
            records.add(row["id"])
        else:
            expected[(row["id"], channel)] = tuple(row[name] for name in MIRRORED)
    found = {
        (row["message_pk"], row["channel_id"]): tuple(row[name] for name in MIRRORED)
        for row in connection.execute(select(deliveries)).mappings()
    }
    lines += _compare("delivery", MIRRORED, expected, found)
    cursors = {
        (row["id"], channel): tuple(row[name] for name in CURSOR_COLUMNS)
        for row in connection.execute(select(aggregates)).mappings()
    }
    mirrored = {
        (row["aggregate_id"], row["channel_id"]): tuple(row[name] for name in CURSOR_COLUMNS)
        for row in connection.execute(select(channel_aggregates)).mappings()
    }
    lines += _compare("cursor", CURSOR_COLUMNS, cursors, mirrored)
    for row in connection.execute(select(history).order_by(history.c.id)).mappings():
        own = row["event"] in INTAKE_EVENTS or row["message_pk"] in records
        named = None if own else channel
        if row["channel_id"] != named:
            lines.append(
                f"history #{row['id']} ({row['event']} of message {row['message_pk']}) names "
                f"channel {row['channel_id']}, not {named}"
            )
    return lines


def _compare(
    what: str,
    names: tuple[str, ...],
    expected: dict[tuple[int, int], tuple[Any, ...]],
    found: dict[tuple[int, int], tuple[Any, ...]],
) -> list[str]:
    lines = []
    for key in sorted(set(expected) | set(found)):
        if key not in found:
            lines.append(f"{what} {key}: missing")
        elif key not in expected:
            lines.append(f"{what} {key}: has no original")
        else:
            lines += [
                f"{what} {key}: {name} {want!r} became {got!r}"
                for name, want, got in zip(names, expected[key], found[key], strict=True)
                if want != got
            ]
    return lines
