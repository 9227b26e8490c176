"""Growth: claim and record per message with a long history in the table (issue 35, item 6).

    python -m bench.growth [--sizes 10000,100000,1000000] [--messages 10000] [--batch 100]
        [--database sqlite --database postgresql] [--json]

For each database and size: a fresh database holding ``size`` messages already done, then
``--messages`` new prices (SKUs of their own) taken in and drained as ``bench.lease_cost``
does (claims of ``--batch``, each recorded delivered, no HTTP); the wall time per message of
the claims and records alone, and its ratio to the smallest size's (the goal: at most 1.25 at
1,000,000 against 10,000). The databases of every size are filled first and drained in
``--rounds`` rounds, each size once a round: the ratio is of medians measured side by side.

The history is made the service's way once, then copied set-based: 1,000 SKUs × 10 versions
are staged, taken in, coalesced (9,000 ``cancelled`` superseded) and drained (1,000
``delivered``), 10,000 messages with their aggregates, by the service's own functions; then
``INSERT … SELECT`` copies those aggregates and messages (``generate_series`` on PostgreSQL,
a recursive CTE on SQLite) under new names (``~n`` after the aggregate, the SKU and the
message_id) until the table holds ``size``: each copy is an aggregate of its own with its ten
versions, one delivered and nine cancelled, as a reload leaves them. The message history is not
copied (claim and record do not read it). Then ``VACUUM ANALYZE`` (PostgreSQL; what autovacuum
does to a table that grew) or ``ANALYZE`` (SQLite), so the planner knows the table's size.

Every size has a fresh database of its own (``harness.fresh_database``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, inspect, text

from bench.harness import fresh_database, log
from bench.lease_cost import drain, figures, take_in
from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.schema import DELIVERY_COLUMNS
from exchange.dev.testing import price_row, stage

SEED_SKUS = 1_000
SEED_VERSIONS = 10
SEED = SEED_SKUS * SEED_VERSIONS  # messages the service makes itself; copies make the rest
SIZES = (10_000, 100_000, 1_000_000)
GOAL = 1.25

# The columns a copy renames (unique, or naming the aggregate); every other column is copied
# as it is, so a column added by a later migration is copied too.
_RENAMED = {
    "aggregates": ("aggregate", "sku", "sku_key"),
    "messages": ("message_id", "message_id_key", "aggregate", "aggregate_key"),
}


# What a copy of a cursor and of a delivery keeps of the seed's (the keys are the copies').
_CURSOR_COPIED = ("channel_id", "done_version", "first_version")
_DELIVERY_COPIED = ("channel_id", "kind", "version", *DELIVERY_COLUMNS)


def series(postgres: bool, copies: int) -> tuple[str, str]:
    """(a WITH clause or "", a FROM item) giving the copies' numbers 1..copies as ``g.n``."""
    if postgres:
        return "", f"generate_series(1, {copies}) AS g(n)"
    return (
        f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {copies}) ",
        "g",
    )


