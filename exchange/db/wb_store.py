"""The Wildberries target's store in the database (``WbStore``, targets/wildberries/store.py):
tables ``wb_nm_ids``, ``wb_catalogues`` and ``wb_tasks`` of migration 0027, one set of rows per
channel, built by ``exchange.app``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Engine, delete, select

from exchange.db.schema import wb_catalogues, wb_nm_ids, wb_tasks
from exchange.domain.upload_tasks import Task

CHUNK = 500  # keys per SELECT ... IN


class DbWbStore:
    def __init__(self, engine: Engine, channel: str) -> None:
        self.engine, self.channel = engine, channel[:32]

    def nm_ids(self, vendor_codes: Iterable[str]) -> dict[str, int]:
        wanted = list(vendor_codes)
        found: dict[str, int] = {}
        c = wb_nm_ids.c
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(c.vendor_code, c.nm_id).where(
                        c.channel == self.channel,
                        c.vendor_code.in_(wanted[start : start + CHUNK]),
                    )
                )
                found.update({code: int(nm) for code, nm in rows})
        return found

    def refreshed_at(self) -> datetime | None:
        with self.engine.connect() as connection:
            return connection.execute(
                select(wb_catalogues.c.refreshed_at).where(wb_catalogues.c.channel == self.channel)
            ).scalar_one_or_none()

    def replace_catalogue(self, found: dict[str, int], at: datetime) -> None:
        """The map becomes ``found`` in one transaction (two workers rebuilding it at once
        write the same catalogue; the later one stands)."""
        with self.engine.begin() as connection:
            connection.execute(delete(wb_nm_ids).where(wb_nm_ids.c.channel == self.channel))
            rows = [
                {"channel": self.channel, "vendor_code": code[:200], "nm_id": nm}
                for code, nm in found.items()
            ]
            for start in range(0, len(rows), 5000):
                connection.execute(wb_nm_ids.insert(), rows[start : start + 5000])
            connection.execute(delete(wb_catalogues).where(wb_catalogues.c.channel == self.channel))
            connection.execute(
                wb_catalogues.insert(), [{"channel": self.channel, "refreshed_at": at}]
            )

    def tasks(self, nm_ids: Iterable[int]) -> dict[int, Task]:
        wanted = list(nm_ids)
        found: dict[int, Task] = {}
        c = wb_tasks.c
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(
                        c.nm_id, c.upload_id, c.price, c.message_id, c.uploaded_at, c.goods
                    ).where(c.channel == self.channel, c.nm_id.in_(wanted[start : start + CHUNK]))
                )
                for nm, upload_id, price, message_id, at, goods in rows:
                    found[int(nm)] = Task(
                        int(nm), int(upload_id), Decimal(price), message_id, at, int(goods)
                    )
        return found

    def put_tasks(self, tasks: Iterable[Task]) -> None:
        rows = [
            {
                "channel": self.channel,
                "nm_id": t.nm_id,
                "upload_id": t.upload_id,
                "price": t.price,
                "message_id": t.message_id,
                "uploaded_at": t.uploaded_at,
                "goods": t.goods,
            }
            for t in tasks
        ]
        if not rows:
            return
        c = wb_tasks.c
        with self.engine.begin() as connection:
            nms = [r["nm_id"] for r in rows]
            for start in range(0, len(nms), CHUNK):
                connection.execute(
                    delete(wb_tasks).where(
                        c.channel == self.channel, c.nm_id.in_(nms[start : start + CHUNK])
                    )
                )
            connection.execute(wb_tasks.insert(), rows)

    def drop_tasks(self, nm_ids: Iterable[int], upload_id: int) -> None:
        wanted = list(nm_ids)
        c = wb_tasks.c
        with self.engine.begin() as connection:
            for start in range(0, len(wanted), CHUNK):
                connection.execute(
                    delete(wb_tasks).where(
                        c.channel == self.channel,
                        c.upload_id == upload_id,
                        c.nm_id.in_(wanted[start : start + CHUNK]),
                    )
                )
