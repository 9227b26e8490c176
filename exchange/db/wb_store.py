"""The Wildberries target's store in the database (``WbStore``, targets/wildberries/store.py):
tables ``wb_nm_ids``, ``wb_catalogues`` and ``wb_tasks`` of migration 0027, one set of rows per
channel, built by ``exchange.app``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, and_, delete, func, insert, or_, select

from exchange.db.engine import is_postgres, transaction
from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import (
    aggregates,
    channels,
    deliveries,
    history,
    messages,
    wb_catalogues,
    wb_nm_ids,
    wb_tasks,
)
from exchange.db.sent_times import lock_goods, taken
from exchange.domain.states import Event, State
from exchange.domain.upload_tasks import HOLD, TASK_TIMEOUT, Task

CHUNK = 500  # keys per SELECT ... IN


class DbWbStore:
    def __init__(self, engine: Engine, channel: str, holders: Channel = None) -> None:
        """``holders``: the channel whose deliveries ``put_first`` reads (None: the one)."""
        self.engine, self.channel = engine, channel[:32]
        self.holders = holders

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
        write the same catalogue; the later one stands). The channel's ``wb_catalogues`` row is
        written first: a second rebuild waits there for the first one's commit, then deletes its
        rows (PostgreSQL's DELETE never sees rows another transaction is still inserting: the
        second's INSERT met the unique constraint, CI stop 48; SQLite: one writer at a time)."""
        from sqlalchemy.dialects import postgresql, sqlite

        upsert = postgresql.insert if is_postgres(self.engine) else sqlite.insert
        with transaction(self.engine) as connection:
            row = upsert(wb_catalogues).values(channel=self.channel, refreshed_at=at)
            connection.execute(
                row.on_conflict_do_update(
                    index_elements=[wb_catalogues.c.channel],
                    set_={"refreshed_at": row.excluded.refreshed_at},
                )
            )
            connection.execute(delete(wb_nm_ids).where(wb_nm_ids.c.channel == self.channel))
            rows = [
                {"channel": self.channel, "vendor_code": code[:200], "nm_id": nm}
                for code, nm in found.items()
            ]
            for start in range(0, len(rows), 5000):
                connection.execute(wb_nm_ids.insert(), rows[start : start + 5000])

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
        rows = self._rows(tasks)
        if not rows:
            return
        with self.engine.begin() as connection:
            self._put(connection, rows)

    def claim_tasks(self, tasks: Iterable[Task]) -> set[int]:
        """The rows of an upload about to go, each written only where its ``nmID`` has none:
        returned, the ``nmID``s whose row another worker wrote since this one read the rows
        (its upload of the good made or going), not written. Two workers writing one good's
        row at once: the later waits for the other's commit and finds its row, never a
        unique violation (review wbwords34 finding 2)."""
        rows = self._rows(tasks)
        if not rows:
            return set()
        with transaction(self.engine) as connection:
            return self._claim(connection, rows)

    def put_first(
        self,
        tasks: Iterable[Task],
        goods: Mapping[int, tuple[str, str]],
        prefixes: Iterable[str],
    ) -> tuple[dict[int, str], set[int]]:
        """``put_tasks``, one good at a time across workers (issue 32): each task's good
        (``goods``: ``nmID`` -> its vendor code, the article, and the 1C SKU uploading it)
        locked to the commit (``lock_goods``), and the SKUs already sent to it read again: a
        task row of another SKU's price (an upload made or going), or a delivery of another
        SKU with the article, delivered, withheld, or its receipt beginning with one of
        ``prefixes`` (``taken``). A task whose good another SKU was sent to is not written;
        returned: ``nmID`` -> that SKU, and (``claim_tasks``) the ``nmID``s another worker's
        row holds already. Two workers that each read the holders before the other's claim or
        row was in never both upload: the later to write finds the other's."""
        listed = list(tasks)
        if not listed:
            return {}, set()
        t, m, a = wb_tasks.c, messages.c, aggregates.c
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.holders)
            wanted = {goods[task.nm_id] for task in listed if task.nm_id in goods}
            lock_goods(connection, self.channel, {code for code, _ in wanted})
            nms = sorted({task.nm_id for task in listed})
            sent: dict[str, set[str]] = {}
            code_of = {nm: goods[nm][0] for nm in nms if nm in goods}
            for start in range(0, len(nms), CHUNK):
                rows = connection.execute(
                    select(t.nm_id, a.sku)
                    .select_from(
                        wb_tasks.join(messages, m.message_id == t.message_id).join(
                            aggregates, and_(a.kind == m.kind, a.aggregate == m.aggregate)
                        )
                    )
                    .where(t.channel == self.channel, t.nm_id.in_(nms[start : start + CHUNK]))
                )
                for nm, sku in rows:
                    if nm in code_of and sku is not None and sku != goods[nm][1]:
                        sent.setdefault(code_of[nm], set()).add(str(sku))
            others = taken(connection, ids, wanted, list(prefixes), True, sent)
            refused = {
                task.nm_id: others[goods[task.nm_id]]
                for task in listed
                if goods.get(task.nm_id) in others
            }
            rows_ = self._rows(task for task in listed if task.nm_id not in refused)
            busy = self._claim(connection, rows_) if rows_ else set()
        return refused, busy

    def _rows(self, tasks: Iterable[Task]) -> list[dict[str, Any]]:
        return [
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

    def _claim(self, connection: Connection, rows: list[dict[str, Any]]) -> set[int]:
        """``claim_tasks`` in the caller's transaction: ``ON CONFLICT DO NOTHING`` (on
        PostgreSQL it waits for a row another transaction is writing, and does nothing once
        that one commits), then the rows read back: one naming another message is another's."""
        from sqlalchemy.dialects import postgresql, sqlite

        insert = postgresql.insert if is_postgres(connection) else sqlite.insert
        c = wb_tasks.c
        connection.execute(
            insert(wb_tasks).on_conflict_do_nothing(index_elements=[c.channel, c.nm_id]), rows
        )
        mine = {r["nm_id"]: r["message_id"] for r in rows}
        nms = sorted(mine)
        busy: set[int] = set()
        for start in range(0, len(nms), CHUNK):
            found = connection.execute(
                select(c.nm_id, c.message_id).where(
                    c.channel == self.channel, c.nm_id.in_(nms[start : start + CHUNK])
                )
            )
            busy.update(int(nm) for nm, message_id in found if mine.get(int(nm)) != message_id)
        return busy

    def _put(self, connection: Connection, rows: list[dict[str, Any]]) -> None:
        c = wb_tasks.c
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

    def landed(self, notes: Mapping[str, str]) -> None:
        """A history row (``lost-send-found``, no state change) on each noted version's
        delivery on the channel that has ended cancelled (superseded): its upload, whose
        answer was lost, has landed after the version ended (``_stuck``)."""
        if not notes:
            return
        d, m = deliveries.c, messages.c
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.holders)
            wanted = sorted(notes)
            rows = connection.execute(
                select(m.message_id, d.message_pk, d.channel_id, d.state)
                .select_from(deliveries.join(messages, m.id == d.message_pk))
                .where(
                    on(d.channel_id, ids),
                    m.message_id.in_(wanted),
                    # ended (a newer version superseded it): a waiting one's last event says
                    # what it waits for (``ops.waits``), never this note
                    d.state == State.CANCELLED.value,
                )
            ).all()
            if not rows:
                return
            now = datetime.now(UTC)
            connection.execute(
                insert(history),
                [
                    {
                        "message_pk": pk,
                        "channel_id": channel,
                        "at": now,
                        "event": Event.LOST_SEND_FOUND.value,
                        "from_state": state,
                        "to_state": state,
                        "detail": notes[message_id],
                    }
                    for message_id, pk, channel, state in rows
                ],
            )


