"""RabbitMQ as a way in (contract 12): a durable queue of JSON intents.

Why aio-pika: the asyncio client the RabbitMQ project lists for Python, maintained, typed, on
aiormq/pamqp (a complete AMQP 0-9-1 codec); the worker's cycle is asyncio already, so consuming
needs no thread. Its "robust" connection is not used: a connection lost mid-batch makes the
delivery tags of the batch worthless, so this module reconnects itself, with a backoff, and
lets the broker deliver again whatever was not acknowledged (a ``duplicate`` at intake).

A consumer with ``EXCHANGE_RABBITMQ_PREFETCH`` (``basic.qos``) fills a buffer between cycles;
each cycle's ``pull`` stages what is buffered (``common.take``), commits, and only then
acknowledges. A body that is not intents is recorded first and then rejected without requeue:
the broker dead-letters it where the queue has a dead-letter exchange (by argument or by
policy, which no client can read) and drops it where it has none, which is what an
acknowledgement would do; it is never requeued, so it never comes back in a loop.

When the broker cancels the consumer (``basic.cancel``: the queue deleted and declared again,
its leader moved) the next pull consumes again after a passive declare, with the backoff while
the queue is missing; ``health`` says meanwhile that it does not consume (contract 15). A batch
takes no more than four times ``EXCHANGE_SOURCE_MAX_BYTES`` of bodies from the buffer; what the
broker pushes into the buffer is bounded by the prefetch and the broker's own
``max_message_size`` (RabbitMQ's setting, the real bound there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue
from aio_pika.connection import make_url
from sqlalchemy import Engine

from exchange.domain.policy import Policy
from exchange.errors import BrokerUnavailable, ConfigurationError
from exchange.failpoints import failpoint
from exchange.intake.sources.common import (
    MEMORY_FACTOR,
    Health,
    Received,
    Taken,
    digest_key,
    log_taken,
    safe_key,
    take,
)

log = logging.getLogger(__name__)

WAIT_FOR_MORE = 0.5  # seconds a pull waits for a delivery the broker says is ready
# Seconds a pull waits when the buffer is empty and the broker says nothing is ready: a message
# the broker has just handed to this consumer counts as ready no more, and may still be on its
# way to the buffer (the queue's answer can overtake the delivery).
GRACE = 0.1
ROUNDS = 50  # most buffers of ``prefetch`` messages one pull takes (the cycle goes on after)
BACKOFF_BASE, BACKOFF_MAX = 0.2, 30.0
CONNECT_TIMEOUT = 10.0


def connection_errors() -> tuple[type[BaseException], ...]:
    return (
        OSError,
        asyncio.TimeoutError,
        aiormq.exceptions.AMQPConnectionError,
        aiormq.exceptions.ChannelInvalidStateError,
        aio_pika.exceptions.AMQPError,
        ConnectionError,
        RuntimeError,  # aio-pika's "connection closed" on a channel of a dead connection
    )


async def connect(url: str) -> AbstractConnection:
    """``aio_pika.connect``, closing what a failed attempt leaves behind: an unclosed
    connection's ``__del__`` schedules its close on whatever event loop runs when it is
    collected, and that close is never awaited."""
    connection = aio_pika.Connection(make_url(url))
    try:
        await connection.connect(timeout=CONNECT_TIMEOUT)
    except BaseException:
        with contextlib.suppress(Exception):
            await connection.close()
        raise
    return connection


def describe(exc: BaseException, url: str) -> str:
    """One line about a broker failure, without the URL's password."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}".replace(url, "<url>")


