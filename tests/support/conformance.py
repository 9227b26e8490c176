"""What every target must do for the worker (exchange/targets/base.py), written once against a
``Shop``: a target built for a simulated shop, and the levers that make the shop answer each
way. A new target joins by adding a ``Shop`` for its simulator to ``SHOPS`` in
test_conformance.py; nothing here names a target.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Protocol

from exchange.domain.identity import message_id
from exchange.targets.base import OutgoingMessage, Target

CREATED = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)


def price(
    sku: str, version: int, amount: str | None = None, price_type: str = "retail"
) -> OutgoingMessage:
    """A price message; its amount defaults to ``<version>.00``, so that a shop that keeps no
    versions (WooCommerce, Bitrix) still tells which version it holds. A retail price's
    aggregate is its SKU, another price type's ``<sku>/<price_type>`` (both as intake names
    them)."""
    amount = f"{version}.00" if amount is None else amount
    payload = {"sku": sku, "price": amount, "currency": "RUB", "price_type": price_type}
    aggregate = sku if price_type == "retail" else f"{sku}/{price_type}"
    return OutgoingMessage(
        message_id("price", aggregate, version),
        "price",
        aggregate,
        version,
        json.dumps(payload, separators=(",", ":")),
        CREATED,
    )


class Shop(Protocol):
    """A simulated shop and the target that delivers to it."""

    batching: bool  # whether several messages travel in one request
    versioned: bool  # whether the shop compares versions (contract 5); else the queue's order
    atomic: bool  # a request is applied or refused whole (Bitrix's package), not per item
    connected: bool
    """Answers come over one long connection (a broker), not one per request: an answer the
    target cannot read ends that connection, which contract 12 reads as a result unknown,
    published again; an HTTP answer stands alone and is unknown (contract 5)."""

    def target(self) -> Target: ...

    def applied(self, sku: str) -> list[int]:
        """The versions of ``sku``'s price the shop applied, in order."""
        ...

    def refuse_credentials(self, refused: bool) -> None: ...

    def fail_temporarily(self, sku: str) -> None:
        """The shop fails every request for ``sku`` with a temporary error (a 5xx)."""
        ...

    def reject(self, sku: str) -> None:
        """The shop refuses ``sku`` for good (a 4xx that a retry would not change)."""
        ...

    def answer_unreadably(self, on: bool) -> None:
        """The shop answers what no target can read (a redirect, a body cut off)."""
        ...

    def go_down(self) -> None:
        """Nothing listens any more: connections are refused."""
        ...

    def limit_rate(self, per_second: float) -> bool:
        """The shop's host limits the rate from now on (429 with Retry-After: 1; the
        WooCommerce and Bitrix hosts with their limiter's HTML page); False when the shop has
        no such thing (a broker)."""
        ...

    def answered(self) -> int | None:
        """How many requests the shop has answered (None: not requests, a broker)."""
        ...

    def lose_session(self, how: str) -> bool:
        """The shop loses the session of the next request that needs one, answering ``how``:
        ``message`` (its own words), ``redirect`` (to a sign-in page) or ``form`` (the sign-in
        form, 200); False when the shop keeps no sessions."""
        ...

    def close(self) -> None: ...
