"""Every accepted message is a delivery on the one channel, and nothing else is (issue 31): a
delivery's copies of its message (``aggregate_id``, ``kind``, ``version``) equal the message's,
every aggregate has its cursor on the channel, a rejected record has no delivery, and every
history row of a delivery names that channel. (Until migration 0026 this also compared the
delivery columns with the one channel's copy on ``messages`` and ``aggregates``, the dual
write of step 2; the copy is gone.)

``differences`` says where they part (one line each; empty: they agree).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
)
from exchange.queue.deliveries import COPIED, INTAKE_EVENTS


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
            expected[(row["id"], channel)] = tuple(row[name] for name in COPIED)
    found = {
        (row["message_pk"], row["channel_id"]): tuple(row[name] for name in COPIED)
        for row in connection.execute(select(deliveries)).mappings()
    }
    lines += _compare("delivery", COPIED, expected, found)
    cursors = {(pk, channel): () for pk in connection.execute(select(aggregates.c.id)).scalars()}
    made = {
        (row["aggregate_id"], row["channel_id"]): ()
        for row in connection.execute(select(channel_aggregates)).mappings()
    }
    lines += _compare("cursor", (), cursors, made)
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
