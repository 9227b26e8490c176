"""The composition root: settings -> engines, site client, clock -> worker.

Nothing is built at import time; the CLI calls these once per command.
"""

from __future__ import annotations

import random

import httpx
from sqlalchemy import Engine

from exchange.clock import Clock, SystemClock
from exchange.db.engine import make_engine
from exchange.db.migrate import ensure_current
from exchange.errors import ConfigurationError
from exchange.settings import Settings
from exchange.site import SiteClient
from exchange.worker import Worker


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
        site_client(settings, transport),
        clock or SystemClock(),
        staging_engine=staging_engine,
        rng=rng,
    )
