"""What a Wildberries token says of itself (research §2.2): a JWT whose payload holds ``acc``
(1 Base, 2 Test, 3 Personal, 4 Service), ``s`` (a bitmask: bit 3 Prices and discounts, bit 30
read-only) and ``exp``. Read without checking the signature (only WB can), to say before any
request what the token may do; the token itself is never logged nor put in a detail."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

PRICES_BIT = 1 << 3
READ_ONLY_BIT = 1 << 30
KINDS = {1: "Base", 2: "Test", 3: "Personal", 4: "Service"}


@dataclass(frozen=True, slots=True)
class Claims:
    kind: str  # Base, Test, Personal, Service, or "unknown (N)"
    prices: bool
    read_only: bool
    expires: datetime | None

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and self.expires <= now


def claims(token: str) -> Claims | None:
    """The token's claims, or None when it is not a JWT this can read."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError):
        return None
    if not isinstance(payload, dict):
        return None
    scopes, acc, exp = payload.get("s"), payload.get("acc"), payload.get("exp")
    if not isinstance(scopes, int):
        return None
    expires = datetime.fromtimestamp(exp, UTC) if isinstance(exp, int | float) else None
    return Claims(
        KINDS.get(acc, f"unknown ({acc})") if isinstance(acc, int) else "unknown",
        bool(scopes & PRICES_BIT),
        bool(scopes & READ_ONLY_BIT),
        expires,
    )


def account_key(token: str) -> str:
    """What names the token's account where the workers share its limit (a ``target_locks``
    row): a digest of the token, never the token itself."""
    return hashlib.sha256(token.strip().encode()).hexdigest()[:16]
