"""The scheduled report: ``exchange run`` writes the operators' report into
``EXCHANGE_REPORT_DIR`` on the ``EXCHANGE_REPORT_CRON`` schedule, when the quarantine changed.

    quarantine-20261130T080000Z.html   one per export, the newest EXCHANGE_REPORT_KEEP kept
    quarantine-latest.html             the newest, at a name operators can bookmark
    .quarantine-report.json            what was last written (survives a restart)

"Changed" is a fingerprint of the quarantine: how many entries, the newest quarantine time,
and a hash of every (message_id, quarantined_at) pair; plus the formats, language and mask
fields, so that a change of configuration writes the report anew. Every file is written
atomically (``report.write_atomically``): a reader never opens half a report.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Connection, Engine, select

from exchange.db.engine import transaction
from exchange.db.on_channels import Channel, channel_ids, listed
from exchange.domain.clock import Clock
from exchange.domain.states import State
from exchange.errors import ConfigurationError, ExchangeError
from exchange.ops.quarantine import Filters
from exchange.report.collect import collect, known_secrets, render, write_atomically
from exchange.report.model import SUFFIXES, Lang, ReportFormat
from exchange.settings import Settings

log = logging.getLogger(__name__)

PREFIX = "quarantine-"
LATEST = "latest"
STATE_FILE = ".quarantine-report.json"
STAMP = "%Y%m%dT%H%M%SZ"
# Only files of exactly this shape are ever removed by rotation: never an operator's own file.
_STAMPED = re.compile(r"^quarantine-[0-9]{8}T[0-9]{6}Z\.(csv|xlsx|html|json)$")


@dataclass(frozen=True)
class ExportConfig:
    directory: Path
    formats: tuple[ReportFormat, ...]
    keep: int
    lang: Lang
    mask_fields: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    zone: str = "UTC"  # the times people read (EXCHANGE_DISPLAY_TZ)

    @classmethod
    def from_settings(cls, settings: Settings) -> ExportConfig:
        if settings.report_dir is None:
            raise ConfigurationError("EXCHANGE_REPORT_DIR is not set")
        return cls(
            directory=settings.report_dir,
            formats=tuple(settings.report_formats),
            keep=settings.report_keep,
            lang=settings.report_lang,
            mask_fields=tuple(settings.report_mask_fields),
            secrets=tuple(known_secrets(settings)),
            zone=settings.display_tz,
        )


# -- pure pieces ---------------------------------------------------------------------------------


def stamped_name(now: datetime, fmt: ReportFormat) -> str:
    return f"{PREFIX}{now.astimezone(UTC).strftime(STAMP)}{SUFFIXES[fmt]}"


def latest_name(fmt: ReportFormat) -> str:
    return f"{PREFIX}{LATEST}{SUFFIXES[fmt]}"


def to_remove(names: Sequence[str], fmt: ReportFormat, keep: int) -> list[str]:
    """The timestamped reports of one format beyond the newest ``keep`` (names sort by time)."""
    own = sorted(name for name in names if _STAMPED.match(name) and name.endswith(SUFFIXES[fmt]))
    return own[:-keep] if keep > 0 else own


def fingerprint(rows: Sequence[tuple[str, datetime]], config: ExportConfig) -> str:
    """One string that changes whenever the quarantine (or what the report shows of it) does.

    ``rows`` are (message_id, quarantined_at) of every quarantined message. Secrets are left
    out on purpose: a hash of a short token in a file would be a token to guess offline.
    """
    digest = hashlib.sha256()
    shown = {
        "formats": config.formats,
        "lang": config.lang,
        "mask": config.mask_fields,
        "zone": config.zone,
    }
    digest.update(json.dumps(shown, sort_keys=True).encode())
    for message_id, at in sorted(rows):
        digest.update(f"\n{message_id}\t{at.isoformat()}".encode())
    newest = max((at for _, at in rows), default=None)
    return f"{len(rows)}|{newest.isoformat() if newest else '-'}|{digest.hexdigest()}"


# -- effects -------------------------------------------------------------------------------------


def quarantine_rows(connection: Connection, channel: Channel = None) -> list[tuple[str, datetime]]:
    """Each quarantined delivery on ``channel`` (every channel for None) and rejected record:
    its message_id and since when (what the fingerprint of the quarantine is made of)."""
    m = listed(channel_ids(connection, channel), states=[State.QUARANTINED.value])
    query = select(m.c.message_id, m.c.updated_at).where(m.c.state == State.QUARANTINED.value)
    return [(message_id, at) for message_id, at in connection.execute(query)]


class ScheduledExport:
    """Writes the report when the quarantine changed; remembers what it last wrote."""

    def __init__(self, config: ExportConfig, engine: Engine, clock: Clock) -> None:
        self.config = config
        self.engine = engine
        self.clock = clock
        self.last: str | None = None

    @property
    def state_path(self) -> Path:
        return self.config.directory / STATE_FILE

    def prepare(self) -> None:
        """The directory exists and is writable, and the last fingerprint is known: at start,
        so that a directory the service cannot use stops it with one line (exit 2)."""
        directory = self.config.directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"EXCHANGE_REPORT_DIR {directory} cannot be created: {exc.strerror}"
            ) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ConfigurationError(f"EXCHANGE_REPORT_DIR {directory} is not writable")
        self.last = self._read_state()

    def run(self) -> list[Path]:
        """One scheduled export. Returns the timestamped files written (none if unchanged)."""
        now = self.clock.now()
        with transaction(self.engine, read_only=True) as connection:
            # The fingerprint is read before the report: a change in between makes the next
            # export write again (harmless), never skip a change.
            current = fingerprint(quarantine_rows(connection), self.config)
            if current == self.last and self._latest_present():
                return []
            report = collect(
                connection,
                Filters(),
                now,
                mask_fields=self.config.mask_fields,
                secrets=self.config.secrets,
                zone=self.config.zone,
            )
        directory = self.config.directory
        written = []
        for fmt in self.config.formats:
            data = render(report, fmt, self.config.lang)
            path = directory / stamped_name(now, fmt)
            write_atomically(path, data)
            write_atomically(directory / latest_name(fmt), data)
            written.append(path)
            names = [p.name for p in directory.iterdir()]
            for name in to_remove(names, fmt, self.config.keep):
                (directory / name).unlink(missing_ok=True)
        self._write_state(current, now, report_total=len(report.entries))
        self.last = current
        return written

    def _latest_present(self) -> bool:
        # An operator who deleted the latest file gets it back at the next run.
        return all((self.config.directory / latest_name(f)).is_file() for f in self.config.formats)

    def _read_state(self) -> str | None:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning(
                "%s cannot be read (%s): the report will be written anew", self.state_path, exc
            )
            return None
        value = state.get("fingerprint") if isinstance(state, dict) else None
        return value if isinstance(value, str) else None

    def _write_state(self, current: str, now: datetime, *, report_total: int) -> None:
        state = {"fingerprint": current, "written_at": now.isoformat(), "entries": report_total}
        write_atomically(self.state_path, json.dumps(state, indent=2).encode("utf-8"))


def schedule(
    scheduler: AsyncIOScheduler,
    settings: Settings,
    engine: Engine,
    *,
    clock: Clock,
    stopping: Callable[[], bool],
) -> ScheduledExport | None:
    """Add the scheduled report to ``exchange run``'s scheduler (nothing without a directory).

    The first export runs at start, then on the cron schedule (UTC). The export itself runs in
    a thread: rendering a large report must not hold up the event loop, where the cycle's
    lease renewals run.
    """
    if settings.report_dir is None:
        return None
    exporter = ScheduledExport(ExportConfig.from_settings(settings), engine, clock)
    exporter.prepare()

    def say_how_it_went(running: asyncio.Future[list[Path]]) -> None:
        if running.cancelled():
            return
        exc = running.exception()
        if isinstance(exc, OSError):
            log.error(
                "quarantine report not written to %s: %s", exporter.config.directory, exc.strerror
            )
        elif isinstance(exc, ExchangeError):
            log.error("quarantine report not written: %s", exc)
        elif exc is not None:
            log.error("quarantine report not written", exc_info=exc)
        elif written := running.result():
            log.info("quarantine report written: %s", ", ".join(str(p) for p in written))

    async def export() -> None:
        if stopping():
            return
        # Said when the thread ends, also when the service stops meanwhile: the stop cancels
        # this job, never the thread, which finishes the report (asyncio.run waits for the
        # executor's threads, its loop still turning), and the log says it was written. The
        # executor's future, not a task: asyncio.run cancels the tasks left when it ends.
        running = asyncio.get_running_loop().run_in_executor(None, exporter.run)
        running.add_done_callback(say_how_it_went)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(running)

    scheduler.add_job(
        export,
        CronTrigger.from_crontab(settings.report_cron, timezone=UTC),
        id="quarantine-report",
        next_run_time=datetime.now(UTC),
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,  # late (a busy loop) is better than skipped
    )
    log.info(
        "quarantine report: %s into %s on '%s' (UTC)",
        "+".join(exporter.config.formats),
        exporter.config.directory,
        settings.report_cron,
    )
    return exporter
