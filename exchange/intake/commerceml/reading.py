"""Reading one CommerceML file into a spool of rows, in this process or in a process of its own
(issue 14, item 8).

``read_into_spool`` parses and maps a file and writes its ``price`` rows to a spool file in
frames: three 8-byte numbers (the pickle's length, bytes read, offers read), then a pickle of
``(the root's ДатаФормирования, rows)``, one frame per
``CHUNK`` rows (and one at least every ``PROGRESS_BYTES`` read, for progress). The spool is
this service's own file, written by its own reader: it is never a file received.

``ReaderPool`` runs ``read_into_spool`` in a process of its own (``concurrent.futures``
with the ``spawn`` start method: the same on Linux and Windows, and never a fork of a server
that runs threads), so the frames already written can be staged while the rest of the file is
still being read (by the publishing transaction on PostgreSQL, into a scratch file on SQLite:
``publish.py``): parse and stage overlap. A reader that dies (a crash, the memory killer)
breaks the pool: ``frames`` ends, ``result`` raises ``ReaderCrashed``, the pool is made anew
for the next file.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from exchange.intake.commerceml.mapping import Counts, Mapper, SkuMode
from exchange.intake.commerceml.parse import CmlError, Header, PriceType, Readable, parse

CHUNK = 5000
PROGRESS_BYTES = 1 << 20
_HEAD = struct.Struct(">QQQ")  # the pickle's length, bytes read, offers read
_POLL_S = 0.002

Rows = list[tuple[str, str, str | None]]  # (aggregate, payload, the offer's Наименование)


class ReaderCrashed(RuntimeError):
    """The reading process stopped without an answer."""


@dataclass(slots=True)
class Read:
    """What reading one file found, besides its rows."""

    header: Header
    counts: Counts
    failure: str | None
    new_types: dict[str, PriceType] = field(default_factory=dict)
    new_articles: dict[str, str] = field(default_factory=dict)
    new_names: dict[str, str] = field(default_factory=dict)  # products' names it carried
    # aggregates two offers (or prices) of the file may map to (``Mapper.repeated``)
    repeated: set[str] = field(default_factory=set)
    # aggregates whose last offer in the file is a price not sent (``Mapper.shadowed``)
    shadowed: set[str] = field(default_factory=set)


def read_into_spool(
    path: Path,
    spool: Path,
    price_types: Mapping[str, str],
    sku_mode: SkuMode,
    types: dict[str, PriceType],
    articles: Mapping[str, str],
    names: Mapping[str, str],
    progress: Callable[[int, int], None] | None = None,
    stream: Readable | None = None,
) -> Read:
    """Parse ``path`` (or ``stream``), map its offers and append their rows to ``spool`` in
    frames; ``names``: the products' names the exchange's catalogue files gave before
    (``Mapper``). Raises ``CmlError`` (one line) for a file that cannot be read."""
    with spool.open("ab") as out:
        rows: Rows = []
        state = {"read": 0, "offers": 0, "framed": 0}
        header = Header()  # filled by the parse: the root comes before any row

        def frame() -> None:
            data = pickle.dumps((header.generated_at, rows), pickle.HIGHEST_PROTOCOL)
            out.write(_HEAD.pack(len(data), state["read"], state["offers"]) + data)
            out.flush()
            rows.clear()
            state["framed"] = state["read"]

        def write(aggregate: str, payload: str, name: str | None) -> None:
            rows.append((aggregate, payload, name))
            if len(rows) >= CHUNK:
                frame()

        def tick(read: int, offers: int) -> None:
            state["read"], state["offers"] = read, offers
            if progress is not None:
                progress(read, offers)
            if read - state["framed"] >= PROGRESS_BYTES:
                frame()

        mapper = Mapper(
            price_types=price_types,
            sku_mode=sku_mode,
            known_types=types,
            articles=articles,
            out=write,
            names=names,
        )
        if stream is not None:
            parse(stream, mapper, progress=tick, header=header)
        else:
            with path.open("rb") as source:
                parse(source, mapper, progress=tick, header=header)
        if rows:
            frame()
    return Read(
        header=header,
        counts=mapper.counts,
        failure=mapper.failure(),
        new_types=mapper.new_types,
        new_articles=mapper.new_articles,
        new_names=mapper.new_names,
        repeated=mapper.repeated,
        shadowed=mapper.shadowed,
    )


def frames(
    spool: Path,
    done: Callable[[], bool],
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[str, Rows]]:
    """``(ДатаФормирования, rows)`` of ``spool``'s frames as they are written, until
    ``done()`` and every frame written is read (a reader that stopped mid-frame leaves a part
    that is never yielded)."""
    with spool.open("rb") as source:
        while True:
            head = _exactly(source, _HEAD.size, done)
            if head is None:
                return
            size, read, offers = _HEAD.unpack(head)
            data = _exactly(source, size, done)
            if data is None:
                return
            if progress is not None:
                progress(read, offers)
            generated_at, rows = pickle.loads(data)  # our own spool
            if rows:
                yield generated_at, rows


def _exactly(source: BinaryIO, size: int, done: Callable[[], bool]) -> bytes | None:
    data = source.read(size)
    while len(data) < size:
        finished = done()  # asked before reading: what was written before it is seen
        more = source.read(size - len(data))
        data += more
        if len(data) < size and not more:
            if finished:
                return None
            time.sleep(_POLL_S)
    return data


def _ready() -> None:
    """The job that starts a reading process."""


def _end_with_parent() -> None:
    """Runs first in each reading process: a thread of its own waits on the parent's
    sentinel and ends this process as soon as ``serve`` is gone, however it ended (issue 33
    item 12: a ``serve`` killed by SIGKILL left its readers running, each blocked for ever on
    a queue whose other end it holds itself, or reading on into a spool nobody would read).

    The sentinel is the pipe ``spawn`` gives every child (``multiprocessing.parent_process``;
    on Windows the parent's process handle): the kernel closes its other end when the parent
    dies, whatever killed it, so this works wherever ``spawn`` does. Not Linux's
    ``PR_SET_PDEATHSIG``: its signal follows the parent *thread* that started the child, and
    readers are started from a thread of ``asyncio.to_thread`` (and made anew from whichever
    thread submits after a reader died), so an idle pool thread ending would kill a reader
    of a living serve; it also needs a check against a parent that died before it was set."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a child of multiprocessing (a reader run in serve's own process)
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="exchange-reader-parent", daemon=True).start()


