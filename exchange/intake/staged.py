"""The newer versions 1C has staged and intake has not taken yet (contract 1, 13): what
``exchange withheld release`` (and the workbench's button) must not release a price over.

A row in ``staging_intents`` is 1C's word already: once intake takes it, it is the newest
price of its good, and a withheld price a person released now would stand over it until it
lands (on a marketplace whose quarantine then withholds the newer one, for good). Each row is
judged as intake judges it: read as intake reads it (``staging_read``), its package's marks
(``_packages_marked``), ``contracts.validate`` with the configured kinds; its message is
intake's (same kind, same aggregate, ``Accepted.message_id``). A price row naming another sku
or price type than its aggregate's first version fixed is refused by intake
(``staging_store._pin_prices``), and a row whose message the service holds already is a
duplicate or a version conflict, never a new message: neither counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select

from exchange.db.schema import aggregates, messages, staging
from exchange.domain.policy import Policy
from exchange.intake.contracts import Accepted, validate
from exchange.intake.staging_read import COLUMNS, _packages_marked, read_rows


@dataclass(frozen=True, slots=True)
class Staged:
    """The newest version of an aggregate 1C staged, not taken yet, that intake would take."""

    message_id: str
    version: int


def newest_staged(
    staged: Connection,
    connection: Connection,
    wanted: Sequence[tuple[str, str, int]],
    kinds: Mapping[str, Policy],
) -> dict[tuple[str, str], Staged]:
    """For each ``(kind, aggregate, version)`` of ``wanted`` with a newer version in the
    staging table (``staged``: its database's connection) not taken yet that intake would take
    as a new message (``connection``: the service's database): that newest version, by
    ``(kind, aggregate)``."""
    if not wanted:
        return {}
    above: dict[tuple[str, str], int] = {}
    for kind, aggregate, version in wanted:
        key = (kind, aggregate)
        above[key] = min(version, above.get(key, version))
    pairs = sorted(above)
    query = (
        select(*COLUMNS)
        .where(
            staging.c.taken_at.is_(None),
            # by value lists, the pairs sorted out below: an OR of thousands of pairs (a
            # script releasing a whole list) is past SQLite's expression depth
            staging.c.kind.in_(sorted({k for k, _ in pairs})),
            staging.c.aggregate.in_(sorted({a for _, a in pairs})),
        )
        .order_by(staging.c.id)
    )
    rows = _packages_marked(staged, read_rows(staged, query))
    found: list[Accepted] = []
    for row in rows:
        key = (row.kind, row.aggregate)
        if key not in above or type(row.aggregate_version) is not int:
            continue
        if row.aggregate_version <= above[key]:
            continue
        verdict = validate(row, dict(kinds))
        if isinstance(verdict, Accepted):
            found.append(verdict)
    if not found:
        return {}
    pins = {
        (str(kind), str(aggregate)): (sku, price_type)
        for kind, aggregate, sku, price_type in connection.execute(
            select(
                aggregates.c.kind, aggregates.c.aggregate, aggregates.c.sku, aggregates.c.price_type
            ).where(
                aggregates.c.kind.in_(sorted({k for k, _ in pairs})),
                aggregates.c.aggregate.in_(sorted({item.row.aggregate for item in found})),
            )
        )
    }
    known = set(
        connection.execute(
            select(messages.c.message_id).where(
                messages.c.message_id.in_(sorted({item.message_id for item in found}))
            )
        ).scalars()
    )
    newest: dict[tuple[str, str], Staged] = {}
    for item in found:
        key = (item.row.kind, item.row.aggregate)
        if item.message_id in known:  # a duplicate or a version conflict: no new message
            continue
        pin = pins.get(key)
        if item.price is not None and pin is not None and pin[0] is not None and item.price != pin:
            continue  # another sku or price type than its aggregate's first fixed: refused
        if key not in newest or newest[key].version < item.row.aggregate_version:
            newest[key] = Staged(item.message_id, item.row.aggregate_version)
    return newest
