"""The dashboard's last 24 hours: deliveries and failed attempts per hour, as a small inline
SVG column chart built from numbers only (no text from data reaches it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from sqlalchemy import Connection, func, select

from exchange.db.engine import is_postgres
from exchange.db.schema import history
from exchange.domain.states import Event
from exchange.words import Lang, word

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


@dataclass(frozen=True)
class Layout:
    """A drawing's own units. The SVG scales to the page's width (CSS), its text with it, so
    the page carries two: ``WIDE`` for a desk and ``COMPACT`` for a phone, whose text keeps
    its size at 390 px (CSS shows one)."""

    width: int
    height: int
    left: int
    top: int
    font: int
    value_font: int
    upright_values: bool  # a value above its column, or turned up along it where columns are thin


WIDE = Layout(width=1200, height=240, left=52, top=48, font=13, value_font=11, upright_values=True)
COMPACT = Layout(
    width=380, height=230, left=34, top=56, font=10, value_font=9, upright_values=False
)
RIGHT, BOTTOM = 6, 22
TICKS = 4


def scale(most: int, ticks: int = TICKS) -> list[int]:
    """The axis' values: 0 and even steps of a round size (1, 2, 2.5 or 5 × 10ⁿ, at least 1)
    up to the first at or above ``most``, at most ``ticks`` of them: 0, 25, 50, 75, 100 for 87."""
    rough = max(most, 1) / ticks
    magnitude = 10 ** math.floor(math.log10(rough))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= rough)
    whole = max(1, math.ceil(step))
    return [whole * i for i in range(max(1, math.ceil(most / whole)) + 1)]


def svg(
    hours: list[tuple[datetime, int, int]],
    title: str,
    zone: tzinfo = UTC,
    lang: Lang = "ru",
    layout: Layout = WIDE,
) -> str:
    """Stacked columns per hour, delivered (green) under failed (red), on a scale with its
    values and a grid; every hour labelled (in ``zone``), each column's figures above it
    (issue 24 item 11)."""
    ticks = scale(max((d + f for _, d, f in hours), default=0))
    top = ticks[-1]
    width, height, left = layout.width, layout.height, layout.left
    base = height - BOTTOM
    usable = base - layout.top
    column = (width - left - RIGHT) / max(len(hours), 1)
    gap = min(3.0, column / 6)
    key = layout.font + 2
    second = left + key + 8 + len(word("chart_delivered", lang)) * layout.font * 0.62 + 16
    kind = "wide" if layout.upright_values else "compact"
    parts = [
        f'<svg class="chart {kind}" role="img" viewBox="0 0 {width} {height}" '
        f'preserveAspectRatio="xMinYMin meet" font-family="sans-serif" font-size="{layout.font}">',
        f"<title>{_text(title)}</title>",
        f'<rect x="{left}" y="6" width="{key}" height="{key}" fill="#2e7d32"/>'
        f'<text x="{left + key + 5}" y="{6 + key - 2}" fill="#1d2430">'
        f"{_text(word('chart_delivered', lang))}</text>"
        f'<rect x="{second:.0f}" y="6" width="{key}" height="{key}" fill="#c62828"/>'
        f'<text x="{second + key + 5:.0f}" y="{6 + key - 2}" fill="#1d2430">'
        f"{_text(word('chart_failed', lang))}</text>",
    ]
    for value in ticks:  # the scale: a line across and its value at the left
        y = base - usable * value / top
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{width - RIGHT}" y2="{y:.1f}" '
            f'stroke="{"#8a94a6" if value == 0 else "#dde1e7"}"/>'
            f'<text class="tick" x="{left - 4}" y="{y + layout.font / 3:.1f}" '
            f'text-anchor="end" fill="#5a6475">{value}</text>'
        )
    for i, (at, delivered, failed) in enumerate(hours):
        x = left + i * column
        d_h = usable * delivered / top
        f_h = usable * failed / top
        y_d = base - d_h
        y_f = y_d - f_h
        local = at.astimezone(zone)
        middle = x + column / 2
        parts.append(
            f'<line x1="{x:.1f}" y1="{layout.top}" x2="{x:.1f}" y2="{base}" stroke="#f0f2f5"/>'
            f"<g><title>{local:%H}:00 — {delivered} / {failed}</title>"
            f'<rect x="{x + gap:.1f}" y="{y_d:.1f}" width="{column - 2 * gap:.1f}" '
            f'height="{d_h:.1f}" fill="#2e7d32"/>'
            f'<rect x="{x + gap:.1f}" y="{y_f:.1f}" width="{column - 2 * gap:.1f}" '
            f'height="{f_h:.1f}" fill="#c62828"/></g>'
            f'<text class="hour" x="{middle:.1f}" y="{height - 6}" text-anchor="middle" '
            f'fill="#5a6475">{local:%H}</text>'
        )
        parts.extend(_values(layout, middle, y_f - 3, delivered, failed))
    parts.append("</svg>")
    return "".join(parts)


def _values(layout: Layout, x: float, y: float, delivered: int, failed: int) -> list[str]:
    """A column's figures above it: failed (red) nearest the column, delivered above; turned
    up along the column where columns are too thin for a number across."""
    shown = [
        (n, name, colour)
        for n, name, colour in (
            (failed, "value failed", "#c62828"),
            (delivered, "value", "#1b5e20"),
        )
        if n
    ]
    parts = []
    for figure, name, colour in shown:
        if layout.upright_values:
            place = f'x="{x:.1f}" y="{y:.1f}" text-anchor="middle"'
            y -= layout.value_font + 1
        else:
            place = (
                f'x="{x + layout.value_font / 3:.1f}" y="{y:.1f}" '
                f'transform="rotate(-90 {x + layout.value_font / 3:.1f} {y:.1f})"'
            )
            y -= len(str(figure)) * layout.value_font * 0.62 + 4
        parts.append(
            f'<text class="{name}" {place} font-size="{layout.value_font}" '
            f'fill="{colour}">{figure}</text>'
        )
    return parts


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