class ReaderPool:
    """Processes that read CommerceML files: ``submit`` one file, follow its ``frames``,
    take its ``result``. Made on first use, made anew after a reader died."""

    def __init__(self, processes: int = 1, target: Callable[..., Read] = read_into_spool) -> None:
        self.processes = processes
        self.target = target
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Starts the reading processes now (a process takes a moment to start: serve
        pays it when it starts, not during 1C's first import)."""
        with self._lock:
            if self._executor is None:
                self._executor = self._new_executor()
            executor = self._executor
        for _ in range(self.processes):
            executor.submit(_ready)

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self.processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_end_with_parent,
        )

    def submit(
        self,
        path: Path,
        spool: Path,
        price_types: Mapping[str, str],
        sku_mode: SkuMode,
        types: dict[str, PriceType],
        articles: Mapping[str, str],
        names: Mapping[str, str],
    ) -> Future[Read]:
        with self._lock:
            if self._executor is None:
                self._executor = self._new_executor()
            executor = self._executor
        try:
            return executor.submit(
                self.target,
                path,
                spool,
                dict(price_types),
                sku_mode,
                types,
                dict(articles),
                dict(names),
            )
        except BrokenProcessPool:
            self._broken(executor)
            raise ReaderCrashed("the reading process could not be started") from None

    def result(self, future: Future[Read]) -> Read:
        """The reader's answer; ``CmlError`` as the reader raised it; ``ReaderCrashed`` when
        the process died."""
        try:
            return future.result()
        except BrokenProcessPool:
            with self._lock:
                executor = self._executor
            if executor is not None:
                self._broken(executor)
            raise ReaderCrashed(
                "the process reading the file stopped unexpectedly; send the file again"
            ) from None
        except CmlError:
            raise

    def _broken(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
        executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
