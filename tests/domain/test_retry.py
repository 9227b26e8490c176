"""Contract 5, temporary answers: Retry-After, backoff with full jitter, the attempt limit."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.domain.reasons import Reason
from exchange.domain.retry import (
    Decision,
    RetryPolicy,
    decide,
    delivered,
    not_sent,
    parse_retry_after,
)
from exchange.domain.states import Event, State
from exchange.domain.verdicts import Classification, Verdict
from exchange.words import error_words

NOW = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
POLICY = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=300.0)
PROPERTY = settings(max_examples=200, deadline=None, database=None)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def temporary(retry_after: str | None = None, detail: str = "HTTP 503: down") -> Classification:
    return Classification(Verdict.TEMPORARY, detail, http_status=503, retry_after=retry_after)


# -- parse_retry_after -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("0", 0.0), ("1", 1.0), ("120", 120.0), (" 30 ", 30.0), ("86400", 86400.0)],
)
def test_retry_after_in_seconds_is_read(header: str, seconds: float) -> None:
    assert seconds == parse_retry_after(header, NOW)


@pytest.mark.parametrize("ahead", [1, 90, 3600])
def test_retry_after_http_date_in_the_future_is_the_seconds_until_then(ahead: int) -> None:
    header = http_date(NOW + timedelta(seconds=ahead))

    assert float(ahead) == parse_retry_after(header, NOW)


@pytest.mark.parametrize("behind", [0, 1, 86400])
def test_retry_after_http_date_in_the_past_means_now(behind: int) -> None:
    header = http_date(NOW - timedelta(seconds=behind))

    assert 0.0 == parse_retry_after(header, NOW)


def test_retry_after_absent_is_none() -> None:
    assert parse_retry_after(None, NOW) is None


@pytest.mark.parametrize(
    "header",
    [
        "",
        "soon",
        "-5",
        "1.5",
        "1e3",
        "0x10",
        "Wed, 99 Foo 2026 99:99:99 GMT",
        "Mon, 32 Jan 2026 00:00:00 GMT",
        "²",  # a Latin-1 header byte that str.isdigit() takes for a digit
        "¹²",
    ],
)
def test_garbage_retry_after_is_none(header: str) -> None:
    assert parse_retry_after(header, NOW) is None


# -- RetryPolicy.delay ------------------------------------------------------------------------


def backoff_drawn(attempt: int, seed: int) -> float:
    """The backoff a fresh Random(seed) draws for this attempt (what delay() draws first)."""
    return POLICY.backoff(attempt, random.Random(seed))


@pytest.mark.parametrize(
    ("header", "hint"),
    [("10", 10.0), ("0", 0.0), ("300", 300.0), ("301", 300.0), ("100000", 300.0)],
)
@pytest.mark.parametrize("attempt", [1, 4, 9])
def test_delay_is_the_later_of_retry_after_capped_and_the_backoff(
    header: str, hint: float, attempt: int
) -> None:
    expected = max(hint, backoff_drawn(attempt, 0))

    assert expected == POLICY.delay(attempt, header, NOW, random.Random(0))


def test_delay_honours_retry_after_http_date_capped_at_max_delay() -> None:
    soon = http_date(NOW + timedelta(seconds=45))
    late = http_date(NOW + timedelta(hours=2))

    assert 45.0 == POLICY.delay(3, soon, NOW, random.Random(0))
    assert 300.0 == POLICY.delay(3, late, NOW, random.Random(0))


@pytest.mark.parametrize("header", ["0", http_date(NOW - timedelta(seconds=30)), http_date(NOW)])
@pytest.mark.parametrize("attempt", [1, 2, 5, 9])
def test_retry_after_zero_or_past_is_no_reason_to_hurry(header: str, attempt: int) -> None:
    """Contract 5: the backoff still applies; Retry-After never shortens it."""
    assert backoff_drawn(attempt, 11) == POLICY.delay(attempt, header, NOW, random.Random(11))


@PROPERTY
@given(
    attempt=st.integers(min_value=1, max_value=60),
    hint=st.integers(min_value=0, max_value=10_000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_delay_is_never_shorter_than_the_backoff_nor_the_capped_hint(
    attempt: int, hint: int, seed: int
) -> None:
    delay = POLICY.delay(attempt, str(hint), NOW, random.Random(seed))

    assert max(min(float(hint), POLICY.max_delay), backoff_drawn(attempt, seed)) == delay
    assert delay <= POLICY.max_delay


@pytest.mark.parametrize("digits", [400, 5000])
def test_huge_retry_after_seconds_is_capped_at_max_delay(digits: int) -> None:
    assert 300.0 == POLICY.delay(1, "9" * digits, NOW, random.Random(0))


def test_garbage_retry_after_falls_back_to_backoff() -> None:
    delay = POLICY.delay(1, "soon", NOW, random.Random(0))

    assert 0.0 <= delay <= 1.0


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 256.0), (10, 300.0), (50, 300.0), (500, 300.0)],
)
def test_backoff_is_full_jitter_within_zero_and_the_exponential_ceiling(
    attempt: int, ceiling: float
) -> None:
    rng = random.Random(20260823)

    delays = [POLICY.delay(attempt, None, NOW, rng) for _ in range(500)]

    assert all(0.0 <= delay <= ceiling for delay in delays)
    # full jitter: the draws spread over the whole interval, not only its upper half
    assert min(delays) < ceiling * 0.1
    assert max(delays) > ceiling * 0.9


def test_backoff_with_the_same_seed_is_the_same() -> None:
    first = [POLICY.delay(n, None, NOW, random.Random(7)) for n in range(1, 8)]
    second = [POLICY.delay(n, None, NOW, random.Random(7)) for n in range(1, 8)]

    assert first == second


@PROPERTY
@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0.001, max_value=10.0),
    extra=st.floats(min_value=0.0, max_value=1000.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_backoff_property_stays_within_full_jitter_bounds(
    attempt: int, base: float, extra: float, seed: int
) -> None:
    policy = RetryPolicy(max_attempts=5, base_delay=base, max_delay=base + extra)

    delay = policy.delay(attempt, None, NOW, random.Random(seed))

    ceiling = min(policy.max_delay, base * 2.0 ** min(attempt - 1, 1000))
    assert 0.0 <= delay <= ceiling


# -- decide ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
def test_temporary_below_max_attempts_is_delayed_until_now_plus_delay(attempt: int) -> None:
    decision = decide(temporary(), attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (Event.RETRY_SCHEDULED, State.DELAYED) == (decision.event, decision.to_state)
    assert decision.delay_s is not None
    assert NOW + timedelta(seconds=decision.delay_s) == decision.next_try_at
    assert 0.0 <= decision.delay_s <= 2 ** (attempt - 1)
    assert decision.charged


def test_temporary_with_retry_after_is_delayed_by_it() -> None:
    decision = decide(temporary("30"), attempt=2, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (30.0, NOW + timedelta(seconds=30)) == (decision.delay_s, decision.next_try_at)


@pytest.mark.parametrize("attempt", [5, 6])
def test_temporary_at_max_attempts_is_quarantined_retry_limit_with_the_last_error(
    attempt: int,
) -> None:
    decision = decide(
        temporary(detail="HTTP 503: maintenance"),
        attempt=attempt,
        now=NOW,
        policy=POLICY,
        rng=random.Random(3),
    )

    assert (State.QUARANTINED, Reason.RETRY_LIMIT) == (decision.to_state, decision.reason)
    assert decision.next_try_at is None
    assert "HTTP 503: maintenance" in decision.detail
    assert 503 == decision.http_status


def test_max_attempts_one_quarantines_after_the_first_temporary_failure() -> None:
    policy = RetryPolicy(max_attempts=1, base_delay=1.0, max_delay=300.0)

    decision = decide(temporary(), attempt=1, now=NOW, policy=policy, rng=random.Random(3))

    assert (State.QUARANTINED, Reason.RETRY_LIMIT) == (decision.to_state, decision.reason)


@pytest.mark.parametrize(
    ("attempt", "back_to"),
    [(1, State.NEW), (2, State.DELAYED), (5, State.DELAYED), (100, State.DELAYED)],
)
def test_pause_is_released_uncharged_to_new_or_to_delayed_after_a_charged_attempt(
    attempt: int, back_to: State
) -> None:
    pause = Classification(Verdict.PAUSE, "HTTP 401", http_status=401)

    decision = decide(pause, attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(3))

    expected = (Event.RELEASED, back_to, False, None, None)
    actual = (decision.event, decision.to_state, decision.charged, decision.reason)
    assert expected == (*actual, decision.next_try_at), "due again at once"


@pytest.mark.parametrize("attempt", [1, 3, 5])
def test_a_failed_probe_is_released_uncharged_even_on_the_last_attempt(attempt: int) -> None:
    decision = decide(
        temporary(), attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(3), probe=True
    )

    back_to = State.NEW if attempt == 1 else State.DELAYED
    assert (Event.RELEASED, back_to, False) == (
        decision.event,
        decision.to_state,
        decision.charged,
    )
    assert decision.detail.startswith("probe failed, not charged: ")


@pytest.mark.parametrize(("attempt", "back_to"), [(1, State.NEW), (4, State.DELAYED)])
def test_a_message_held_back_is_not_charged(attempt: int, back_to: State) -> None:
    decision = not_sent("not sent: the circuit breaker is open", attempt)

    assert (Event.RELEASED, back_to, False) == (
        decision.event,
        decision.to_state,
        decision.charged,
    )


@pytest.mark.parametrize("status", [400, 404, 410, 413, 422])
def test_terminal_is_quarantined_with_reason_http_code(status: int) -> None:
    terminal = Classification(Verdict.TERMINAL, f"HTTP {status}", http_status=status)

    decision = decide(terminal, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (State.QUARANTINED, f"http-{status}") == (decision.to_state, decision.reason)
    assert decision.next_try_at is None


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (200, Reason.UNKNOWN_SKU, "unknown-sku"),
        (None, Reason.UNMAPPED_PRICE_TYPE, "unmapped-price-type"),
        (400, Reason.UNKNOWN_SKU, "unknown-sku"),
        (422, None, "http-422"),
        (None, None, "http-0"),
    ],
)
def test_terminal_is_quarantined_with_the_reason_the_target_named_else_http_code(
    status: int | None, reason: str | None, expected: str
) -> None:
    terminal = Classification(Verdict.TERMINAL, "refused", http_status=status, reason=reason)

    decision = decide(terminal, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (State.QUARANTINED, expected, True) == (
        decision.to_state,
        decision.reason,
        decision.charged,
    )


@pytest.mark.parametrize(
    "verdict", [Verdict.DELIVERED, Verdict.STALE_AT_SITE, Verdict.UNKNOWN, Verdict.TEMPORARY]
)
def test_a_reason_only_names_the_quarantine_of_a_terminal_verdict(verdict: Verdict) -> None:
    answer = Classification(verdict, "x", http_status=503, reason=Reason.UNKNOWN_SKU)

    decision = decide(answer, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    assert Reason.UNKNOWN_SKU != decision.reason


def test_unknown_is_quarantined_unknown_response() -> None:
    unknown = Classification(Verdict.UNKNOWN, "HTTP 418", http_status=418)

    decision = decide(unknown, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    expected = (State.QUARANTINED, Reason.UNKNOWN_RESPONSE, 418)
    assert expected == (decision.to_state, decision.reason, decision.http_status)


def test_delivered_keeps_the_receipt() -> None:
    delivered = Classification(Verdict.DELIVERED, "HTTP 200", http_status=200, receipt="R-184")

    decision = decide(delivered, attempt=3, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (Event.DELIVERED, State.DELIVERED, "R-184") == (
        decision.event,
        decision.to_state,
        decision.receipt,
    )


def test_a_delivery_records_every_field_of_its_answer_and_nothing_else() -> None:
    # ``delivered`` (the worker's path for the usual answer, without the time) builds its
    # Decision by position: each field must land where ``decide`` always put it.
    answer = Classification(
        Verdict.DELIVERED,
        "HTTP 409: the site already holds version 7",
        http_status=409,
        error_class="Err",
        receipt="R-7",
        site_version=7,
        retry_after="5",
        result_unknown=True,
        reason="ignored",
    )

    expected = Decision(
        event=Event.DELIVERED,
        to_state=State.DELIVERED,
        detail="HTTP 409: the site already holds version 7",
        reason=None,
        charged=True,
        next_try_at=None,
        delay_s=None,
        http_status=409,
        error_class="Err",
        receipt="R-7",
        site_version=7,
        result_unknown=True,
    )
    assert expected == delivered(answer)
    assert expected == decide(answer, attempt=2, now=NOW, policy=POLICY, rng=random.Random(3))


def test_stale_at_site_is_cancelled_and_never_retried() -> None:
    stale = Classification(Verdict.STALE_AT_SITE, "HTTP 409", http_status=409, site_version=190)

    decision = decide(stale, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    expected = (State.CANCELLED, Reason.STALE_AT_SITE, None, 190)
    assert expected == (
        decision.to_state,
        decision.reason,
        decision.next_try_at,
        decision.site_version,
    )


def test_result_unknown_is_carried_into_the_decision() -> None:
    timeout = Classification(
        Verdict.TEMPORARY, "ReadTimeout", error_class="ReadTimeout", result_unknown=True
    )

    decision = decide(timeout, attempt=1, now=NOW, policy=POLICY, rng=random.Random(3))

    assert (State.DELAYED, True) == (decision.to_state, decision.result_unknown)


# -- the site's refusals (contract 5c) --------------------------------------------------------


@pytest.mark.parametrize("attempt", [1, 4, 5, 6])
@pytest.mark.parametrize("status", [429, 503])
def test_a_site_refusal_is_not_charged_even_on_the_last_attempt(attempt: int, status: int) -> None:
    refusal = Classification(Verdict.TEMPORARY, f"HTTP {status}: busy", http_status=status)

    decision = decide(
        refusal, attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(3), site_delay=2.5
    )

    back = State.DELAYED if attempt > 1 else State.NEW
    assert (Event.RELEASED, back, False) == (decision.event, decision.to_state, decision.charged)
    assert (2.5, NOW + timedelta(seconds=2.5)) == (decision.delay_s, decision.next_try_at)
    assert status == decision.http_status


@pytest.mark.parametrize(
    ("site_delay", "header", "expected"),
    [(0.5, "3", 3.0), (4.0, "3", 4.0), (0.5, "0", 0.5), (0.0, None, 0.0), (1.0, "9999", 300.0)],
)
def test_a_site_refusal_is_due_after_the_later_of_the_pace_and_retry_after(
    site_delay: float, header: str | None, expected: float
) -> None:
    decision = decide(
        temporary(header),
        attempt=2,
        now=NOW,
        policy=POLICY,
        rng=random.Random(3),
        site_delay=site_delay,
    )

    assert expected == decision.delay_s


def test_a_failed_probe_stays_a_probe_when_the_site_refused() -> None:
    decision = decide(
        temporary("5"),
        attempt=2,
        now=NOW,
        policy=POLICY,
        rng=random.Random(3),
        probe=True,
        site_delay=1.0,
    )

    assert (Event.RELEASED, None) == (decision.event, decision.next_try_at)


# -- awaiting the channel's outcome (contract 13, 14: a Wildberries task) ---------------------


@pytest.mark.parametrize("attempt", [1, 5])
def test_awaiting_goes_back_to_delayed_uncharged_due_after_the_wait_with_its_receipt(
    attempt: int,
) -> None:
    """Taken by the channel, its outcome read later: never charged (even on the last attempt
    allowed), no retry limit, due when the target said, and what it waits for kept."""
    answer = Classification(
        Verdict.AWAITING,
        "Wildberries took it in task 7: its outcome is read later",
        http_status=200,
        receipt="wb-task:7",
        again_in=3.0,
    )

    got = decide(answer, attempt=attempt, now=NOW, policy=POLICY, rng=random.Random(1))

    assert (Event.AWAITING_OUTCOME, State.DELAYED, False) == (
        got.event,
        got.to_state,
        got.charged,
    )
    assert (NOW + timedelta(seconds=3), 3.0, "wb-task:7", None) == (
        got.next_try_at,
        got.delay_s,
        got.receipt,
        got.reason,
    )


def test_a_retried_answer_keeps_its_receipt_so_it_replaces_what_an_awaiting_left() -> None:
    """Yandex Market's "not applied: sent again" replaces the delivery's ``ym-accepted:``
    receipt, so the next attempt sends instead of reading back (issue 31 item 3)."""
    c = Classification(Verdict.TEMPORARY, "not applied", http_status=200, receipt="ym-not-applied")
    decision = decide(c, attempt=1, now=NOW, policy=POLICY, rng=random.Random(1))
    assert Event.RETRY_SCHEDULED == decision.event
    assert "ym-not-applied" == decision.receipt


def test_a_connection_refused_while_paced_is_no_answer_not_a_busy_site() -> None:
    """Issue 31 item 7: a market that refused the connection did not answer; it was not
    overloaded. The history says «no answer», a refusal with a status still «site busy»."""
    refused = Classification(
        Verdict.TEMPORARY, "ConnectError", error_class="ConnectError", http_status=None
    )
    decision = decide(
        refused, attempt=2, now=NOW, policy=POLICY, rng=random.Random(3), site_delay=1.0
    )
    assert decision.detail == "no answer, not charged: ConnectError"
    assert error_words(decision.detail, "ru") == "нет ответа, попытка не засчитана: ConnectError"
    busy = Classification(Verdict.TEMPORARY, "HTTP 429: busy", http_status=429)
    decision = decide(busy, attempt=2, now=NOW, policy=POLICY, rng=random.Random(3), site_delay=1.0)
    assert decision.detail == "site busy, not charged: HTTP 429: busy"
