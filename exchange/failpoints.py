"""Failpoints: named places where a crash test can make this process die. A test facility.

Production code calls ``failpoint("after-lease-commit")`` at a few points where a crash would
leave the database in an interesting state. Nothing happens unless the environment variable
``EXCHANGE_FAILPOINTS`` was set when this module was first imported (it is read once, at
import: unset, a failpoint costs one module-level dict lookup)::

    EXCHANGE_FAILPOINTS="after-lease-commit=kill@3"         SIGKILL self on the 3rd hit
    EXCHANGE_FAILPOINTS="intake-stored=kill,record-applied=kill@2"

``kill`` is ``kill@1``. Hits are counted per process (thread-safe). SIGKILL is what a power cut,
the OOM killer or ``kill -9`` does: no ``finally``, no rollback by the process, no flushing; the
database must recover on its own. ``tests/faults/test_crash_points.py`` and
``scripts/crash-runs`` use it; see docs/development.md.

The points (``POINTS``), in the order a cycle meets them:

    source-staged        a broker's batch is staged and committed; nothing is acknowledged
    intake-stored        a chunk of staging rows is stored as messages, not yet committed
                         (staging in another database: committed there, not yet marked taken)
    intake-chunk-done    a chunk is committed; the next chunk is not taken yet
    after-lease-commit   a batch is leased and committed; no request has been sent
    after-answer         one request's answer (or failure) has arrived; nothing is recorded
    record-applied       a batch's outcomes are written, in the open transaction, before the
                         aggregates are advanced and freed and before the commit

and in ``exchange channels seed``:

    seed-batch-done      a batch of a new channel's deliveries is committed with its mark

and in ``exchange serve``:

    import-started       a 1C import's ``cml_exchanges`` entry is written; the file is not read

A malformed value is a one-line error and exit 2 when the module is imported.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Final

ENV: Final = "EXCHANGE_FAILPOINTS"
POINTS: Final = frozenset(
    {
        "source-staged",
        "intake-stored",
        "intake-chunk-done",
        "after-lease-commit",
        "after-answer",
        "record-applied",
    }
) | frozenset(
    {
        "import-started",  # exchange serve's (tests/web/test_cml_interrupted.py)
        "seed-batch-done",  # exchange channels seed's (tests/queue/test_channels.py)
    }
)
_SPEC = re.compile(r"^(?P<name>[a-z-]+)=kill(?:@(?P<hit>[1-9][0-9]{0,8}))?$")


@dataclass
class _Armed:
    kill_at: int
    hits: int = 0


def parse(value: str) -> dict[str, _Armed]:
    """``name=kill[@N],...`` -> armed points; ValueError naming the bad part otherwise."""
    armed: dict[str, _Armed] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        match = _SPEC.match(part)
        if match is None:
            raise ValueError(f"{part!r} is not NAME=kill or NAME=kill@N (N >= 1)")
        name = match["name"]
        if name not in POINTS:
            raise ValueError(f"unknown failpoint {name!r} (known: {', '.join(sorted(POINTS))})")
        armed[name] = _Armed(int(match["hit"] or 1))
    return armed


def _load() -> dict[str, _Armed]:
    try:
        return parse(os.environ.get(ENV, ""))
    except ValueError as exc:
        print(f"exchange: {ENV}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


_ARMED: Final = _load()
_LOCK: Final = threading.Lock()


def failpoint(name: str) -> None:
    """Die here (SIGKILL) when ``name`` is armed and this is the hit it waits for."""
    armed = _ARMED.get(name)
    if armed is None:
        return
    with _LOCK:
        armed.hits += 1
        due = armed.hits == armed.kill_at
    if due:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
