"""What operators see of 1C's standard exchange (contract 9a): the files received in the last
day by outcome, and the latest failures with the reason 1C was given."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection, func, select

from exchange.db.schema import cml_exchanges, messages, staging
from exchange.domain.clock import local_time
from exchange.i18n import Lang, _, pgettext
from exchange.words import error_words, name

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


def exchanges_page(connection: Connection, offset: int, limit: int) -> tuple[list[Any], int]:
    """One page of the files 1C sent, the latest first (a walk of the primary key), and how
    many there are."""
    offset, limit = min(max(offset, 0), 2**62), min(max(limit, 0), 2**62)
    rows = [
        dict(r)
        for r in connection.execute(
            select(cml_exchanges).order_by(cml_exchanges.c.id.desc()).offset(offset).limit(limit)
        ).mappings()
    ]
    total = int(connection.execute(select(func.count()).select_from(cml_exchanges)).scalar_one())
    return rows, total


def untaken_by_document(staged: Connection, documents: list[str]) -> dict[str, int]:
    """How many of each 1C document's prices still wait in the staging table for a worker to
    take them (``taken_at`` unset): read through the index of the untaken rows, as large as
    what waits (``ix_staging_intents_untaken``)."""
    if not documents:
        return {}
    rows = staged.execute(
        select(staging.c.source_ref, func.count())
        .where(staging.c.taken_at.is_(None))
        .where(staging.c.source_ref.in_(sorted(set(documents))))
        .group_by(staging.c.source_ref)
    )
    return {str(ref): int(count) for ref, count in rows}


def exchanges_table(figures: dict[str, Any], zone: str = "UTC", lang: Lang = "en") -> Table:
    table = Table(title=_("1C exchange (last 24 h): the latest failures", lang))
    for column in (
        pgettext("1C exchanges column", "at", lang),
        pgettext("1C exchanges column", "file", lang),
        pgettext("1C exchanges column", "reason", lang),
    ):
        table.add_column(column, overflow="fold")
    for failure in figures["failures"]:
        table.add_row(
            local_time(failure["at"], zone),
            Text(failure["file"] or "-"),
            Text(error_words(failure["reason"] or "", lang)),
        )
    counts = ", ".join(
        f"{name('outcome', k, lang) if lang == 'ru' else k}: {v}"
        for k, v in sorted(figures["by_outcome"].items())
    )
    table.caption = counts or _("no file received", lang)
    return table


def refused_by_document(connection: Connection, documents: list[str]) -> dict[str, int]:
    """How many of each 1C document's prices intake refused (quarantine records, contract
    15: e.g. a pair another aggregate came to own after the package was staged): what the
    answer to 1C could not yet know, shown against its exchange. Read through the index of
    ``source_ref`` (``ix_messages_source_ref_prefix``)."""
    if not documents:
        return {}
    rows = connection.execute(
        select(messages.c.source_ref, func.count())
        .where(messages.c.rejected.is_(True), messages.c.kind == "price")
        .where(messages.c.source_ref.in_(sorted(set(documents))))
        .group_by(messages.c.source_ref)
    )
    return {str(ref): int(count) for ref, count in rows}
