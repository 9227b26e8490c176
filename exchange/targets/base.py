"""The seam between the queue and a shop: what every target offers the worker.

The worker leases a batch, asks the target how the batch travels (``requests``), sends each
request through ``send`` and obeys what comes back: one ``Classification`` per message, in the
verdicts of contract 5 (delivered, stale at the site, temporary, terminal, pause, unknown).
What a request looks like on the wire, how the shop's answers read, whether the shop has a
batch endpoint: all of that stays inside the target. The queue, coalescing, leases, the
retry decision and the breaker never learn which target runs.

A new target is a module under ``exchange/targets/`` with a class that satisfies ``Target``,
built by ``exchange.app.target``, and added to the conformance suite
(tests/targets/test_conformance.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from exchange.domain.verdicts import Classification


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
class OutgoingMessage:
    """A leased message as it leaves for a shop: what the contract lets a shop see, nothing
    more (never the staging row's other columns)."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    payload: str  # canonical JSON text: decimals exactly as accepted
    created_at: datetime


class Target(Protocol):
    """A shop the worker delivers to."""

    name: str
    """Short and stable: ``api``, ``bitrix``, ``woocommerce``; for logs and status."""

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        """How a leased batch travels: the messages in order, one list per request, at most
        one message of an aggregate in a request."""
        ...

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        """Send one request (as ``requests`` grouped it, or a part of it) and judge the answer:
        one classification per message, in the order given. Never raises for what the shop or
        the network does: a failure is a classification (temporary, unknown)."""
        ...

    async def health(self) -> Classification:
        """Whether the shop is up and accepts the credentials, with no effect on it:
        ``DELIVERED`` when it does, ``PAUSE`` when it refuses the credentials."""
        ...

    def reload_credentials(self) -> None:
        """Read the credentials again (an operator replaced a secret file); raises
        ``ConfigurationError`` when they cannot be read."""
        ...

    async def aclose(self) -> None:
        """Close connections; the target is not used afterwards."""
        ...
