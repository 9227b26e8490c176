"""Kind policies (contract 3): how the messages of one kind are coalesced and ordered."""

from __future__ import annotations

from enum import StrEnum


class Policy(StrEnum):
    """How the messages of one kind are coalesced and ordered (contract 3)."""

    LATEST_WINS = "latest-wins"
    """Only the highest pending version of an aggregate is sent; older ones are superseded."""
    STRICT = "strict"
    """Every version is delivered, in order, starting at 1; nothing is coalesced."""
