"""Contract 4: the message states and the only transitions between them (``states.check``)."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import pytest

from exchange.domain.states import FINAL, Event, IllegalTransition, State, check, sources, target

N, P, D, Y, Q, C = (
    State.NEW,
    State.IN_PROGRESS,
    State.DELIVERED,
    State.DELAYED,
    State.QUARANTINED,
    State.CANCELLED,
)
ALL_TARGETS: list[State | None] = [*State, None]

ALLOWED: list[tuple[Event, State | None, State | None]] = [
    # intake (section 1): a row becomes a new message or a quarantine record
    (Event.TAKEN, None, N),
    (Event.REJECTED, None, Q),
    (Event.DUPLICATE, None, None),
    # section 4: new -> in_progress (leased); delayed -> in_progress
    (Event.LEASED, N, P),
    (Event.LEASED, Y, P),
    # section 4: in_progress -> delivered | delayed | quarantined | cancelled
    (Event.DELIVERED, P, D),
    (Event.RETRY_SCHEDULED, P, Y),
    (Event.QUARANTINED, P, Q),
    (Event.STALE_AT_SITE, P, C),
    (Event.LEASE_EXPIRED, P, Q),
    # section 4: an expired lease may be taken by another worker
    (Event.TAKEN_OVER, P, P),
    # section 5: not sent or not charged (breaker open, 401/403): back where it was
    (Event.RELEASED, P, N),
    (Event.RELEASED, P, Y),
    # section 3: latest wins (superseded), never at or below the delivered version (stale)
    (Event.SUPERSEDED, N, C),
    (Event.SUPERSEDED, Y, C),
    (Event.SUPERSEDED, P, C),
    (Event.STALE, N, C),
    (Event.STALE, Y, C),
    (Event.STALE, P, C),
    # section 3: a gap still open after EXCHANGE_GAP_TIMEOUT
    (Event.SEQUENCE_GAP, N, Q),
    (Event.SEQUENCE_GAP, Y, Q),
    # section 6: operator retry and cancel of what waits for a person
    (Event.OPERATOR_RETRY, Q, N),
    (Event.OPERATOR_CANCEL, Q, C),
]


@pytest.mark.parametrize(
    ("event", "from_state", "to_state"),
    ALLOWED,
    ids=[f"{e}:{f}->{t}" for e, f, t in ALLOWED],
)
def test_contract_transition_is_allowed(
    event: Event, from_state: State | None, to_state: State | None
) -> None:
    check(event, from_state, to_state)  # raises IllegalTransition if refused


EVERY_MOVE = [(event, to) for event in Event for to in ALL_TARGETS]


def test_final_states_are_delivered_and_cancelled() -> None:
    assert {D, C} == set(FINAL)


@pytest.mark.parametrize("final", [D, C])
def test_nothing_leaves_delivered_or_cancelled(final: State) -> None:
    allowed = []
    for event, to_state in EVERY_MOVE:
        try:
            check(event, final, to_state)
        except IllegalTransition:
            continue
        if to_state in (None, final):
            continue  # a note on the ended version (``lost-send-found``): it stays where it is
        allowed.append((event, to_state))

    assert [] == allowed


@pytest.mark.parametrize(
    ("from_state", "to_state"),
    [
        (Q, D),  # quarantined needs a person: only retry (-> new) or cancel
        (Q, P),
        (Q, Y),
        (N, D),  # never delivered without being sent
        (Y, D),
        (N, Y),
        (None, D),
        (None, P),
        (None, C),
    ],
)
def test_no_event_makes_an_illegal_jump(from_state: State | None, to_state: State) -> None:
    allowed = []
    for event in Event:
        try:
            check(event, from_state, to_state)
        except IllegalTransition:
            continue
        allowed.append(event)

    assert [] == allowed


@pytest.mark.parametrize(
    ("event", "from_state", "to_state"),
    [
        (Event.DELIVERED, N, D),
        (Event.DELIVERED, Q, D),
        (Event.DELIVERED, P, C),
        (Event.RELEASED, P, D),
        (Event.RELEASED, P, Q),
        (Event.RELEASED, N, N),
        (Event.OPERATOR_RETRY, D, N),
        (Event.OPERATOR_RETRY, C, N),
        (Event.OPERATOR_RETRY, P, N),
        (Event.OPERATOR_CANCEL, D, C),
        (Event.OPERATOR_CANCEL, N, C),
        (Event.LEASED, Q, P),
        (Event.LEASED, D, P),
        (Event.LEASED, P, P),
        (Event.TAKEN, N, N),
        (Event.SEQUENCE_GAP, P, Q),
        (Event.DUPLICATE, N, D),
    ],
)
def test_other_moves_raise_illegal_transition(
    event: Event, from_state: State | None, to_state: State | None
) -> None:
    with pytest.raises(IllegalTransition):
        check(event, from_state, to_state)


@pytest.mark.parametrize(("event", "from_state", "to_state"), ALLOWED)
def test_sources_and_target_agree_with_check(
    event: Event, from_state: State | None, to_state: State | None
) -> None:
    if from_state is not None:
        assert from_state in sources(event)
    if event not in (Event.RELEASED, Event.DUPLICATE):
        assert to_state == target(event)


def test_a_lost_send_found_is_a_note_on_a_superseded_version_never_a_move() -> None:
    check(Event.LOST_SEND_FOUND, C, C)
    check(Event.LOST_SEND_FOUND, C, None)
    for to_state in [*State]:
        if to_state is not C:
            with pytest.raises(IllegalTransition):
                check(Event.LOST_SEND_FOUND, C, to_state)
    for from_state in [N, Y, P, D, Q]:
        with pytest.raises(IllegalTransition):
            check(Event.LOST_SEND_FOUND, from_state, from_state)
