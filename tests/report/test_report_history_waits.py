"""The quarantine export's history says a marketplace's wait as the rest of the product does
(words item 5): a delayed state after ``awaiting-outcome`` (Ozon's hourly hold, Wildberries
waiting behind its quarantine, Yandex Market's budget) is «ждёт площадку», as ``find``,
``status`` and ``history`` say it, never «отложено (повтор)»; a retry's delay stays a retry."""

from __future__ import annotations

from datetime import timedelta

from reporttools import NOW

from exchange.report.collect import render
from exchange.report.model import Entry, HistoryEvent, Report
from exchange.report.words import history_rows
from exchange.words import state_said

WAIT = state_said("delayed", "ru", awaiting=True)
RETRY = state_said("delayed", "ru")


def _entry() -> Entry:
    at = [NOW + timedelta(minutes=n) for n in range(4)]
    history = (
        HistoryEvent(at[0], "accepted", None, "new", channel_id=2),
        HistoryEvent(
            at[1],
            "awaiting-outcome",
            "in_progress",
            "delayed",
            detail="held: 10 price updates of this product sent within the hour (Ozon's "
            "limit); goes in 60 s, not charged",
            channel_id=2,
        ),
        HistoryEvent(at[2], "retry-scheduled", "in_progress", "delayed", channel_id=2),
        HistoryEvent(at[3], "quarantined", "in_progress", "quarantined", channel_id=2),
    )
    return Entry(
        message_id="price.SKU-1.v1",
        kind="price",
        aggregate="SKU-1",
        version=1,
        reason="channel-rule",
        attempts=1,
        last_status=200,
        last_error="Ozon: price_out_of_range",
        source_ref=None,
        first_seen=NOW,
        quarantined_at=at[3],
        rejected_row=False,
        staging_id=None,
        payload="{}",
        history=history,
        channel="ozon",
        target="ozon",
    )


def test_a_marketplaces_wait_in_the_exported_history_is_a_wait_not_a_retry() -> None:
    assert WAIT != RETRY
    rows = history_rows(_entry(), "ru")
    to_states = [row[4] for row in rows]
    assert to_states[1] == WAIT, to_states  # Ozon's hold
    assert to_states[2] == RETRY, to_states  # a retry stays a retry
    page = render(Report(NOW, (_entry(),)), "html", "ru").decode()
    assert WAIT in page, "the HTML export's history says the wait too"
