"""The intake service: a broker's intents into staging (``pull``), the staging rows into the
queue (``take``). One per process, whatever the delivery loops: a loop never takes rows in; it
asks, between its batches, whether a take-in is due (``due``: every poll interval)."""

from __future__ import annotations

import logging
import math
from datetime import datetime

from sqlalchemy import Engine, func, select

from exchange.db.channels import kept_nowhere, untaken_kinds
from exchange.db.engine import transaction
from exchange.db.schema import messages
from exchange.domain.clock import Monotonic
from exchange.errors import BrokerUnavailable, ConfigurationError
from exchange.intake import staging_table as intake
from exchange.intake.sources.common import Source
from exchange.intake.staging_table import IntakeReport
from exchange.settings import Settings

log = logging.getLogger("exchange.worker")  # the name operators filter on (docs/monitoring.md)


class IntakeService:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        monotonic: Monotonic,
        *,
        staging_engine: Engine | None = None,
        source: Source | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.staging_engine = staging_engine
        self.monotonic = monotonic
        self.source = source  # a broker taken from at each take-in (contract 12)
        self.taken_in_at = -math.inf  # when intake last ran (monotonic)

    def due(self) -> bool:
        """Whether a take-in is due: a poll interval passed since the last one began."""
        return self.monotonic.now() - self.taken_in_at >= self.settings.poll_interval

    async def pull(self) -> None:
        """The broker's intents into staging, before the table is read: a broker that cannot
        be reached (it reconnects with a backoff) or that lost its queue never stops delivery
        of what is already in."""
        if self.source is None:
            return
        try:
            await self.source.pull()
        except BrokerUnavailable as exc:
            # One line per failure: a cycle that waits out the backoff is not news.
            log.log(logging.DEBUG if exc.said else logging.WARNING, "%s", exc)
        except ConfigurationError as exc:
            log.error("%s", exc)
        except Exception as exc:
            # The database refused what the source took (contract 15): the broker keeps what
            # was not acknowledged, and the staging table is read as ever.
            log.error(
                "%s: taking from the broker failed (%s); what it holds stays there",
                self.source.name,
                type(getattr(exc, "orig", None) or exc).__name__,
            )
            log.debug("the source's failure", exc_info=True)

    def begin(self) -> float:
        """A take-in begins now (the next is due a poll interval later); returns when."""
        self.taken_in_at = self.monotonic.now()
        return self.taken_in_at

    def take(self, now: datetime) -> IntakeReport:
        """The staging rows into the queue (each message's delivery with it). Messages of a
        kind no channel takes are kept with no delivery (contract 13): one warning says how
        many of each kind this take-in made (contract 1: nothing is dropped silently)."""
        kinds = list(self.settings.kinds)
        with transaction(self.engine, read_only=True) as connection:
            untaken = untaken_kinds(connection, kinds)
        before = self.last_message_id() if untaken else 0
        report = intake.take(self.engine, self.staging_engine, self.settings.kinds, now)
        if untaken and report.messages:
            with transaction(self.engine, read_only=True) as connection:
                kept = kept_nowhere(connection, untaken, since=before)
            for kind, found in kept.items():
                log.warning(
                    "intake: %d %s message(s) taken that no channel takes: delivered nowhere "
                    "until a channel whose takes include %s is configured and seeded "
                    "(exchange channels seed NAME --from %s); exchange status counts them",
                    found["count"],
                    kind,
                    kind,
                    found["oldest"],
                )
        return report

    def last_message_id(self) -> int:
        """The highest message id now: what a take-in stores from here on lies above it."""
        with transaction(self.engine, read_only=True) as connection:
            return int(
                connection.execute(select(func.coalesce(func.max(messages.c.id), 0))).scalar_one()
            )

    def source_idle(self) -> bool:
        """Whether the broker had nothing ready at the last pull (no broker: nothing to say)."""
        return self.source is None or self.source.idle

    async def aclose(self) -> None:
        if self.source is not None:
            await self.source.aclose()