def held_until(connection: Connection, ids: list[int], now: datetime) -> datetime | None:
    """The latest end of a hold on a good that a delivery still to make (new, delayed or in
    progress) on the Wildberries channels of ``ids`` waits behind: an upload that may have
    been applied (``Task.upload_id`` 0 or below: its answer lost, or
    5xx/422; or a task WB has not shown for ``TASK_TIMEOUT``), which holds its good until WB
    shows whether it applied it, at most ``HOLD`` from the upload (``WildberriesTarget._stuck``).
    None when no such delivery waits, or every such hold has ended. The one read the backlog's
    estimate takes it from (``ops.backlog``)."""
    t, m, d, c = wb_tasks.c, messages.c, deliveries.c, channels.c
    waiting = (State.NEW.value, State.DELAYED.value, State.IN_PROGRESS.value)
    uploaded = connection.execute(
        select(func.max(t.uploaded_at))
        .select_from(
            wb_tasks.join(channels, and_(c.name == t.channel, c.target == "wildberries"))
            .join(messages, m.message_id == t.message_id)
            .join(
                deliveries,
                and_(d.channel_id == c.id, d.aggregate_id == m.aggregate_id),
            )
        )
        .where(
            on(d.channel_id, ids),
            d.state.in_(waiting),
            or_(
                t.upload_id <= 0,
                t.uploaded_at <= now - timedelta(seconds=TASK_TIMEOUT),
            ),
        )
    ).scalar_one()
    if uploaded is None:
        return None
    until: datetime = uploaded + timedelta(seconds=HOLD)
    return until if until > now else None
