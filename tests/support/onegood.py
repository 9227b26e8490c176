"""One 1C SKU a marketplace good (issue 32): two workers that claimed both SKUs of one good at
the same moment, each having its mark in the database before either reads the other's. The
Wildberries and Yandex Market tests share the set-up."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from follow import set_delivery
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.schema import cml_catalog, messages
from exchange.db.sent_times import DbSentTimes
from exchange.worker import Worker


def articles(engine: Engine, of: Mapping[str, str]) -> None:
    """1C's Артикул of each SKU, as the CommerceML intake keeps it (``sku_source = article``)."""
    with transaction(engine) as connection:
        for sku, article in of.items():
            connection.execute(
                cml_catalog.insert().values(
                    kind="article", key=sku, value=article, updated_at=datetime.now(UTC)
                )
            )


class BothClaimedFirst:
    """The database's holders read (``DbSentTimes.offer_holders``) held back until both
    workers ask: each has claimed its SKU (its mark is in the database) before either reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.barrier = threading.Barrier(2, timeout=10.0)
        self.asked = 0
        self.met = False  # both asked before either read
        read = DbSentTimes.offer_holders

        def held_back(inner: DbSentTimes, *args: Any, **kwargs: Any) -> dict[str, list[str]]:
            self.asked += 1
            if self.asked <= 2:
                with contextlib.suppress(threading.BrokenBarrierError):
                    self.barrier.wait()
                    self.met = True
            return read(inner, *args, **kwargs)

        monkeypatch.setattr(DbSentTimes, "offer_holders", held_back)

    async def run(
        self,
        first: Worker,
        second: Worker,
        stage_first: Callable[[], None],
        stage_second: Callable[[], None],
    ) -> None:
        """``first`` claims what ``stage_first`` gave and asks; ``stage_second``'s price is
        given only then (else ``first`` would claim both in one batch), and ``second`` claims
        it and asks: both read once both marks are in."""
        stage_first()
        one = asyncio.create_task(first.cycle())
        while self.barrier.n_waiting < 1 and not one.done():
            await asyncio.sleep(0.01)
        stage_second()
        await asyncio.gather(one, second.cycle())


def lease_later(engine: Engine, sku: str, seconds: float = 60.0) -> None:
    """The delivery of ``sku``'s price leased ``seconds`` later than it was: its worker's claim
    began after the other worker's, though it committed (and read the holders) first."""
    with transaction(engine) as connection:
        set_delivery(
            connection,
            messages.c.aggregate == sku,
            leased_at=datetime.now(UTC) + timedelta(seconds=seconds),
        )


class ReadBeforeTheOthersClaim:
    """Issue 32's last hole, made deterministic: the second worker reads the holders
    (``DbSentTimes.offer_holders``) before the first worker's claim is in (its SKU was claimed
    later, ``lease_later``), and waits there; the first worker claims its SKU, reads the
    holders (the second's SKU only claimed, and leased after its own: it ranks its own first)
    and anything else it reads before its mark (``first_at``: a method, called once after
    the holders), and waits there; the second worker then marks and sends; then the first
    goes on. Each ranked its own SKU first: only the mark may tell them apart."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, first_at: tuple[type, str] | None = None
    ) -> None:
        self.second_read, self.second_go = threading.Event(), threading.Event()
        self.first_read, self.first_go = threading.Event(), threading.Event()
        self.armed = False  # the first worker's claim may be made: hold it at its next read
        holders = (DbSentTimes, "offer_holders")
        self.first_at = first_at or holders
        read = DbSentTimes.offer_holders

        def held(inner: DbSentTimes, *args: Any, **kwargs: Any) -> dict[str, list[str]]:
            found = read(inner, *args, **kwargs)
            if not self.second_read.is_set():
                self.second_read.set()
                self.second_go.wait(10.0)
            elif self.first_at == holders:
                self._hold_first()
            return found

        monkeypatch.setattr(DbSentTimes, "offer_holders", held)
        if self.first_at != holders:
            cls, name = self.first_at
            before = getattr(cls, name)

            def first(inner: Any, *args: Any, **kwargs: Any) -> Any:
                found = before(inner, *args, **kwargs)
                self._hold_first()
                return found

            monkeypatch.setattr(cls, name, first)

    def _hold_first(self) -> None:
        if self.armed and not self.first_read.is_set():
            self.first_read.set()
            self.first_go.wait(10.0)

    async def run(
        self,
        first: Worker,
        second: Worker,
        stage_first: Callable[[], None],
        stage_second: Callable[[], None],
        later: Callable[[], None],
    ) -> None:
        """``second`` claims what ``stage_second`` gave and reads the holders; ``later`` moves
        its lease after the first's; ``first`` claims ``stage_first``'s and reads; ``second``
        marks and sends; ``first`` goes on."""
        stage_second()
        two = asyncio.create_task(second.cycle())
        while not self.second_read.is_set() and not two.done():
            await asyncio.sleep(0.01)
        later()
        self.armed = True
        stage_first()
        one = asyncio.create_task(first.cycle())
        while not self.first_read.is_set() and not one.done():
            await asyncio.sleep(0.01)
        self.second_go.set()
        await two
        self.first_go.set()
        await one