class RabbitMqSource:
    name = "rabbitmq"

    def __init__(
        self,
        url: str,
        queue: str,
        *,
        prefetch: int,
        engine: Engine,
        staging_engine: Engine | None,
        kinds: dict[str, Policy],
        max_items: int,
        max_bytes: int,
    ) -> None:
        self.url = url
        self.queue_name = queue
        self.prefetch = prefetch
        self.engine = engine
        self.staging_engine = staging_engine
        self.kinds = kinds
        self.max_items = max_items
        self.max_bytes = max_bytes
        # Most bytes of bodies a batch takes from the buffer (contract 15). What the broker has
        # pushed into the buffer is bounded by prefetch x its max_message_size, not by us.
        self.memory = MEMORY_FACTOR * max_bytes
        self._carry: AbstractIncomingMessage | None = None  # taken, for the next batch
        self._consumer_tag: str | None = None
        # Why the broker cancelled the consumer, until it consumes again (``_on_cancel``).
        self._cancelled: str | None = None
        self.health = Health()
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._queue: AbstractQueue | None = None
        self._buffer: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._failures = 0
        self._retry_at = 0.0
        self._idle = False
        self.last_error: str | None = None

    # -- the connection ------------------------------------------------------------------

    async def _connect(self) -> AbstractQueue:
        open_ = self._channel is not None and not self._channel.is_closed
        if self._queue is not None and open_ and self._cancelled is None:
            return self._queue
        if self._queue is not None and self._cancelled is None:
            # lost between two pulls: said once, as one lost mid-pull
            self._fail("the broker closed the connection between two pulls")
            log.warning("RabbitMQ: the connection was lost (%s); reconnecting", self.last_error)
        await self._drop()
        now = time.monotonic()
        if now < self._retry_at:
            raise BrokerUnavailable(
                f"RabbitMQ: reconnecting in {self._retry_at - now:.1f} s ({self.last_error})",
                said=True,
            )
        try:
            self._connection = await connect(self.url)
            self._channel = await self._connection.channel()
            await self._channel.set_qos(prefetch_count=self.prefetch)
            queue = await self._channel.declare_queue(self.queue_name, passive=True)
            self._consumer_tag = await queue.consume(self._buffer.put)
            channel = await self._channel.get_underlay_channel()
            channel.on_consumer_cancel_callbacks.add(self._on_cancel)
        except aiormq.exceptions.ChannelNotFoundEntity:
            await self._drop()
            self._fail(f"the queue {self.queue_name!r} does not exist")
            if self._cancelled is not None:  # deleted, to be declared again: said at the cancel
                raise BrokerUnavailable(
                    f"RabbitMQ: the queue {self.queue_name} is still missing", said=True
                ) from None
            raise ConfigurationError(
                f"EXCHANGE_RABBITMQ_QUEUE: RabbitMQ has no queue {self.queue_name!r}"
            ) from None
        except aiormq.exceptions.ProbableAuthenticationError:
            await self._drop()
            self._fail("the broker refused the credentials")
            raise ConfigurationError(
                "EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password"
            ) from None
        except connection_errors() as exc:
            await self._drop()
            self._fail(describe(exc, self.url))
            raise BrokerUnavailable(f"RabbitMQ cannot be reached: {self.last_error}") from None
        self._queue = queue
        if self._cancelled is not None:
            log.info("RabbitMQ: consuming the queue %s again", self.queue_name)
        elif self._failures:
            log.info("RabbitMQ: connected again to the queue %s", self.queue_name)
        self._cancelled = None
        self._failures = 0
        self.last_error = None
        self.health.started()
        return queue

    def _on_cancel(self, frame: aiormq.spec.Basic.Cancel) -> None:
        """The broker cancelled this consumer (``basic.cancel``: the queue was deleted, its
        leader moved): the next pull consumes again, after a passive declare, with the
        backoff while the queue is missing. Said once, here."""
        if frame.consumer_tag != self._consumer_tag or self._cancelled is not None:
            return
        self._cancelled = "the broker cancelled the consumer (the queue was deleted or moved)"
        self.health.stopped(self._cancelled)
        self._idle = False
        log.warning(
            "RabbitMQ: the broker cancelled the consumer of the queue %s (deleted or moved); "
            "consuming again, with a backoff while the queue is missing",
            self.queue_name,
        )

    def _fail(self, error: str) -> None:
        """Full jitter, as the site's retries (contract 5): many workers do not come back at
        once."""
        self._failures += 1
        self.last_error = error
        self.health.stopped(self._cancelled or error)
        ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** min(self._failures, 16))
        self._retry_at = time.monotonic() + random.uniform(0, ceiling)
        self._idle = False

    async def _drop(self) -> None:
        """Forget the connection and every delivery buffered on it: the broker delivers them
        again, as they were never acknowledged."""
        self._queue = None
        self._channel = None
        connection, self._connection = self._connection, None
        self._buffer = asyncio.Queue()
        self._carry = None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    # -- taking ----------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        return self._idle

    async def pull(self) -> Taken:
        queue = await self._connect()
        total = Taken()
        held_back = False  # a refusal the database would not record: its message was not acked
        try:
            for _ in range(ROUNDS):
                batch = await self._next_batch(queue)
                if not batch:
                    break
                taken = await asyncio.to_thread(
                    take,
                    self.engine,
                    self.staging_engine,
                    self.kinds,
                    [self._received(m) for m in batch],
                    source=self.name,
                    max_items=self.max_items,
                    max_bytes=self.max_bytes,
                )
                failpoint("source-staged")
                for index, message in enumerate(batch):
                    if index in taken.unrecorded:
                        continue  # left unacknowledged: delivered again after the drop below
                    if index in taken.bad:
                        await message.reject(requeue=False)
                    else:
                        await message.ack()
                total.add(taken)
                if taken.unrecorded:
                    held_back = True
                    break
        except Exception as exc:
            if not (isinstance(exc, connection_errors()) or self._lost(exc)):
                await self._drop()  # the database failed: as below
                self._idle = False
                raise
            await self._drop()
            self._fail(describe(exc, self.url))
            if self._cancelled is not None:  # the queue went with the consumer: said once
                raise BrokerUnavailable(f"RabbitMQ: {self._cancelled}", said=True) from None
            log.warning("RabbitMQ: the connection was lost (%s); reconnecting", self.last_error)
            raise BrokerUnavailable(
                f"RabbitMQ connection lost: {self.last_error}", said=True
            ) from None
        except BaseException:
            # The database failed (or the worker stops): the batch was taken from the buffer
            # and not acknowledged. Closing the connection makes the broker deliver it again.
            await self._drop()
            self._idle = False
            raise
        if held_back:
            await self._drop()  # the broker delivers them again, at the next pull
        self._idle = total.messages == 0 and self._cancelled is None
        log_taken(log, self.name, "messages", total)
        return total

    def _lost(self, exc: Exception) -> bool:
        """An error from the broker's side of a connection being cut: aiormq fails a call in
        flight with a bare ``Exception`` (its TaskWrapper's, no subclass) when the connection
        closes under it (seen cutting it mid ``queue_declare``), or the connection says it is
        closed. A database error is neither."""
        connection = self._connection
        return type(exc) is Exception or connection is None or bool(connection.is_closed)

    async def _next_batch(self, queue: AbstractQueue) -> list[AbstractIncomingMessage]:
        batch = self._drain()
        if batch:
            return batch
        # The buffer is empty: ask the broker what is ready, and wait for it only if anything is.
        declared = await queue.channel.declare_queue(self.queue_name, passive=True)
        ready = declared.declaration_result.message_count or 0
        with contextlib.suppress(asyncio.TimeoutError):
            first = await asyncio.wait_for(self._buffer.get(), WAIT_FOR_MORE if ready else GRACE)
            return [first, *self._drain(self.prefetch - 1, len(first.body))]
        return []

    def _drain(self, limit: int | None = None, held: int = 0) -> list[AbstractIncomingMessage]:
        """Up to ``limit`` buffered messages, and no more bytes than ``memory`` beside the
        ``held`` ones (contract 15), unless one message alone is larger: the next waits in
        ``_carry`` for the next batch."""
        limit = self.prefetch if limit is None else limit
        batch: list[AbstractIncomingMessage] = []
        while len(batch) < limit:
            message, self._carry = self._carry, None
            if message is None:
                try:
                    message = self._buffer.get_nowait()
                except asyncio.QueueEmpty:
                    break
            if (batch or held) and held + len(message.body) > self.memory:
                self._carry = message
                break
            batch.append(message)
            held += len(message.body)
        return batch

    def _received(self, message: AbstractIncomingMessage) -> Received:
        key = safe_key(message.message_id) if message.message_id else digest_key(message.body)
        where = f"rabbitmq queue {self.queue_name}"
        if message.message_id:
            where += f", message_id {message.message_id[:200]}"
        return Received(key=key, body=message.body, where=where)

    # -- for people ------------------------------------------------------------------------

    async def figures(self) -> dict[str, Any]:
        """Ready (in the queue) and pending (delivered to consumers, not acknowledged)."""
        connection = await self._open_briefly()
        try:
            channel = await connection.channel()
            try:
                declared = await channel.declare_queue(self.queue_name, passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity:
                raise ConfigurationError(
                    f"EXCHANGE_RABBITMQ_QUEUE: RabbitMQ has no queue {self.queue_name!r}"
                ) from None
            result = declared.declaration_result
            return {
                "source": self.name,
                "queue": self.queue_name,
                "ready": result.message_count,
                "consumers": result.consumer_count,
                "pending": None,  # AMQP does not tell the unacknowledged count
            }
        finally:
            await connection.close()

    async def check(self) -> str:
        figures = await self.figures()
        return (
            f"RabbitMQ answers; queue {self.queue_name}: {figures['ready']} ready, "
            f"{figures['consumers']} consumers"
        )

    async def _open_briefly(self) -> AbstractConnection:
        try:
            return await connect(self.url)
        except aiormq.exceptions.ProbableAuthenticationError:
            raise ConfigurationError(
                "EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password"
            ) from None
        except connection_errors() as exc:
            raise BrokerUnavailable(
                f"RabbitMQ cannot be reached: {describe(exc, self.url)}"
            ) from None

    async def aclose(self) -> None:
        await self._drop()
