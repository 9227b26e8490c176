"""Delivery and its pace: the worker, its cycles and leases, retries, timeouts, the breaker."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from exchange.settings.rules import (
    MAX_ATTEMPTS,
    MAX_SECONDS,
    WORKER_ID_MAX,
    _default_worker_id,
    _finite_seconds,
)


class DeliverySettings(BaseModel):
    """How a worker takes, sends and retries."""

    worker_id: str = Field(
        default_factory=_default_worker_id,
        description="Name of this worker in leases, history and exchange status; must differ "
        f"between workers that share a database. 1 to {WORKER_ID_MAX} printable characters "
        "(the width of the database's worker columns).",
    )
    poll_interval: float = Field(
        5.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds between cycles of run: how soon a new staging row is taken.",
    )
    batch_size: int = Field(
        100,
        ge=1,
        le=100_000,
        description="Most messages one lease takes (and sends) in a cycle; on a marketplace "
        "channel, most products (items), each with every price type of it that is due; intake "
        "is not bounded by it.",
    )
    concurrency: int = Field(
        8,
        ge=1,
        le=1000,
        description="Most site requests in flight at once per worker process; the number in "
        "flight adapts between 1 and this to the site's pace (contract 5c).",
    )
    site_max_rate: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Requests per second to the site (more than 0, at most 1000000), a hard "
        "cap for all workers together "
        "(each live worker takes its share); unset: only the site's pace limits them.",
    )
    lease_seconds: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds a leased aggregate stays with its worker unless renewed (a live "
        "worker renews every third of it); then another worker may take it over.",
    )
    max_attempts: int = Field(
        5,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Delivery attempts on temporary failures before a message is quarantined "
        "with reason retry-limit.",
    )
    retry_base_delay: float = Field(
        1.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: the ceiling of the first retry's backoff (full jitter), doubling "
        "per attempt up to retry_max_delay; must not exceed it.",
    )
    retry_max_delay: float = Field(
        300.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: the longest wait before a retry, also the cap on Retry-After and on "
        "the circuit breaker's cool-down.",
    )
    http_timeout: float = Field(
        10.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds one site request may take in all, from waiting for a connection to "
        "the last byte of the answer's body; a request cut off by it is a temporary failure, "
        "result unknown once it was sent (the stop of `run` waits no longer for it).",
    )
    gap_timeout: float = Field(
        600.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds a strictly ordered message waits for a missing earlier version "
        "before it is quarantined with reason sequence-gap.",
    )
    breaker_threshold: int = Field(
        5,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Consecutive temporary failures on distinct aggregates, or on any while "
        "the site's health check fails too, that open the circuit breaker.",
    )

    @field_validator(
        "poll_interval",
        "lease_seconds",
        "retry_base_delay",
        "retry_max_delay",
        "http_timeout",
        "gap_timeout",
        mode="before",
    )
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("worker_id", mode="before")
    @classmethod
    def _worker_id(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if len(value) > WORKER_ID_MAX:
            raise ValueError(
                f"is {len(value)} characters long, at most {WORKER_ID_MAX} fit the database's "
                "worker columns"
            )
        if not value.isprintable():
            raise ValueError("must hold printable characters only (no control characters)")
        return value
