"""A CommerceML package's version lookup against a long history (issue 14): the queue holds
``--messages`` price messages (1,000,000) of ``--aggregates`` prices (10,000) with their
cursors (``done_version``), and the lookup that gives a package its version runs as the
publishing transaction runs it (``publish._next_version``, same database for staging).

Measured in the same run, alternating: *whole*, the lookup with no mark kept by the previous
package (what every package did before the mark, and what the first package after the upgrade
still does: ``max(messages.version)`` over the whole table), against *mark*, the previous
package's mark ``--since`` messages (100) behind the newest (``messages.id > mark``, a
primary-key range). Also the part both keep, the read of ``aggregates.done_version`` (one row
per price: it grows with the catalogue, not the history). Median of ``--repeat`` runs each, and
the ratio whole / mark.

    python -m bench.cml_version --database sqlite --database postgresql --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select, text, update

from bench.onec_upload import fresh_database
from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.schema import aggregates, channel_aggregates, cml_packages, messages
from exchange.intake.commerceml.publish import _next_version
from exchange.queue.deliveries import the_channel


def _series(engine: Engine, count: int) -> str:
    if is_postgres(engine):
        return f"SELECT generate_series(1, {count}) AS n"
    return f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {count}) SELECT n FROM s"  # noqa: E501


def fill(engine: Engine, count: int, prices: int) -> None:
    """``prices`` aggregates, then ``count`` delivered messages spread over them (versions
    1..count), each aggregate's cursor at its highest version: a history as prune leaves it
    until the retention has passed."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with transaction(engine) as connection:
        connection.execute(
            text(
                "INSERT INTO aggregates (kind, aggregate, sku, price_type) "
                "SELECT 'price', 'S' || n || '/retail', 'S' || n, 'retail' "
                f"FROM ({_series(engine, prices)}) AS s"
            )
        )
        connection.execute(
            text(
                "INSERT INTO messages (message_id, aggregate_id, rejected, kind, aggregate, "
                "version, schema_version, payload, created_at, taken_at, updated_at) "
                "SELECT 'm-' || n, (n % :prices) + 1, false, 'price', "
                "'S' || ((n % :prices) + 1) || '/retail', n, '1', "
                '\'{"sku": "S", "price": "1.00", "currency": "RUB", '
                '"price_type": "retail"}\', :now, :now, :now '
                f"FROM ({_series(engine, count)}) AS s"
            ),
            {"prices": prices, "now": now},
        )
        # Each aggregate's cursor on the one channel at its highest version (the messages'
        # deliveries are not written: only the cursors are read here).
        connection.execute(
            insert(channel_aggregates).from_select(
                ["aggregate_id", "channel_id", "done_version"],
                select(
                    messages.c.aggregate_id, the_channel(), func.max(messages.c.version)
                ).group_by(messages.c.aggregate_id),
            )
        )
        connection.execute(
            insert(cml_packages).values(
                digest="0" * 64, version=1, source_ref="bench", intents=1, staged_at=now
            )
        )
    with transaction(engine) as connection:
        connection.execute(text("ANALYZE"))


def lookup(engine: Engine, mark: int | None) -> float:
    """Seconds of one version lookup with the previous package's mark at ``mark``."""
    with transaction(engine) as connection:
        connection.execute(update(cml_packages).values(messages_mark=mark))
    with transaction(engine) as connection:
        started = time.perf_counter()
        _next_version(connection, None)
        elapsed = time.perf_counter() - started
    return elapsed


def cursors(engine: Engine) -> float:
    with transaction(engine, read_only=True) as connection:
        started = time.perf_counter()
        connection.execute(
            select(func.max(channel_aggregates.c.done_version))
            .join_from(channel_aggregates, aggregates)
            .where(aggregates.c.kind == "price")
        ).scalar()
        return time.perf_counter() - started


def run(kind: str, count: int, prices: int, since: int, repeat: int, scratch: Path) -> Any:
    with fresh_database(kind, scratch) as url:
        engine = make_engine(url)
        try:
            started = time.perf_counter()
            fill(engine, count, prices)
            filled = time.perf_counter() - started
            with transaction(engine, read_only=True) as connection:
                top = int(connection.execute(select(func.max(messages.c.id))).scalar() or 0)
            whole, marked, done = [], [], []
            lookup(engine, None)  # warm the cache alike for both
            for _ in range(repeat):
                whole.append(lookup(engine, None))
                marked.append(lookup(engine, top - since))
                done.append(cursors(engine))
        finally:
            engine.dispose()
    w, m = statistics.median(whole), statistics.median(marked)
    return {
        "database": kind,
        "messages": count,
        "aggregates": prices,
        "messages_since_mark": since,
        "fill_seconds": round(filled, 1),
        "whole_ms": round(w * 1000, 2),
        "mark_ms": round(m * 1000, 2),
        "of_which_done_version_ms": round(statistics.median(done) * 1000, 2),
        "ratio_whole_over_mark": round(w / m, 1),
        "runs": repeat,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database", choices=["sqlite", "postgresql"], action="append", help="repeatable"
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--aggregates", type=int, default=10_000)
    parser.add_argument("--since", type=int, default=100, help="messages since the last mark")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each case (median)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        for kind in args.database or ["sqlite"]:
            result = run(
                kind, args.messages, args.aggregates, args.since, args.repeat, Path(scratch)
            )
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