def copy_statements(
    postgres: bool, aggregate_columns: list[str], message_columns: list[str], copies: int
) -> list[str]:
    """The two INSERT … SELECT that copy the seed's aggregates, then its messages (joined to
    their aggregate's copy by kind and name), ``copies`` times."""
    with_, numbers = series(postgres, copies)

    def value(table: str, column: str, alias: str) -> str:
        if column in _RENAMED[table]:
            return f"{alias}.{column} || '~' || g.n"
        return f"{alias}.{column}"

    a_columns = [c for c in aggregate_columns if c != "id"]
    m_columns = [c for c in message_columns if c != "id"]
    a_values = [value("aggregates", c, "a") for c in a_columns]
    m_values = ["c.id" if c == "aggregate_id" else value("messages", c, "m") for c in m_columns]
    # Each copy's cursors and deliveries, joined to their aggregate's and message's copy.
    d_values = ", ".join(
        f"d.{c} || '~' || g.n" if c == "superseded_by" else f"d.{c}" for c in _DELIVERY_COPIED
    )
    return [
        f"INSERT INTO aggregates ({', '.join(a_columns)}) {with_}"
        f"SELECT {', '.join(a_values)} FROM aggregates a CROSS JOIN {numbers} "
        f"WHERE a.id <= :seed_max",
        f"INSERT INTO messages ({', '.join(m_columns)}) {with_}"
        f"SELECT {', '.join(m_values)} FROM messages m CROSS JOIN {numbers} "
        f"JOIN aggregates c ON c.kind = m.kind AND c.aggregate = m.aggregate || '~' || g.n "
        f"WHERE m.id <= :seed_max_message",
        f"INSERT INTO channel_aggregates (aggregate_id, {', '.join(_CURSOR_COPIED)}) {with_}"
        f"SELECT c.id, {', '.join('ca.' + n for n in _CURSOR_COPIED)} "
        f"FROM channel_aggregates ca JOIN aggregates a ON a.id = ca.aggregate_id "
        f"CROSS JOIN {numbers} "
        f"JOIN aggregates c ON c.kind = a.kind AND c.aggregate = a.aggregate || '~' || g.n "
        f"WHERE a.id <= :seed_max",
        f"INSERT INTO deliveries (message_pk, aggregate_id, {', '.join(_DELIVERY_COPIED)}) "
        f"{with_}SELECT c.id, c.aggregate_id, {d_values} "
        f"FROM deliveries d JOIN messages m ON m.id = d.message_pk CROSS JOIN {numbers} "
        f"JOIN messages c ON c.message_id = m.message_id || '~' || g.n "
        f"WHERE m.id <= :seed_max_message",
    ]


def fill(engine: Engine, size: int) -> dict[str, Any]:
    """``size`` messages done (about: a multiple of the seed's 10,000), as the docstring says;
    returns the counts by state and the seconds it took."""
    started = time.perf_counter()
    now = datetime(2025, 1, 1, tzinfo=UTC)
    stage(
        engine,
        [
            price_row(f"OLD-{n:06d}", version, f"{(n + version) % 1000}.50")
            for version in range(1, SEED_VERSIONS + 1)
            for n in range(SEED_SKUS)
        ],
    )
    take_in(engine, now)
    drain(engine, 100, now)
    copies = max(0, round(size / SEED) - 1)
    postgres = is_postgres(engine)
    if copies:
        columns = inspect(engine)
        aggregate_columns = [c["name"] for c in columns.get_columns("aggregates")]
        message_columns = [c["name"] for c in columns.get_columns("messages")]
        with transaction(engine) as connection:
            seed_max = connection.execute(text("SELECT max(id) FROM aggregates")).scalar_one()
            seed_max_message = connection.execute(text("SELECT max(id) FROM messages")).scalar_one()
            for statement in copy_statements(postgres, aggregate_columns, message_columns, copies):
                connection.execute(
                    text(statement), {"seed_max": seed_max, "seed_max_message": seed_max_message}
                )
    with engine.connect() as connection:
        if postgres:
            connection.execution_options(isolation_level="AUTOCOMMIT").execute(
                text("VACUUM ANALYZE messages, aggregates, deliveries, channel_aggregates")
            )
        else:
            connection.execute(text("ANALYZE"))
            connection.commit()
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(text("SELECT state, count(*) FROM deliveries GROUP BY state"))
        states: dict[str, int] = {str(state): int(count) for state, count in found}
    return {"states": states, "fill_s": time.perf_counter() - started}


def drain_new(engine: Engine, messages: int, batch: int, round_: int) -> dict[str, Any]:
    """Stage ``messages`` new prices (SKUs of this round's own), take them in and drain them:
    ``lease_cost.figures`` of the drain, and its claim + record wall µs per message."""
    stage(
        engine,
        [price_row(f"R{round_}-{n:07d}", 1, f"{n % 1000}.50") for n in range(messages)],
    )
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=round_)
    take_in(engine, now)
    spent = drain(engine, batch, now + timedelta(seconds=1))
    result = figures(engine.dialect.name, messages, batch, spent)
    result["us_per_message"] = (spent["claim_s"] + spent["record_s"]) / messages * 1e6
    return result


