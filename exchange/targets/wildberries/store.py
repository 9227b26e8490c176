"""What the Wildberries target keeps between attempts and across restarts, per channel: the
catalogue's vendor code -> ``nmID`` map and the upload tasks in flight (contract 14).

The target never reaches the database (the layers forbid it): ``exchange.app`` hands it
``exchange.db.wb_store.DbWbStore`` (tables ``wb_nm_ids``, ``wb_catalogues``, ``wb_tasks``,
migration 0027); the tests and ``exchange check`` may hand it ``MemoryWbStore``.

A task row is written before the upload goes (``upload_id`` 0: no task named yet), and again
as soon as WB answers it, before any poll: a worker that stops (or is killed) after that finds
the row on its next attempt, and polls the task instead of uploading the price again; a row
still 0 (the answer lost after the upload may have reached WB) holds the good until WB's
catalogue shows its price (docs/design/channels.md, "Work whose outcome is read later").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from exchange.domain.upload_tasks import Task as Task  # the port's value


class WbStore(Protocol):
    def nm_ids(self, vendor_codes: Iterable[str]) -> dict[str, int]:
        """The ``nmID`` of each of ``vendor_codes`` the catalogue map holds."""
        ...

    def refreshed_at(self) -> datetime | None:
        """When the map was last rebuilt from the whole catalogue (None: never)."""
        ...

    def replace_catalogue(self, found: dict[str, int], at: datetime) -> None:
        """The whole catalogue as read now: the map becomes exactly ``found``."""
        ...

    def tasks(self, nm_ids: Iterable[int]) -> dict[int, Task]:
        """The task in flight for each of ``nm_ids`` that has one."""
        ...

    def put_tasks(self, tasks: Iterable[Task]) -> None:
        """Remember (or replace) the task in flight of each task's ``nmID``."""
        ...

    def claim_tasks(self, tasks: Iterable[Task]) -> set[int]:
        """The rows of an upload about to go (``put_tasks``), each written only where its
        ``nmID`` has no row: returned, the ``nmID``s whose row another worker wrote since this
        one read them (its upload of the good made or going), not written: this upload
        leaves them out, so that one task per ``nmID`` is in flight (review wbwords34)."""
        ...

    def put_first(
        self,
        tasks: Iterable[Task],
        goods: Mapping[int, tuple[str, str]],
        prefixes: Iterable[str],
    ) -> tuple[dict[int, str], set[int]]:
        """``claim_tasks``, one good at a time across workers: a task whose good (``goods``:
        ``nmID`` -> its vendor code and the SKU uploading it) another SKU was already sent to
        (its task row, or its delivery delivered, withheld, or a receipt beginning with one
        of ``prefixes``) is not written; returned, ``nmID`` -> that SKU (issue 32), and the
        ``nmID``s ``claim_tasks`` found another's row for."""
        ...

    def drop_tasks(self, nm_ids: Iterable[int], upload_id: int) -> None:
        """The task ``upload_id`` has ended for these ``nmID``s (a row of another task stays)."""
        ...

    def landed(self, notes: Mapping[str, str]) -> None:
        """The uploads whose answer was lost have landed after their versions ended here
        (``notes``: the message id a task row named -> what WB showed): a history row each on
        that version's delivery on the channel when it has ended cancelled (superseded), its
        state unchanged (``_stuck``)."""
        ...


class MemoryWbStore:
    """A ``WbStore`` in memory, for tests and ``exchange check``."""

    def __init__(self) -> None:
        self.map: dict[str, int] = {}
        self.at: datetime | None = None
        self.in_flight: dict[int, Task] = {}
        self.notes: dict[str, str] = {}  # ``landed``'s, by message id

    def nm_ids(self, vendor_codes: Iterable[str]) -> dict[str, int]:
        return {v: self.map[v] for v in vendor_codes if v in self.map}

    def refreshed_at(self) -> datetime | None:
        return self.at

    def replace_catalogue(self, found: dict[str, int], at: datetime) -> None:
        self.map, self.at = dict(found), at

    def tasks(self, nm_ids: Iterable[int]) -> dict[int, Task]:
        return {n: self.in_flight[n] for n in nm_ids if n in self.in_flight}

    def put_tasks(self, tasks: Iterable[Task]) -> None:
        for task in tasks:
            self.in_flight[task.nm_id] = task

    def claim_tasks(self, tasks: Iterable[Task]) -> set[int]:
        listed = list(tasks)
        busy = {
            t.nm_id
            for t in listed
            if t.nm_id in self.in_flight and self.in_flight[t.nm_id].message_id != t.message_id
        }
        self.put_tasks(t for t in listed if t.nm_id not in busy)
        return busy

    def put_first(
        self,
        tasks: Iterable[Task],
        goods: Mapping[int, tuple[str, str]],
        prefixes: Iterable[str],
    ) -> tuple[dict[int, str], set[int]]:
        """One process: its own claims decide (``OneSkuAGood``)."""
        return {}, self.claim_tasks(tasks)

    def landed(self, notes: Mapping[str, str]) -> None:
        self.notes.update(notes)

    def drop_tasks(self, nm_ids: Iterable[int], upload_id: int) -> None:
        for n in nm_ids:
            held = self.in_flight.get(n)
            if held is not None and held.upload_id == upload_id:
                del self.in_flight[n]
