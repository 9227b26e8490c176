"""The composition root: settings -> engines, target, clock, metrics -> worker.

The one place that builds them: nothing is built at import time, and the CLI (and the demo,
the tests, the bench) call these once per command.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.db.migrate import ensure_current
from exchange.domain.clock import Clock, SystemClock
from exchange.errors import ConfigurationError
from exchange.ops.metrics import Health, MetricsServer, PrometheusMetrics
from exchange.settings import Settings
from exchange.targets.base import Target
from exchange.targets.shop_api.client import SiteClient
from exchange.targets.shop_api.target import ShopApiTarget
from exchange.worker import Worker

log = logging.getLogger(__name__)


def engines(settings: Settings, *, check_migrated: bool = True) -> tuple[Engine, Engine | None]:
    engine = make_engine(settings.database_url)
    staging_engine = (
        make_engine(settings.staging_url)
        if settings.staging_url and settings.staging_url != settings.database_url
        else None
    )
    if check_migrated:
        ensure_current(engine)
    return engine, staging_engine


def site_client(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> SiteClient:
    if not settings.site_url:
        raise ConfigurationError("EXCHANGE_SITE_URL is not set: the site to deliver to is required")
    return SiteClient(
        settings.site_url,
        settings.token(),
        timeout=settings.http_timeout,
        concurrency=settings.concurrency,
        transport=transport,
        verify=settings.site_tls(),
    )


def target(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> Target:
    """The shop to deliver to (contract 10: ``api``, the shop API of section 5)."""
    return ShopApiTarget(
        site_client(settings, transport),
        batch_size=settings.site_batch_size,
        token=settings.token,
    )


def worker(
    settings: Settings,
    engine: Engine,
    staging_engine: Engine | None = None,
    *,
    clock: Clock | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    rng: random.Random | None = None,
) -> Worker:
    return Worker(
        settings,
        engine,
        target(settings, transport),
        clock or SystemClock(),
        staging_engine=staging_engine,
        rng=rng,
    )


@contextmanager
def serving(settings: Settings, worker: Worker, engine: Engine) -> Iterator[MetricsServer | None]:
    """For ``exchange run``: metrics on while the block runs, when a port is configured."""
    if settings.metrics_port is None:
        yield None
        return
    metrics = PrometheusMetrics()
    health = Health(metrics, engine, poll_interval=settings.poll_interval)
    server = MetricsServer(metrics, health, host=settings.metrics_host, port=settings.metrics_port)
    with server:
        previous, worker.metrics = worker.metrics, metrics
        log.info(
            "metrics on http://%s:%d/metrics, health on /healthz",
            settings.metrics_host,
            server.port,
        )
        try:
            yield server
        finally:
            worker.metrics = previous
