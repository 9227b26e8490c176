"""The message state machine: the states, the events that move a message, nothing else.

Every state change in the service is one of the ``Event`` values below. SQL that changes
states takes its from-states from ``sources(event)`` and its to-state from ``target(event)``,
so the allowed transitions are written here once, and ``check`` guards the rest.

    new ──lease──> in_progress ──> delivered | delayed | quarantined | cancelled
     │                 │  └──release (not charged)──> new | delayed
     │                 └──not-for-this-shop (not sent, not charged)──> cancelled
     │                 └──take-over (lease expired)──> in_progress
     └──> cancelled (superseded, stale) | quarantined (sequence-gap)
    delayed ──lease──> in_progress;  delayed ──> cancelled (superseded, stale)
    quarantined ──operator retry──> new;  quarantined ──operator cancel──> cancelled
    new | delayed | quarantined | withheld | in_progress (lease expired)
        ──channel removed──> cancelled
    (none) ──seeded (a new channel's delivery of the latest accepted version)──> new
    in_progress ──withheld (the channel took it, withholds it from buyers)──> withheld
    in_progress ──awaiting-outcome (taken; the outcome is read later, not charged)──> delayed
    withheld ──withheld-live (the channel shows it)──> delivered
    withheld ──superseded (a newer version delivered there)──> cancelled
    withheld ──operator-release (the channel asked to release it; no state change)

``withheld`` (contract 13) is not ``held``: a held message waits, new, behind a quarantined
predecessor; a withheld one was taken by the channel, which keeps it from buyers until a
person confirms it. It holds no lease and is not in flight (a newer version is claimed and sent
as usual), it is never retried by the service, and it counts as live for order: an older
version is superseded by it, never sent after it.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    NEW = "new"
    IN_PROGRESS = "in_progress"
    DELIVERED = "delivered"
    DELAYED = "delayed"
    QUARANTINED = "quarantined"
    CANCELLED = "cancelled"
    WITHHELD = "withheld"  # the channel took it and withholds it from buyers (contract 13)


FINAL = frozenset({State.DELIVERED, State.CANCELLED})
DUE = frozenset({State.NEW, State.DELAYED})  # may be leased once next_try_at has come
PENDING = frozenset({State.NEW, State.DELAYED, State.IN_PROGRESS})  # on its way to the site
# Not ended: it may still be sent (after a person's retry), or stands at the channel withheld.
LIVE = PENDING | {State.QUARANTINED, State.WITHHELD}


def values(states: frozenset[State]) -> list[str]:
    """The states as the database stores them, in a stable order (for SQL ``IN``)."""
    return sorted(state.value for state in states)


class Event(StrEnum):
    """What happened to a message; the ``event`` column of its history."""

    TAKEN = "taken"  # intake made the message from a staging row
    DUPLICATE = "duplicate"  # another staging row carried the same message (not sent again)
    REJECTED = "rejected"  # intake could not accept the row: a quarantine record
    SUPERSEDED = "superseded"  # a newer version of a latest-wins aggregate is pending
    STALE = "stale"  # at or below the version already delivered
    SEQUENCE_GAP = "sequence-gap"  # the version before it never arrived in time
    LEASED = "leased"
    TAKEN_OVER = "taken-over"  # leased again after the previous lease expired
    DELIVERED = "delivered"
    STALE_AT_SITE = "stale-at-site"
    RETRY_SCHEDULED = "retry-scheduled"
    QUARANTINED = "quarantined"
    RELEASED = "released"  # handed back unsent or uncharged (breaker open, site refused token)
    LEASE_EXPIRED = "lease-expired"  # the last attempt's lease expired: quarantined
    OPERATOR_RETRY = "operator-retry"
    OPERATOR_CANCEL = "operator-cancel"
    OPERATOR_PRIORITIZE = "operator-prioritize"  # claimed before the backlog; no state change
    NOT_FOR_THIS_SHOP = "not-for-this-shop"  # the target leaves it out on purpose: not sent
    # Contract 13: a delivery ``channels seed`` gave a new channel (an existing message's).
    SEEDED = "seeded"
    # Contract 13: ``channels drop`` ended a waiting delivery of the channel it removed.
    CHANNEL_REMOVED = "channel-removed"
    WITHHELD = "withheld"  # the channel took it, and withholds it from buyers until confirmed
    WITHHELD_LIVE = "withheld-live"  # the channel shows the withheld version to buyers now
    OPERATOR_RELEASE = "operator-release"  # a person asked the channel to release it
    # The channel took it and answers later (a Wildberries upload task): back to delayed, not
    # charged, no lease held; the next attempt reads the outcome (contract 13, 14).
    AWAITING_OUTCOME = "awaiting-outcome"
    # A send whose answer was lost was found at the channel after its version ended there
    # (a Wildberries upload seen in the catalogue or in WB's price quarantine once a newer
    # version had superseded it): a note on that version, no state change.
    LOST_SEND_FOUND = "lost-send-found"


_S = State
_TRANSITIONS: dict[Event, tuple[frozenset[State], State | None]] = {
    Event.TAKEN: (frozenset(), _S.NEW),
    Event.DUPLICATE: (frozenset(), None),  # recorded on the existing message, no state change
    Event.REJECTED: (frozenset(), _S.QUARANTINED),
    # Coalescing supersedes a pending version; a withheld one is superseded when a newer
    # version is delivered on its channel (it never reached buyers).
    Event.SUPERSEDED: (
        frozenset({_S.NEW, _S.DELAYED, _S.IN_PROGRESS, _S.WITHHELD}),
        _S.CANCELLED,
    ),
    Event.STALE: (frozenset({_S.NEW, _S.DELAYED, _S.IN_PROGRESS}), _S.CANCELLED),
    Event.SEQUENCE_GAP: (frozenset({_S.NEW, _S.DELAYED}), _S.QUARANTINED),
    Event.LEASED: (frozenset({_S.NEW, _S.DELAYED}), _S.IN_PROGRESS),
    Event.TAKEN_OVER: (frozenset({_S.IN_PROGRESS}), _S.IN_PROGRESS),
    Event.DELIVERED: (frozenset({_S.IN_PROGRESS}), _S.DELIVERED),
    Event.STALE_AT_SITE: (frozenset({_S.IN_PROGRESS}), _S.CANCELLED),
    Event.NOT_FOR_THIS_SHOP: (frozenset({_S.IN_PROGRESS}), _S.CANCELLED),
    Event.RETRY_SCHEDULED: (frozenset({_S.IN_PROGRESS}), _S.DELAYED),
    Event.QUARANTINED: (frozenset({_S.IN_PROGRESS}), _S.QUARANTINED),
    Event.RELEASED: (frozenset({_S.IN_PROGRESS}), None),  # back to new or delayed
    Event.LEASE_EXPIRED: (frozenset({_S.IN_PROGRESS}), _S.QUARANTINED),
    Event.OPERATOR_RETRY: (frozenset({_S.QUARANTINED}), _S.NEW),
    Event.OPERATOR_CANCEL: (frozenset({_S.QUARANTINED}), _S.CANCELLED),
    Event.OPERATOR_PRIORITIZE: (frozenset({_S.NEW, _S.DELAYED}), None),  # its place, not state
    Event.SEEDED: (frozenset(), _S.NEW),
    Event.CHANNEL_REMOVED: (
        frozenset({_S.NEW, _S.DELAYED, _S.QUARANTINED, _S.IN_PROGRESS, _S.WITHHELD}),
        _S.CANCELLED,
    ),
    Event.WITHHELD: (frozenset({_S.IN_PROGRESS}), _S.WITHHELD),
    Event.WITHHELD_LIVE: (frozenset({_S.WITHHELD}), _S.DELIVERED),
    Event.OPERATOR_RELEASE: (frozenset({_S.WITHHELD}), None),  # asked the channel; no change
    Event.AWAITING_OUTCOME: (frozenset({_S.IN_PROGRESS}), _S.DELAYED),
    # a note on a version that ended superseded; no change
    Event.LOST_SEND_FOUND: (frozenset({_S.CANCELLED}), None),
}


class IllegalTransition(AssertionError):
    """a state change that the state machine does not allow"""


def sources(event: Event) -> frozenset[State]:
    return _TRANSITIONS[event][0]


def target(event: Event) -> State:
    to_state = _TRANSITIONS[event][1]
    if to_state is None:
        raise IllegalTransition(f"{event} has no fixed target state")
    return to_state


def check(event: Event, from_state: State | None, to_state: State | None) -> None:
    """Raise ``IllegalTransition`` unless ``event`` may move a message from -> to."""
    allowed_from, fixed_to = _TRANSITIONS[event]
    if allowed_from and from_state not in allowed_from:
        raise IllegalTransition(f"{event}: not allowed from {from_state}")
    if not allowed_from and from_state is not None:
        raise IllegalTransition(f"{event}: only for a new message")
    if event is Event.RELEASED:
        if to_state not in (State.NEW, State.DELAYED):
            raise IllegalTransition(f"{event}: only back to new or delayed, not {to_state}")
    elif event in (
        Event.DUPLICATE,
        Event.OPERATOR_PRIORITIZE,
        Event.OPERATOR_RELEASE,
        Event.LOST_SEND_FOUND,
    ):
        if to_state is not None and to_state != from_state:
            raise IllegalTransition(f"{event}: does not change the state")
    elif to_state != fixed_to:
        raise IllegalTransition(f"{event}: leads to {fixed_to}, not {to_state}")
