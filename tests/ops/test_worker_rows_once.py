"""Each worker is shown once (review mpadvice item 7): with EXCHANGE_CHANNELS a process
writes its own row beside one row per delivery loop (``<worker id>/<channel>``, contract 13);
``status`` and the dashboard (``shown_workers``) read it on its loops' rows, never its own
row too («обработчик ещё не сообщал»), so four ``exchange run --channel X`` read as four."""

from __future__ import annotations

from exchange.ops.status import shown_workers


def _row(worker_id: str, channel: str | None = None, state: str = "live") -> dict[str, object]:
    return {"worker_id": worker_id, "channel": channel, "state": state, "stopped_at": None}


def test_a_process_with_rows_per_loop_is_shown_on_them_alone() -> None:
    rows = []
    for channel in ("site", "ozon", "wildberries", "yandex-market"):
        rows += [_row(f"w-{channel}"), _row(f"w-{channel}/{channel}", channel)]
    shown, more = shown_workers(rows)
    assert [r["worker_id"] for r in shown] == [
        "w-site/site",
        "w-ozon/ozon",
        "w-wildberries/wildberries",
        "w-yandex-market/yandex-market",
    ]
    assert more == 0


def test_a_process_without_loop_rows_keeps_its_row() -> None:
    shown, _ = shown_workers([_row("w-1"), _row("w-2/ozon", "ozon")])
    assert [r["worker_id"] for r in shown] == ["w-1", "w-2/ozon"]
