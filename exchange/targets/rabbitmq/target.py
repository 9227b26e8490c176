"""RabbitMQ as a ``Target`` (contract 12): each message published to
``EXCHANGE_RABBITMQ_EXCHANGE`` with the body the site API would get (contract 5), routing key =
its kind, ``message_id`` = its message_id (the consumer's idempotency key), persistent,
``mandatory``, with publisher confirms. What the broker answers, as contract 5's verdicts:

    basic.ack                                   DELIVERED
    basic.return (no queue bound for it)        TERMINAL, quarantined ``unroutable``
    basic.nack                                  TEMPORARY, result unknown: published again
    connection lost (or no confirm in time)     TEMPORARY, result unknown: published again
      before the confirm
    connection refused, broker unreachable      TEMPORARY, site-wide: the breaker's, not charged
    credentials refused (403 at connect)        PAUSE (configuration): nobody is charged
    the exchange missing (404) or not ours      PAUSE (configuration)
      to write (403)
    the channel closed with any other code      UNKNOWN (quarantined unknown-response)

Publishing again after a result unknown is safe because the consumer dedupes by
``message_id`` (docs/targets.md). Each message is a request of its own: the worker's pace
(contract 5c) bounds the requests in flight, and so the messages published and not yet
confirmed, between 1 and ``EXCHANGE_CONCURRENCY``. Order needs nothing here: the queue never
has two messages of one aggregate in flight (strict order and latest-wins hold as for any
target).

Why aiormq (under aio-pika, which the broker sources use): its ``basic_publish`` returns the
confirm, the return or the nack of exactly that message, and it never reconnects behind our
back, so a lost connection is always seen as one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from urllib.parse import unquote, urlsplit

import aiormq
import aiormq.abc
from pamqp.commands import Basic

from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.client import body

log = logging.getLogger(__name__)

PERSISTENT = 2  # delivery_mode: written to disk by a durable queue
CONTENT_TYPE = "application/json"

# A lost connection, as aiormq and asyncio raise it (a channel of a dead connection says
# RuntimeError: aiormq's ChannelInvalidStateError).
_LOST = (OSError, ConnectionError, TimeoutError, aiormq.exceptions.AMQPError, RuntimeError)


class _NotOpen(Exception):
    """The connection or the channel could not be opened: what every message gets."""

    def __init__(self, verdict: Verdict, detail: str, error_class: str, site_wide: bool) -> None:
        super().__init__(detail)
        self.verdict, self.detail, self.error_class = verdict, detail, error_class
        self.site_wide = site_wide

    def classification(self) -> Classification:
        return Classification(
            self.verdict, self.detail, error_class=self.error_class, site_wide=self.site_wide
        )


class RabbitMqTarget:
    name = "rabbitmq"

    def __init__(self, url: Callable[[], str], exchange: str, *, timeout: float) -> None:
        """``url`` reads EXCHANGE_RABBITMQ_URL (again, on ``reload_credentials``); ``timeout``:
        seconds to connect, and to wait for one message's confirm."""
        self._read_url = url
        self.url = url()
        self.exchange = exchange
        self.timeout = timeout
        self._connection: aiormq.abc.AbstractConnection | None = None
        self._channel: aiormq.abc.AbstractChannel | None = None
        self._lock = asyncio.Lock()

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        return [[message] for message in messages]

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        try:
            channel = await self._open()
        except _NotOpen as refused:
            return [refused.classification() for _ in messages]
        if len(messages) == 1:
            return [await self._publish(channel, messages[0])]
        return list(await asyncio.gather(*(self._publish(channel, m) for m in messages)))

    async def _publish(
        self, channel: aiormq.abc.AbstractChannel, message: OutgoingMessage
    ) -> Classification:
        properties = Basic.Properties(
            content_type=CONTENT_TYPE,
            delivery_mode=PERSISTENT,
            message_id=message.message_id,
            # For consumers that route or shard without reading the body (the consistent-hash
            # exchange's hash-header: aggregate keeps one aggregate's messages on one queue).
            headers={
                "kind": message.kind,
                "aggregate": message.aggregate,
                "version": message.version,
            },
        )
        try:
            await channel.basic_publish(
                body(message),
                exchange=self.exchange,
                routing_key=message.kind,
                properties=properties,
                mandatory=True,
                timeout=self.timeout,
            )
        except aiormq.exceptions.PublishError as returned:  # before DeliveryError: a subclass
            frame = returned.frame
            code = getattr(frame, "reply_code", None)
            text = getattr(frame, "reply_text", None) or "NO_ROUTE"
            return Classification(
                Verdict.TERMINAL,
                f"RabbitMQ returned the message as unroutable ({code} {text}): no queue is "
                f"bound to the exchange {self.exchange!r} for the routing key {message.kind!r}",
                error_class="Unroutable",
                reason=Reason.UNROUTABLE,
            )
        except aiormq.exceptions.DeliveryError:
            return Classification(
                Verdict.TEMPORARY,
                "RabbitMQ answered basic.nack: it did not take the message (a queue full "
                "with x-overflow=reject-publish, or a broker error); it is published again",
                error_class="Nack",
                result_unknown=True,
            )
        except aiormq.exceptions.ChannelClosed as closed:
            await self._forget(channel)
            return self._closed(closed)
        except _LOST as exc:
            await self._forget(channel)
            return Classification(
                Verdict.TEMPORARY,
                "RabbitMQ: the connection was lost before the confirm "
                f"({self._describe(exc)}); the message is published again",
                error_class=type(exc).__name__,
                result_unknown=True,
            )
        return Classification(
            Verdict.DELIVERED,
            "confirmed by RabbitMQ",
            receipt=f"confirmed: exchange {self.exchange!r}, routing key {message.kind!r}",
        )

    def _closed(self, closed: aiormq.exceptions.ChannelClosed) -> Classification:
        """The broker closed the channel over a publish: the exchange is gone or not ours to
        write (configuration), the broker stopped (a result unknown), or a reason this target
        has no reading for (unknown, never guessed temporary)."""
        if isinstance(closed, aiormq.exceptions.ChannelNotFoundEntity):
            return self._missing_exchange().classification()
        if isinstance(closed, aiormq.exceptions.ChannelAccessRefused):
            return self._refused_exchange(closed).classification()
        code = closed.args[0] if closed.args and isinstance(closed.args[0], int) else None
        if code is None:  # closed without a reason: the connection went away under it
            return Classification(
                Verdict.TEMPORARY,
                "RabbitMQ: the channel closed before the confirm; the message is published again",
                error_class="ChannelClosed",
                result_unknown=True,
            )
        return Classification(
            Verdict.UNKNOWN,
            f"RabbitMQ closed the channel over the publish: {self._describe(closed)}",
            error_class="ChannelClosed",
        )

    # -- the connection ------------------------------------------------------------------

    async def _open(self) -> aiormq.abc.AbstractChannel:
        async with self._lock:
            channel = self._channel
            if channel is not None and not channel.is_closed:
                return channel
            await self._drop()
            connection = await self._connect()
            try:
                channel = await asyncio.wait_for(
                    connection.channel(publisher_confirms=True, on_return_raises=True),
                    self.timeout,
                )
                await self._exchange_exists(channel)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    await connection.close()
                if isinstance(exc, _LOST):  # cut between the connection and its channel
                    raise self._unreachable(exc) from None
                raise
            self._connection, self._channel = connection, channel
            return channel

    async def _connect(self) -> aiormq.abc.AbstractConnection:
        try:
            return await asyncio.wait_for(aiormq.connect(self.url), self.timeout)
        except aiormq.exceptions.ProbableAuthenticationError:
            raise _NotOpen(
                Verdict.PAUSE,
                "EXCHANGE_RABBITMQ_URL: RabbitMQ refused the user or password",
                "AccessRefused",
                site_wide=False,
            ) from None
        except _LOST as exc:
            raise self._unreachable(exc) from None

    async def _exchange_exists(self, channel: aiormq.abc.AbstractChannel) -> None:
        """A passive declare: the exchange is there (it closes ``channel`` when not)."""
        if not self.exchange:  # the default exchange: always there, never declared
            return
        try:
            await asyncio.wait_for(
                channel.exchange_declare(self.exchange, passive=True), self.timeout
            )
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise self._missing_exchange() from None
        except aiormq.exceptions.ChannelAccessRefused as refused:
            raise self._refused_exchange(refused) from None
        except _LOST as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: BaseException) -> _NotOpen:
        return _NotOpen(
            Verdict.TEMPORARY,
            f"RabbitMQ cannot be reached: {self._describe(exc)}",
            type(exc).__name__,
            site_wide=True,
        )

    def _missing_exchange(self) -> _NotOpen:
        return _NotOpen(
            Verdict.PAUSE,
            f"EXCHANGE_RABBITMQ_EXCHANGE: RabbitMQ has no exchange {self.exchange!r} (declare "
            "it, durable, and bind the shop's queue to it)",
            "NotFound",
            site_wide=False,
        )

    def _refused_exchange(self, refused: BaseException) -> _NotOpen:
        return _NotOpen(
            Verdict.PAUSE,
            f"EXCHANGE_RABBITMQ_EXCHANGE: RabbitMQ refuses publishing to {self.exchange!r} "
            f"({self._describe(refused)})",
            "AccessRefused",
            site_wide=False,
        )

    async def _forget(self, channel: aiormq.abc.AbstractChannel) -> None:
        """The channel is dead: the next send connects again (unless another send did)."""
        async with self._lock:
            if self._channel is channel:
                await self._drop()

    async def _drop(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), self.timeout)

    def _describe(self, exc: BaseException) -> str:
        """One line about a broker failure, never the URL's password."""
        text = str(exc).strip() or type(exc).__name__
        password = urlsplit(self.url).password
        for secret in (password, unquote(password or "")):
            if secret:
                text = text.replace(secret, "***")
        return text.splitlines()[0][:300]

    # -- the rest of the Target ----------------------------------------------------------

    async def health(self) -> Classification:
        """The broker answers, takes the credentials and has the exchange, checked on a
        channel of its own (a missing exchange closes the channel it is asked on)."""
        try:
            await self._open()
            connection = self._connection
            if connection is None:  # pragma: no cover - _open sets it or raises
                raise _NotOpen(Verdict.TEMPORARY, "RabbitMQ: not connected", "Closed", True)
            try:
                channel = await asyncio.wait_for(connection.channel(), self.timeout)
            except _LOST as exc:
                await self._forget_connection(connection)
                raise self._unreachable(exc) from None
            try:
                await self._exchange_exists(channel)
            finally:
                if not channel.is_closed:
                    with contextlib.suppress(Exception):
                        await channel.close()
        except _NotOpen as refused:
            return refused.classification()
        return Classification(Verdict.DELIVERED, "RabbitMQ answers; the exchange exists")

    async def _forget_connection(self, connection: aiormq.abc.AbstractConnection) -> None:
        async with self._lock:
            if self._connection is connection:
                await self._drop()

    def reload_credentials(self) -> bool:
        url = self._read_url()
        if url == self.url:
            return False
        self.url = url
        self._channel = None  # the next send drops the old connection and connects anew
        return True

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()
