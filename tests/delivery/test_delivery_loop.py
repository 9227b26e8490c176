"""A channel's delivery loop stands on its own (exchange/worker/loop.py, docs/design/channels.md
"The worker"): built from its channel's settings and target alone, it claims, delivers and
records what is due for it, and never takes rows in: between its batches it asks the services
beside it (``Beside``), which is what lets one process run a loop per channel."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from exchange import app as bootstrap
from exchange.db.engine import make_engine
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.testing import FakeSite, fast_settings, price_row, stage
from exchange.domain.clock import FakeClock, FakeMonotonic
from exchange.intake import staging_table
from exchange.settings import Settings
from exchange.worker import CycleReport, DeliveryLoop, Metrics


class Reporter:
    """The reporter as a loop sees it: one live worker, a row nobody reads."""

    def live_workers(self, now: datetime) -> int:
        return 1

    def values(self) -> dict[str, Any]:
        return {}

    def write(self, values: dict[str, Any]) -> None:
        pass


class Beside:
    """The services beside the loop: a take-in whenever the loop asks (``due``), counted."""

    def __init__(self, settings: Settings, engine: Any, clock: FakeClock, *, due: bool) -> None:
        self.settings, self.engine, self.clock, self.due = settings, engine, clock, due
        self.take_ins = 0
        self.batches = 0

    def take_in_due(self) -> bool:
        return self.due

    async def take_in(self, report: CycleReport) -> bool:
        self.take_ins += 1
        taken = staging_table.take(self.engine, None, self.settings.kinds, self.clock.now())
        report.taken += taken.taken
        return False

    def batch_done(self) -> None:
        self.batches += 1


def _loop(tmp_path: Path, sqlite_template: SqliteTemplate) -> tuple[DeliveryLoop, Any, FakeSite]:
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    site = FakeSite()
    clock = FakeClock()
    settings = fast_settings(url, "https://site.test", batch_size=1)
    target = bootstrap.target(settings, httpx.MockTransport(site), engine=engine, clock=clock)
    loop = DeliveryLoop(
        settings,
        engine,
        target,
        clock,
        FakeMonotonic(clock),
        reports=Reporter(),
        metrics=Metrics(),
        channel_id=bootstrap.registered_ids(engine, bootstrap.chosen_channels(settings, None))[0],
    )
    return loop, engine, site


def _drain(loop: DeliveryLoop, beside: Beside) -> CycleReport:
    report = CycleReport()

    async def scenario() -> None:
        try:
            await loop.drain(report, beside)
        finally:
            await loop.aclose()

    asyncio.run(scenario())
    return report


def test_a_loop_delivers_what_was_taken_in_and_never_takes_rows_in_itself(
    tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    loop, engine, site = _loop(tmp_path, sqlite_template)
    clock = loop.clock
    assert isinstance(clock, FakeClock)
    try:
        stage(engine, [price_row("S1", 1), price_row("S2", 1)])
        staging_table.take(engine, None, loop.settings.kinds, clock.now())
        stage(engine, [price_row("S3", 1)])  # staged after the take-in: not the loop's to take
        beside = Beside(loop.settings, engine, clock, due=False)
        report = _drain(loop, beside)
    finally:
        engine.dispose()
    assert {("price", "S1"): [1], ("price", "S2"): [1]} == site.applied
    assert (2, 2, 0, 0) == (report.batches, beside.batches, beside.take_ins, report.taken)


def test_a_loop_asks_the_intake_between_batches_and_delivers_what_it_brought(
    tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    loop, engine, site = _loop(tmp_path, sqlite_template)
    clock = loop.clock
    assert isinstance(clock, FakeClock)
    try:
        stage(engine, [price_row("S1", 1)])
        staging_table.take(engine, None, loop.settings.kinds, clock.now())
        stage(engine, [price_row("S2", 1)])
        beside = Beside(loop.settings, engine, clock, due=True)
        report = _drain(loop, beside)
    finally:
        engine.dispose()
    # The first batch goes without asking (the cycle took rows in before it); before each
    # later claim the loop asks the intake, which brings S2 in within the same drain.
    assert {("price", "S1"): [1], ("price", "S2"): [1]} == site.applied
    assert 1 == report.taken and beside.take_ins >= 1


class _Overlapping:
    """The site's target with ``batches_at_once`` (Wildberries: the next batch goes while one
    is out); its sends are watched: how many are out at once, and each message sent."""

    def __init__(self, inner: Any, at_once: int | None) -> None:
        self.inner = inner
        if at_once is not None:
            self.batches_at_once = at_once
        self.name = inner.name
        self.out = 0
        self.most_out = 0
        self.sent: list[str] = []
        self.second_went = asyncio.Event()

    def requests(self, messages: Any) -> Any:
        return self.inner.requests(messages)

    async def send(self, messages: Any) -> Any:
        self.out += 1
        self.most_out = max(self.most_out, self.out)
        self.sent += [m.aggregate for m in messages]
        try:
            if len(self.sent) > 1:
                self.second_went.set()
            else:  # the first batch is held until another goes (or 1 s: it never does)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.second_went.wait(), 1.0)
            return await self.inner.send(messages)
        finally:
            self.out -= 1

    async def health(self) -> Any:
        return await self.inner.health()

    def reload_credentials(self) -> bool:
        return self.inner.reload_credentials()

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("at_once", [None, 2])
def test_a_target_that_keeps_its_own_limit_has_the_next_batch_sent_while_one_is_out(
    tmp_path: Path, sqlite_template: SqliteTemplate, at_once: int | None
) -> None:
    """Issue 32 item 6: a target with ``batches_at_once`` (Wildberries, whose every request
    waits for its account's budget) has the next batch claimed and sent while the first is
    still out, so its budget never idles through the loop's turn; every other target keeps
    one batch at a time. Either way each message is sent once and recorded delivered."""
    loop, engine, site = _loop(tmp_path, sqlite_template)
    watched = _Overlapping(loop.target, at_once)
    loop.target = watched  # type: ignore[assignment]
    clock = loop.clock
    assert isinstance(clock, FakeClock)
    try:
        stage(engine, [price_row(f"S{n}", 1) for n in range(1, 5)])
        staging_table.take(engine, None, loop.settings.kinds, clock.now())
        report = _drain(loop, Beside(loop.settings, engine, clock, due=False))
        delivered = bootstrap_states(engine)
    finally:
        engine.dispose()
    assert {("price", f"S{n}"): [1] for n in range(1, 5)} == site.applied
    assert sorted(watched.sent) == [f"S{n}" for n in range(1, 5)], "each sent once"
    assert {"delivered": 4} == delivered
    assert 4 == report.batches  # batch_size 1: a batch a message
    assert (2 if at_once else 1) == watched.most_out


def bootstrap_states(engine: Any) -> dict[str, int]:
    from sqlalchemy import func, select

    from exchange.db.engine import transaction
    from exchange.db.schema import deliveries

    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(deliveries.c.state, func.count()).group_by(deliveries.c.state)
        ).all()
    return {state: int(count) for state, count in rows}


def test_a_stop_with_two_batches_out_lets_both_finish_and_claims_no_more(
    tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    """A stop requested while two batches are out (``batches_at_once``): the requests out end
    and are recorded, nothing more is claimed, and what was not sent stays due (no lease
    left behind): nothing lost, nothing sent twice."""
    loop, engine, site = _loop(tmp_path, sqlite_template)
    watched = _Overlapping(loop.target, 2)
    loop.target = watched  # type: ignore[assignment]
    clock = loop.clock
    assert isinstance(clock, FakeClock)

    async def stop_once_both_are_out() -> None:
        await watched.second_went.wait()
        loop.request_stop()

    try:
        stage(engine, [price_row(f"S{n}", 1) for n in range(1, 5)])
        staging_table.take(engine, None, loop.settings.kinds, clock.now())
        report = CycleReport()

        async def scenario() -> None:
            stopper = asyncio.create_task(stop_once_both_are_out())
            try:
                await loop.drain(report, Beside(loop.settings, engine, clock, due=False))
            finally:
                stopper.cancel()
                await loop.aclose()

        asyncio.run(scenario())
        found = bootstrap_states(engine)
    finally:
        engine.dispose()
    assert 2 == watched.most_out and 2 == report.batches
    assert sorted(watched.sent) == ["S1", "S2"], "nothing claimed after the stop"
    assert {("price", "S1"): [1], ("price", "S2"): [1]} == site.applied
    assert {"delivered": 2, "new": 2} == found, found
