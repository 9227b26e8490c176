"""Kind policies (contract 3): how the messages of one kind are coalesced and ordered.

``KindPolicies`` is the one object that carries the configured kinds through the service: the
queue asks it which kinds keep strict order and which coalesce, instead of passing lists of
names around.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Policy(StrEnum):
    """How the messages of one kind are coalesced and ordered (contract 3)."""

    LATEST_WINS = "latest-wins"
    """Only the highest pending version of an aggregate is sent; older ones are superseded."""
    STRICT = "strict"
    """Every version is delivered, in order, starting at 1; nothing is coalesced."""


DEFAULT_KINDS: Mapping[str, Policy] = {
    "price": Policy.LATEST_WINS,
    "financial_posting": Policy.STRICT,
}


@dataclass(frozen=True, slots=True)
class KindPolicies:
    """The configured kinds and their policies. Hashable, so that statements built for one set
    of policies can be cached. A kind not named here is not delivered (intake quarantines it
    ``unknown-kind``); in the queue's rules it counts as latest-wins, never as strict."""

    policies: tuple[tuple[str, Policy], ...]

    @classmethod
    def of(cls, kinds: Mapping[str, Policy]) -> KindPolicies:
        return cls(tuple(sorted(kinds.items())))

    def policy(self, kind: str) -> Policy | None:
        return dict(self.policies).get(kind)

    def kinds_with(self, policy: Policy) -> tuple[str, ...]:
        return tuple(kind for kind, p in self.policies if p is policy)

    @property
    def strict(self) -> tuple[str, ...]:
        """The kinds delivered every version, in order."""
        return self.kinds_with(Policy.STRICT)

    @property
    def latest_wins(self) -> tuple[str, ...]:
        """The kinds coalesced to their latest version."""
        return self.kinds_with(Policy.LATEST_WINS)

    def is_strict(self, kind: str) -> bool:
        return kind in self.strict
