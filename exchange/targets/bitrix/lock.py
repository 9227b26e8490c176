"""One exchange at a time with a 1C-Bitrix site, across workers: the port the target takes.

Bitrix's ``init`` empties its upload folder and its import keeps one set of temporary tables,
so two exchanges at once (two workers, or two processes) would spoil each other. Within a
process the target's own ``asyncio.Lock`` serialises them; across processes ``exchange.app``
hands the target a lock kept in the database (``exchange.db.target_lock.DbLock``), a row with
a holder and an end that the holder renews between steps.
"""

from __future__ import annotations

from typing import Protocol


class ExchangeLock(Protocol):
    def acquire(self, seconds: float) -> bool:
        """Take (or renew) the lock for ``seconds``; False while another holder has it."""
        ...

    def release(self) -> None: ...


class ProcessLock:
    """No other process to keep out (tests, the demo, ``exchange check``)."""

    def acquire(self, seconds: float) -> bool:
        return True

    def release(self) -> None:
        return None
