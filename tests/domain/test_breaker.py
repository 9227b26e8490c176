"""Contract 5: a site outage is not a poison message (``breaker.CircuitBreaker``)."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from exchange.domain.breaker import BreakerState, CircuitBreaker
from exchange.domain.retry import RetryPolicy

NOW = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
BATCH = 100


def breaker(threshold: int = 5, base: float = 1.0, max_delay: float = 300.0) -> CircuitBreaker:
    return CircuitBreaker(threshold, RetryPolicy(5, base, max_delay))


def fail(b: CircuitBreaker, aggregates: list[int], now: datetime = NOW) -> list[bool]:
    return [b.record_temporary_failure(aggregate, now) for aggregate in aggregates]


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize("threshold", [1, 2, 5, 10])
def test_breaker_opens_after_threshold_failures_on_distinct_aggregates(threshold: int) -> None:
    b = breaker(threshold=threshold)

    opened = fail(b, list(range(1, threshold + 1)))

    assert [False] * (threshold - 1) + [True] == opened
    assert (BreakerState.OPEN, 0) == (b.state(NOW), b.allowance(NOW, BATCH))


def test_breaker_stays_closed_below_threshold() -> None:
    b = breaker(threshold=5)

    fail(b, [1, 2, 3, 4])

    assert (BreakerState.CLOSED, BATCH) == (b.state(NOW), b.allowance(NOW, BATCH))


def test_repeated_failures_of_one_aggregate_never_open_it() -> None:
    b = breaker(threshold=5)

    opened = fail(b, [17] * 1000)

    assert not any(opened)
    assert (BreakerState.CLOSED, BATCH) == (b.state(NOW), b.allowance(NOW, BATCH))


def test_failures_that_speak_about_the_site_open_it_whatever_their_aggregates() -> None:
    """A shop that is down with two products waiting (its health check fails too): the same
    two aggregates failing again and again open it at the threshold's count."""
    b = breaker(threshold=5)

    opened = [b.record_temporary_failure(a, NOW, site_wide=True) for a in [1, 2, 1, 2, 1]]

    assert [False, False, False, False, True] == opened
    assert BreakerState.OPEN == b.state(NOW)


def test_a_success_resets_the_count_of_site_wide_failures() -> None:
    b = breaker(threshold=5)

    for _ in range(4):
        b.record_temporary_failure(1, NOW, site_wide=True)
    b.record_success()
    opened = [b.record_temporary_failure(1, NOW, site_wide=True) for _ in range(4)]

    assert not any(opened)
    assert BreakerState.CLOSED == b.state(NOW)


def test_a_poison_message_the_site_does_not_share_never_opens_it_among_site_wide_ones() -> None:
    """Failures of one message that are not site-wide do not add to the site-wide count."""
    b = breaker(threshold=5)

    fail(b, [17] * 10)
    opened = [b.record_temporary_failure(17, NOW, site_wide=True) for _ in range(4)]

    assert not any(opened)
    assert BreakerState.CLOSED == b.state(NOW)


def test_only_distinct_aggregates_count_towards_the_threshold() -> None:
    b = breaker(threshold=5)

    fail(b, [1, 1, 2, 2, 3, 3, 4, 4, 4, 1])
    assert BreakerState.CLOSED == b.state(NOW)

    fail(b, [5])
    assert BreakerState.OPEN == b.state(NOW)


def test_success_in_between_resets_the_count() -> None:
    b = breaker(threshold=5)

    fail(b, [1, 2, 3, 4])
    b.record_success()
    opened = fail(b, [5, 6, 7, 8])

    assert not any(opened)
    assert BreakerState.CLOSED == b.state(NOW)


def test_open_breaker_allows_nothing_until_the_cool_down_ends() -> None:
    b = breaker(threshold=2, base=10.0)
    fail(b, [1, 2])

    assert 0 == b.allowance(later(0), BATCH)
    assert 0 == b.allowance(later(9.999), BATCH)
    assert BreakerState.OPEN == b.state(later(9.999))


def test_after_the_cool_down_it_is_half_open_and_allows_one_probe() -> None:
    b = breaker(threshold=2, base=10.0)
    fail(b, [1, 2])

    assert (BreakerState.HALF_OPEN, 1) == (b.state(later(10)), b.allowance(later(10), BATCH))
    assert 1 == b.allowance(later(3600), BATCH)


def test_failed_probe_reopens_with_a_longer_cool_down() -> None:
    b = breaker(threshold=2, base=10.0, max_delay=300.0)
    fail(b, [1, 2])

    probe_at = later(10)
    reopened = b.record_temporary_failure(3, probe_at, probe=True)

    assert reopened
    assert BreakerState.OPEN == b.state(probe_at + timedelta(seconds=19.999))
    assert BreakerState.HALF_OPEN == b.state(probe_at + timedelta(seconds=20))


def test_cool_down_grows_and_is_capped_at_max_delay() -> None:
    b = breaker(threshold=1, base=1.0, max_delay=5.0)
    now = NOW
    cool_downs = []

    b.record_temporary_failure(1, now)
    for probe in range(2, 9):
        assert b.opened_until is not None
        cool_downs.append((b.opened_until - now).total_seconds())
        now = b.opened_until  # half-open: the probe goes out and fails
        b.record_temporary_failure(probe, now, probe=True)

    assert [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0] == cool_downs


def test_successful_probe_closes_it() -> None:
    b = breaker(threshold=2, base=10.0)
    fail(b, [1, 2])

    b.record_success()

    assert (BreakerState.CLOSED, BATCH) == (b.state(later(10)), b.allowance(later(10), BATCH))
    assert not b.is_open()


def test_after_closing_a_new_outage_needs_the_full_threshold_and_starts_at_base_delay() -> None:
    b = breaker(threshold=3, base=10.0)
    fail(b, [1, 2, 3])
    b.record_temporary_failure(4, later(10), probe=True)  # failed probe: cool-down 20
    b.record_success()

    assert [False, False] == fail(b, [5, 6], later(30))
    assert b.record_temporary_failure(7, later(30), probe=True)
    assert BreakerState.HALF_OPEN == b.state(later(40))


def test_starting_the_probes_over_never_repeats_the_aggregate_probed_last() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    b = breaker(threshold=1, base=1.0, max_delay=10.0)
    b.record_temporary_failure(1, now)  # opens
    for aggregate in (1, 2, 3):  # three failed probes
        b.record_temporary_failure(aggregate, now, probe=True)
    b.start_probing_again()
    assert {3} == b.probed
    b.start_probing_again()  # only the last one was left: it may go again
    assert set() == b.probed


def test_failures_of_requests_already_in_flight_when_it_opened_do_not_lengthen_the_cool_down() -> (
    None
):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    b = breaker(threshold=2, base=1.0, max_delay=300.0)
    b.record_temporary_failure(1, now)
    assert b.record_temporary_failure(2, now)  # opens: cool-down 1 s
    for aggregate in range(3, 10):  # the rest of the batch that was already on the wire
        assert not b.record_temporary_failure(aggregate, now)
    assert now + timedelta(seconds=1) == b.opened_until
