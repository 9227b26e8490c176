"""The dashboard's last 24 hours: deliveries and failed attempts per hour, as a small inline
SVG column chart built from numbers only (no text from data reaches it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from sqlalchemy import Connection, func, select

from exchange.db.engine import is_postgres
from exchange.db.schema import history
from exchange.domain.states import Event

DELIVERED = (Event.DELIVERED.value,)
FAILED = (Event.RETRY_SCHEDULED.value, Event.QUARANTINED.value, Event.LEASE_EXPIRED.value)
HOURS = 24


def last_day(connection: Connection, now: datetime) -> list[tuple[datetime, int, int]]:
    """(hour, delivered, failed) for each of the last 24 hours, oldest first (UTC hours)."""
    top = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    first = top - timedelta(hours=HOURS - 1)
    if is_postgres(connection):
        hour = func.to_char(func.date_trunc("hour", history.c.at), "YYYY-MM-DD HH24")
    else:
        hour = func.strftime("%Y-%m-%d %H", history.c.at)
    rows = connection.execute(
        select(hour, history.c.event, func.count())
        .where(history.c.at >= first, history.c.event.in_([*DELIVERED, *FAILED]))
        .group_by(hour, history.c.event)
    ).all()
    delivered: dict[str, int] = {}
    failed: dict[str, int] = {}
    for key, event, count in rows:
        target = delivered if event in DELIVERED else failed
        target[str(key)] = target.get(str(key), 0) + int(count)
    result = []
    for i in range(HOURS):
        at = first + timedelta(hours=i)
        key = at.strftime("%Y-%m-%d %H")
        result.append((at, delivered.get(key, 0), failed.get(key, 0)))
    return result


def svg(hours: list[tuple[datetime, int, int]], title: str, zone: tzinfo = UTC) -> str:
    """Stacked columns: delivered (green) under failed (red); hour labels every 3 hours."""
    width, height, bottom, left = 720, 130, 18, 34
    column = (width - left) / max(len(hours), 1)
    most = max((d + f for _, d, f in hours), default=0) or 1
    usable = height - bottom - 6
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{_text(title)}</title>",
        f'<text x="2" y="12" fill="#5a6475">{most}</text>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" '
        'stroke="#8a94a6"/>',
    ]
    for i, (at, delivered, failed) in enumerate(hours):
        x = left + i * column + 2
        w = max(column - 4, 1)
        d_h = usable * delivered / most
        f_h = usable * failed / most
        y_d = height - bottom - d_h
        y_f = y_d - f_h
        local = at.astimezone(zone)
        parts.append(
            f"<g><title>{local:%H}:00 — {delivered} / {failed}</title>"
            f'<rect x="{x:.1f}" y="{y_d:.1f}" width="{w:.1f}" height="{d_h:.1f}" fill="#2e7d32"/>'
            f'<rect x="{x:.1f}" y="{y_f:.1f}" width="{w:.1f}" height="{f_h:.1f}" fill="#c62828"/>'
            "</g>"
        )
        if i % 3 == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 4}" fill="#5a6475">{local:%H}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
