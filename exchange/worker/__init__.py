"""The worker: one delivery loop per channel (``loop``), and beside the loops the services
every loop shares: the intake (``intake``), the sweeper (``sweeper``) and the reporter
(``reporter``); ``process.Worker`` composes them (docs/design/channels.md, "The worker").

The names below are the ones the rest of the service imports from ``exchange.worker``.
"""

from exchange.worker.common import REPORT_EVERY_S, SHARE_EVERY, CycleReport, Metrics
from exchange.worker.loop import (
    DETAIL_CAP,
    HEALTH_TTL,
    HOLD_BASE,
    PROBE_WAITS,
    STOPPING,
    TRIES_PER_CYCLE,
    DeliveryLoop,
    log_deliveries,
    log_outcome,
)
from exchange.worker.process import Worker

__all__ = [
    "DETAIL_CAP",
    "HEALTH_TTL",
    "HOLD_BASE",
    "PROBE_WAITS",
    "REPORT_EVERY_S",
    "SHARE_EVERY",
    "STOPPING",
    "TRIES_PER_CYCLE",
    "CycleReport",
    "DeliveryLoop",
    "Metrics",
    "Worker",
    "log_deliveries",
    "log_outcome",
]
