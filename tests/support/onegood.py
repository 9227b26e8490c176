"""One 1C SKU a marketplace good (issue 32): two workers that claimed both SKUs of one good at
the same moment, each having its mark in the database before either reads the other's. The
Wildberries and Yandex Market tests share the set-up."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.schema import cml_catalog
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
