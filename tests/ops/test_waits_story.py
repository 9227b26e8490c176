"""Along a message's history, a delayed state waits for the channel exactly where the rule
``find`` and ``status`` share says so (``exchange.ops.waits``): after an ``awaiting-outcome``
on the same channel, not after a ``retry-scheduled`` (sellerwords item 1)."""

from __future__ import annotations

from exchange.ops.waits import awaiting_in_story


def test_a_delayed_state_waits_for_the_channel_after_its_awaiting_outcome_only() -> None:
    story = [
        (None, "accepted", None, "pending"),
        ("ozon", "taken", "pending", "in_progress"),
        ("ozon", "awaiting-outcome", "in_progress", "delayed"),
        ("wb", "retry-scheduled", "in_progress", "delayed"),
        ("ozon", "taken", "delayed", "in_progress"),
        ("ozon", "retry-scheduled", "in_progress", "delayed"),
        ("ozon", "taken", "delayed", "in_progress"),
    ]
    assert awaiting_in_story(story) == [
        (False, False),
        (False, False),
        (False, True),  # into the marketplace's wait
        (False, False),  # another channel's retry
        (True, False),  # out of the wait
        (False, False),  # into a retry
        (False, False),
    ]
