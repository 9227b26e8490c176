"""``stage()``: the one way the service itself writes intents into ``staging_intents``.

1C writes the table directly (contract 1); every other source goes through here: the JSON
intake and the CommerceML exchange of ``exchange serve``, the demo, the benchmarks and the
tests. Like 1C, it only ever INSERTs; the rows are judged later by intake, with the very code
that judges 1C's own rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Any

from sqlalchemy import Connection, insert

from exchange.db.schema import staging


def stage(connection: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
    """INSERT ``rows`` (column -> value) in ``connection``'s transaction, in order; returns how
    many. Consecutive rows that give the same columns go as one statement."""

    def columns(row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(row)

    for _, same in groupby(rows, key=columns):
        connection.execute(insert(staging), [dict(row) for row in same])
    return len(rows)
