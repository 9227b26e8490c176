"""The brokers (contract 12, issue 26): RabbitMQ and Redis Streams as ways in, RabbitMQ as a
target.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from exchange.secrets import url_secrets
from exchange.settings.rules import MAX_SECONDS, _finite_seconds


class BrokerSettings(BaseModel):
    """EXCHANGE_SOURCE, EXCHANGE_RABBITMQ_*, EXCHANGE_REDIS_*."""

    # -- brokers (contract 12, issue 26): RabbitMQ and Redis Streams as ways in, RabbitMQ as a
    # target. One block, so that it merges beside other work on this file.
    source: Literal["rabbitmq", "redis"] | None = Field(
        None,
        description="A broker that exchange run also takes intents from at each cycle's intake "
        "(contract 12): rabbitmq or redis; unset: the staging table alone (which is read "
        "either way).",
    )
    rabbitmq_url: str | None = Field(
        None,
        description="The rabbitmq source and target: amqp://user:password@host:5672/vhost "
        "(amqps:// for TLS). Its password is never logged.",
    )
    rabbitmq_queue: str | None = Field(
        None,
        description="The rabbitmq source: the durable queue of JSON intents (it must exist). "
        "A bad message is rejected without requeue: dead-lettered where the queue has a "
        "dead-letter exchange, dropped (as an ack would) where it has none, after it is "
        "recorded in the quarantine.",
    )
    rabbitmq_exchange: str | None = Field(
        None,
        max_length=255,
        description="The rabbitmq target: the exchange each message is published to (it must "
        "exist), routing key = the message's kind, message_id = its message_id, persistent, "
        "mandatory, with publisher confirms; a message no queue is bound for is quarantined "
        "unroutable.",
    )
    rabbitmq_prefetch: int = Field(
        100,
        ge=1,
        le=65_535,
        description="The rabbitmq source: most messages delivered and not yet acknowledged.",
    )
    redis_url: str | None = Field(
        None,
        description="The redis source: redis://[:password@]host:6379/0 (rediss:// for TLS). "
        "Its password is never logged.",
    )
    redis_stream: str | None = Field(
        None, description="The redis source: the stream whose entries carry intents (field intent)."
    )
    redis_group: str = Field(
        "exchange",
        min_length=1,
        description="The redis source: the consumer group (created, from the stream's start, "
        "when missing); each worker reads as a consumer named by its worker id.",
    )
    redis_min_idle: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: an entry another consumer read and left unacknowledged this long "
        "(a dead worker) is claimed and staged.",
    )

    source_max_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        le=2**31,
        description="Bytes: a broker message (a RabbitMQ body, a stream entry's intent) larger "
        "than this is recorded in the quarantine as refused, never decoded or parsed; a pull "
        "stops taking messages past four times this in memory (contract 15). RabbitMQ's own "
        "max_message_size is the real bound on what its consumer buffers.",
    )

    @field_validator("redis_min_idle", mode="before")
    @classmethod
    def _broker_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    def broker_secrets(self) -> list[str]:
        """The passwords the brokers' URLs carry."""
        return url_secrets(self.rabbitmq_url) + url_secrets(self.redis_url)
