"""A pause on a write trial (the key may not write) ends when the channel answers the trial's
write and takes it to be read later (``AWAITING`` with an HTTP status: a Wildberries task,
Yandex Market's accepted 200), as a delivered write ends it; a wait the target decided without
asking the channel (Ozon's own count of a product's hourly limit) proves nothing and keeps it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.testing import fast_settings
from exchange.domain.clock import FakeClock
from exchange.domain.states import Event
from exchange.domain.verdicts import Classification, Verdict
from exchange.queue.lease import Leased
from exchange.worker.loop import DeliveryLoop

LEASED = Leased(1, "m-1", 1, "price", "SKU-1", 1, "{}", datetime(2026, 12, 5, tzinfo=UTC), 1, 1)


@pytest.fixture
def loop(tmp_path: Path, sqlite_template: SqliteTemplate) -> Iterator[DeliveryLoop]:
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    made = bootstrap.worker(fast_settings(url, "https://site.test"), engine, clock=FakeClock())
    # Paused: the site refused a write; this message is the trial write.
    one = made.loop
    one.paused_reason, one.write_refused, one._trying_write = "the key may not write", True, True
    yield one
    engine.dispose()


@pytest.mark.parametrize(
    "taken",
    [
        Classification(
            Verdict.AWAITING,
            "Wildberries took it in task 7: its outcome is read later",
            http_status=200,
            receipt="wb-task:7",
            again_in=2.0,
        ),
        Classification(
            Verdict.AWAITING,
            "Yandex Market accepted offer 'SKU-1'; read back in 15 s",
            http_status=200,
            again_in=15.0,
        ),
    ],
)
def test_a_write_the_channel_took_to_read_later_ends_the_pause(
    loop: DeliveryLoop, taken: Classification
) -> None:
    decided = loop._judge(LEASED, taken, probing=False)

    assert decided.event is Event.AWAITING_OUTCOME and not decided.charged
    assert loop.paused_reason is None, "the key may write"


def test_a_wait_the_target_decided_without_asking_the_channel_keeps_the_pause(
    loop: DeliveryLoop,
) -> None:
    held = Classification(
        Verdict.AWAITING,
        "held: 10 price updates of this product sent within the hour (Ozon's limit)",
        again_in=3000.0,
    )

    decided = loop._judge(LEASED, held, probing=False)

    assert decided.event is Event.AWAITING_OUTCOME and not decided.charged
    assert loop.paused_reason == "the key may not write", "nothing was written"
