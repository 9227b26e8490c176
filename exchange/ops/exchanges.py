"""What operators see of 1C's standard exchange (contract 9a): the files received in the last
day by outcome, and the latest failures with the reason 1C was given."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection, func, select

from exchange.db.schema import cml_exchanges
from exchange.domain.clock import local_time

WITHIN = timedelta(hours=24)
FAILURES_SHOWN = 5


def onec_exchanges(connection: Connection, now: datetime) -> dict[str, Any]:
    since = now - WITHIN
    by_outcome = {
        outcome or "working": count
        for outcome, count in connection.execute(
            select(cml_exchanges.c.outcome, func.count())
            .where(cml_exchanges.c.started_at >= since)
            .group_by(cml_exchanges.c.outcome)
        )
    }
    failures = [
        {
            "at": row.started_at.isoformat(),
            "exchange": row.exchange,
            "file": row.filename,
            "reason": row.detail,
        }
        for row in connection.execute(
            select(cml_exchanges)
            .where(cml_exchanges.c.outcome == "failure", cml_exchanges.c.started_at >= since)
            .order_by(cml_exchanges.c.id.desc())
            .limit(FAILURES_SHOWN)
        )
    ]
    return {"by_outcome": by_outcome, "failures": failures}


def exchanges_table(figures: dict[str, Any], zone: str = "UTC") -> Table:
    table = Table(title="1C exchange (last 24 h): the latest failures")
    for column in ("at", "file", "reason"):
        table.add_column(column, overflow="fold")
    for failure in figures["failures"]:
        table.add_row(
            local_time(failure["at"], zone),
            Text(failure["file"] or "-"),
            Text(failure["reason"] or ""),
        )
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(figures["by_outcome"].items()))
    table.caption = counts or "no file received"
    return table
