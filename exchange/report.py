"""The operators' report (contract 8). JSON for now; CSV, XLSX and HTML build on ``collect``."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from exchange.quarantine import Filters, list_quarantined

NEXT_CHECK = {
    "invalid-contract": "Fix the document in 1C and post it again with a new version; then "
    "cancel this record.",
    "unsupported-schema": "Update the service (or the 1C exchange settings) so that both use the "
    "same payload schema; then cancel this record and re-post.",
    "unknown-kind": "Configure the kind in EXCHANGE_KINDS or stop 1C from writing it; then cancel "
    "this record.",
    "version-conflict": "Two different payloads carry one version: check in 1C which one is "
    "right and post it with a new version; then cancel this record.",
    "sequence-gap": "A previous version never arrived: check the 1C exchange log for it; retry "
    "when it has been written, or cancel to skip it.",
    "retry-limit": "The site kept failing for this message: check the last error with the site "
    "team, then retry.",
    "unknown-response": "The site answered something the service does not understand: ask the "
    "site team what it did, then retry or cancel.",
}


def next_check(reason: str | None) -> str:
    if reason and reason.startswith("http-"):
        return (
            f"The site rejected the message ({reason}): check the payload with the site "
            "team, correct it in 1C, then cancel this one or retry."
        )
    return NEXT_CHECK.get(reason or "", "Look at the message's history and decide.")


def collect(connection: Connection, filters: Filters, now: datetime) -> dict[str, Any]:
    rows = list_quarantined(connection, filters)
    for row in rows:
        row["next_check"] = next_check(row["reason"])
    oldest = min((row["quarantined_at"] for row in rows), default=None)
    return {
        "generated_at": now.isoformat(),
        "summary": {
            "total": len(rows),
            "by_reason": dict(sorted(Counter(row["reason"] for row in rows).items())),
            "oldest_age_s": (
                round((now - datetime.fromisoformat(oldest)).total_seconds(), 3) if oldest else None
            ),
        },
        "entries": rows,
    }


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_json(report: dict[str, Any], path: Path) -> None:
    write_atomically(path, json.dumps(report, ensure_ascii=False, indent=2).encode("utf-8"))
