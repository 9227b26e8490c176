"""A shop's back end that reads its prices from the real RabbitMQ (contract 12), for the Target
conformance suite: the broker on 127.0.0.1:5672, reached through a TCP proxy that can be cut
(``go_down``) or can make the broker's confirms unreadable (``answer_unreadably``).

The shop's exchange is a headers exchange whose alternate exchange routes everything to the
shop's queue. The levers bind one SKU past it (the target sends ``aggregate`` as a header):
``reject`` to an exchange with no queue (the broker returns the message: unroutable),
``fail_temporarily`` to a queue of length 0 that refuses publishes (the broker nacks it). The
shop applies what its queue holds, once per ``message_id``, as a consumer must.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
from brokerkit import RABBITMQ_URL, require
from tcpproxy import TcpProxy

from exchange.targets.base import Target
from exchange.targets.rabbitmq.target import RabbitMqTarget

BASIC_ACK = (60, 80)  # class and method ids of basic.ack (AMQP 0-9-1)


class ConfirmGarbler:
    """The broker's bytes, frame by frame; while ``on()``, a basic.ack's method ids become ids
    no AMQP client knows (the frame stays whole: only its meaning is unreadable)."""

    def __init__(self, on: Callable[[], bool]) -> None:
        self.on = on
        self.pending = b""

    def __call__(self, data: bytes) -> bytes:
        self.pending += data
        out = bytearray()
        for frame in self._frames():
            if self.on() and frame[0] == 1 and len(frame) >= 11:
                ids = (int.from_bytes(frame[7:9], "big"), int.from_bytes(frame[9:11], "big"))
                if ids == BASIC_ACK:
                    frame = frame[:7] + b"\xff\xf0\xff\xf0" + frame[11:]
            out += frame
        return bytes(out)

    def _frames(self) -> Iterator[bytes]:
        while len(self.pending) >= 7:
            size = int.from_bytes(self.pending[3:7], "big")
            end = 7 + size + 1
            if len(self.pending) < end:
                return
            frame, self.pending = self.pending[:end], self.pending[end:]
            yield frame


class RabbitMqShop:
    batching = False  # one message per publish: the pace bounds the unconfirmed
    versioned = False  # a broker compares no versions: the queue's order keeps them
    atomic = False
    connected = True

    def __init__(self) -> None:
        require("RabbitMQ", "127.0.0.1", 5672)
        self.password = "guest"
        self.garbling = False
        self.proxy = TcpProxy(
            "127.0.0.1", 5672, downstream=lambda: ConfirmGarbler(lambda: self.garbling)
        ).start()
        name = f"exchange-conformance-{uuid.uuid4().hex[:10]}"
        self.exchange, self.everything = name, f"{name}-all"
        self.queue, self.refusing, self.void = f"{name}-shop", f"{name}-refusing", f"{name}-void"
        self.seen: dict[str, tuple[str, int]] = {}  # message_id -> (sku, version), first seen

        def declare(channel: Any) -> None:
            channel.exchange_declare(self.everything, "fanout", durable=True)
            channel.exchange_declare(self.void, "fanout", durable=True)
            channel.exchange_declare(
                self.exchange,
                "headers",
                durable=True,
                arguments={"alternate-exchange": self.everything},
            )
            channel.queue_declare(self.queue, durable=True)
            channel.queue_bind(self.queue, self.everything)
            channel.queue_declare(
                self.refusing,
                durable=True,
                arguments={"x-max-length": 0, "x-overflow": "reject-publish"},
            )

        self._broker(declare)

    def _broker(self, work: Callable[[Any], Any]) -> Any:
        connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        try:
            return work(connection.channel())
        finally:
            connection.close()

    @property
    def url(self) -> str:
        return f"amqp://guest:{self.password}@127.0.0.1:{self.proxy.port}/"

    def target(self) -> Target:
        return RabbitMqTarget(lambda: self.url, self.exchange, timeout=2.0)

    def applied(self, sku: str) -> list[int]:
        def drain(channel: Any) -> None:
            while True:
                method, properties, content = channel.basic_get(self.queue, auto_ack=True)
                if method is None:
                    return
                message = json.loads(content)
                assert properties.message_id == message["message_id"]
                self.seen.setdefault(
                    properties.message_id, (message["payload"]["sku"], message["version"])
                )

        self._broker(drain)
        return [version for s, version in self.seen.values() if s == sku]

    def _bind(self, sku: str, destination: str, exchange: bool) -> None:
        arguments = {"x-match": "all", "aggregate": sku}

        def bind(channel: Any) -> None:
            if exchange:
                channel.exchange_bind(destination, self.exchange, arguments=arguments)
            else:
                channel.queue_bind(destination, self.exchange, arguments=arguments)

        self._broker(bind)

    def refuse_credentials(self, refused: bool) -> None:
        self.password = "a-replaced-password" if refused else "guest"

    def fail_temporarily(self, sku: str) -> None:
        self._bind(sku, self.refusing, exchange=False)

    def reject(self, sku: str) -> None:
        self._bind(sku, self.void, exchange=True)

    def answer_unreadably(self, on: bool) -> None:
        self.garbling = on

    def go_down(self) -> None:
        self.proxy.cut()

    def limit_rate(self, per_second: float) -> bool:
        return False  # a broker refuses no publish with 429

    def answered(self) -> int | None:
        return None

    def lose_session(self, how: str) -> bool:
        return False  # a broken connection is another test's

    def close(self) -> None:
        self.proxy.stop()

        def delete(channel: Any) -> None:
            channel.exchange_delete(self.exchange)
            for exchange in (self.everything, self.void):
                channel.exchange_delete(exchange)
            for queue in (self.queue, self.refusing):
                channel.queue_delete(queue)

        self._broker(delete)