def measure(
    databases: list[str],
    sizes: list[int],
    messages: int,
    batch: int,
    scratch: Path,
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """Every size on every database. Per database, one database per size is filled first, then
    ``rounds`` rounds drain ``messages`` new prices on each in turn (the order rotated each
    round), so that the machine's noise falls on every size alike; each row is the median
    round, with ``ratio``: its cost per message ÷ the smallest size's (medians)."""
    rows = []
    sizes = sorted(sizes)
    for database in databases:
        with contextlib.ExitStack() as stack:
            engines, filled = {}, {}
            for size in sizes:
                url = stack.enter_context(fresh_database(database, scratch))
                engines[size] = make_engine(url)
                stack.callback(engines[size].dispose)
                filled[size] = fill(engines[size], size)
                log(
                    f"growth {database}: filled {sum(filled[size]['states'].values()):,} "
                    f"in {filled[size]['fill_s']:.0f} s"
                )
            runs: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
            loads = []
            for round_ in range(rounds):
                loads.append(os.getloadavg()[0])
                turn = sizes[round_ % len(sizes) :] + sizes[: round_ % len(sizes)]
                for size in turn:
                    run = drain_new(engines[size], messages, batch, round_)
                    runs[size].append(run)
                    log(
                        f"growth {database} round {round_ + 1}: {size:,} already, "
                        f"{run['us_per_message']:.1f} µs/msg"
                    )
        first: float | None = None
        for size in sizes:
            ordered = sorted(runs[size], key=lambda r: r["us_per_message"])
            row = dict(ordered[(len(ordered) - 1) // 2])
            first = row["us_per_message"] if first is None else first
            row.update(
                size=size,
                already=sum(filled[size]["states"].values()),
                already_states=filled[size]["states"],
                fill_s=round(filled[size]["fill_s"], 1),
                us_per_message=round(row["us_per_message"], 2),
                runs_us=[round(r["us_per_message"], 1) for r in runs[size]],
                ratio=round(row["us_per_message"] / first, 3),
                load_1min=[round(x, 2) for x in loads],
            )
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| database | messages already | claim ms / batch | record ms / batch "
        "| µs per message (median) | rounds | ÷ smallest | load (1 min) per round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['database']} | {r['already']:,} | {r['claim_ms_per_batch']:.1f} "
            f"| {r['record_ms_per_batch']:.1f} | {r['us_per_message']:.1f} "
            f"| {' / '.join(f'{x:.0f}' for x in r['runs_us'])} | {r['ratio']:.2f} "
            f"| {', '.join(str(x) for x in r['load_1min'])} |"
        )
    for database in dict.fromkeys(r["database"] for r in rows):
        mine = [r for r in rows if r["database"] == database]
        if len(mine) > 1:
            last = mine[-1]
            verdict = "meets" if last["ratio"] <= GOAL else "misses"
            lines.append(
                f"\n{database}: at {last['already']:,} messages already, {last['ratio']:.2f}x the "
                f"cost at {mine[0]['already']:,} ({verdict} the goal of {GOAL}x)."
            )
    return "\n".join(lines)


def sizes_arg(text_: str) -> list[int]:
    sizes = [int(part.replace("_", "")) for part in text_.split(",") if part.strip()]
    if not sizes or min(sizes) < SEED:
        raise argparse.ArgumentTypeError(f"sizes are counts of at least {SEED:,}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=sizes_arg, default=list(SIZES), help="10000,100000,…")
    parser.add_argument("--messages", type=int, default=10_000, help="new prices drained")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="drains per size (median)")
    parser.add_argument("--database", action="append", choices=["sqlite", "postgresql"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if min(args.messages, args.batch, args.rounds) < 1:
        parser.exit(2, "python -m bench.growth: --messages, --batch, --rounds must be 1 or more\n")
    databases = args.database or ["sqlite", "postgresql"]
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(databases, args.sizes, args.messages, args.batch, Path(tmp), args.rounds)
    print(json.dumps(rows) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
