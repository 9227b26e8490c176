"""Two charts for the HTML report, drawn as inline SVG by the project: no script, no library,
nothing fetched. Pure functions: numbers in, markup out; every text from the data escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from exchange.i18n import day as day_words
from exchange.report.model import DayActivity, Lang

PALETTE = ("#1f5fa8", "#c0392b", "#7b4fa0", "#b26a00", "#2e7d6b", "#5b6470", "#a23b72")
DELIVERED_COLOUR = "#2e7d32"
FAILED_COLOUR = "#c62828"
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
LABEL_CHARS = 46  # longer labels are cut; the full text is in the bar's tooltip
# A reason in words with its code beside («исчерпаны попытки (retry-limit)», «неизвестная версия
# схемы (unsupported-schema)»: 45 characters) fits the label column whole.


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _cut(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def axis(peak: int, ticks: int = 4) -> tuple[int, int]:
    """A round top and step for a count axis: the step is 1, 2 or 5 × 10^k, and at most
    ``ticks`` steps reach at or above ``peak`` (2600 -> top 3000, step 1000)."""
    if peak <= 0:
        return 1, 1
    rough = peak / ticks
    power = int(10 ** max(math.floor(math.log10(rough)), 0))
    step = next(s * power for s in (1, 2, 5, 10) if s * power >= rough)
    return step * math.ceil(peak / step), step


def bar_chart(items: Sequence[tuple[str, int]], *, title: str, empty: str, width: int = 640) -> str:
    """Horizontal bars, one per label (the words a reader reads, never a bare code), with the
    count at the end of each bar."""
    if not items:
        return f'<p class="chart-empty">{_e(empty)}</p>'
    row, top, label_w, value_w = 26, 8, 310, 56
    height = top * 2 + row * len(items)
    bar_w = width - label_w - value_w
    most = max(count for _, count in items) or 1
    parts = [
        f'<svg class="chart" role="img" aria-label="{_e(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" {FONT}>',
        f"<title>{_e(title)}</title>",
    ]
    for i, (name, count) in enumerate(items):
        y = top + i * row
        length = max(round(bar_w * count / most), 2 if count else 0)
        colour = PALETTE[i % len(PALETTE)]
        parts.append(
            f"<g><title>{_e(name)}: {count}</title>"
            f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end" fill="#1b1f24">'
            f"{_e(_cut(name))}</text>"
            f'<rect x="{label_w}" y="{y + 4}" width="{length}" height="{row - 8}" rx="2" '
            f'fill="{colour}"/>'
            f'<text x="{label_w + length + 6}" y="{y + 17}" fill="#1b1f24">{count}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def activity_chart(
    days: Sequence[DayActivity],
    *,
    title: str,
    delivered: str,
    failed: str,
    day_format: str = "%d.%m",
    lang: Lang = "en",
    width: int = 640,
    height: int = 250,
) -> str:
    """Deliveries and failures per day: a pair of bars per day over a labelled count axis."""
    left, right, top, bottom = 48, 12, 30, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    peak, step = axis(max((max(d.delivered, d.failed) for d in days), default=0))
    slot = plot_w / max(len(days), 1)
    bar = max(min(slot * 0.36, 18.0), 1.0)

    def y(value: int) -> float:
        return top + plot_h - plot_h * value / peak

    parts = [
        f'<svg class="chart" role="img" aria-label="{_e(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" {FONT}>',
        f"<title>{_e(title)}</title>",
        # the legend
        f'<rect x="{left}" y="6" width="12" height="12" fill="{DELIVERED_COLOUR}"/>'
        f'<text x="{left + 18}" y="16">{_e(delivered)}</text>'
        f'<rect x="{left + 150}" y="6" width="12" height="12" fill="{FAILED_COLOUR}"/>'
        f'<text x="{left + 168}" y="16">{_e(failed)}</text>',
    ]
    for value in range(0, peak + 1, step):  # the count axis, in round steps
        gy = y(value)
        parts.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{width - right}" y2="{gy:.1f}" '
            f'stroke="#d7dce1" stroke-width="1"/>'
            f'<text x="{left - 6}" y="{gy + 4:.1f}" text-anchor="end" fill="#5b6470">{value}</text>'
        )
    for i, day in enumerate(days):
        x = left + i * slot + slot / 2
        when = day.day.strftime(day_format)
        for offset, count, colour, name in (
            (-bar, day.delivered, DELIVERED_COLOUR, delivered),
            (0.0, day.failed, FAILED_COLOUR, failed),
        ):
            top_y = y(count)
            parts.append(
                f'<rect x="{x + offset:.1f}" y="{top_y:.1f}" width="{bar:.1f}" '
                f'height="{top + plot_h - top_y:.1f}" fill="{colour}">'
                f"<title>{_e(day_words(day.day, lang))}: {_e(name)} {count}</title></rect>"
            )
        parts.append(
            f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle" '
            f'fill="#5b6470">{_e(when)}</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" '
        'stroke="#5b6470" stroke-width="1"/></svg>'
    )
    return "".join(parts)
