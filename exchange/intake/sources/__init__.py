"""Brokers as ways in (contract 12): RabbitMQ (``rabbitmq.py``) and Redis Streams
(``redis_streams.py``). ``common.py`` holds what both do alike: read a body, judge and stage
its intents through ``intake.intents`` (the JSON intake's code), record what is not an intent
in the quarantine. ``build`` makes the configured one, for ``exchange run``, ``check`` and
``status``."""

from __future__ import annotations

from sqlalchemy import Engine

from exchange.errors import ConfigurationError
from exchange.intake.sources.common import Source
from exchange.settings import Settings


def build(settings: Settings, engine: Engine, staging_engine: Engine | None) -> Source | None:
    """The broker ``exchange run`` also takes intents from (contract 12), or None. The clients
    are imported here, so that an installation without the ``brokers`` extra runs without."""
    if settings.source is None:
        return None
    try:
        if settings.source == "rabbitmq":
            from exchange.intake.sources.rabbitmq import RabbitMqSource

            return RabbitMqSource(
                settings.rabbitmq_url or "",
                settings.rabbitmq_queue or "",
                prefetch=settings.rabbitmq_prefetch,
                engine=engine,
                staging_engine=staging_engine,
                kinds=dict(settings.kinds),
                max_items=settings.intake_max_items,
                max_bytes=settings.source_max_bytes,
            )
        from exchange.intake.sources.redis_streams import RedisSource

        return RedisSource(
            settings.redis_url or "",
            settings.redis_stream or "",
            settings.redis_group,
            consumer=settings.worker_id,
            min_idle=settings.redis_min_idle,
            engine=engine,
            staging_engine=staging_engine,
            kinds=dict(settings.kinds),
            max_items=settings.intake_max_items,
            max_bytes=settings.source_max_bytes,
        )
    except ImportError as exc:
        raise ConfigurationError(
            f"EXCHANGE_SOURCE={settings.source} needs the brokers extra "
            f"(pip install 'exchange[brokers]'): {exc.name} is missing"
        ) from None
