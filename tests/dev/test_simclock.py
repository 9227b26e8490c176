"""The marketplace simulators' clock (exchange/dev/simclock.py): a still clock moves only when
advanced; a scaled one runs ``scale`` times faster in its simulated view while its wall view
stays the wall clock's moment (Yandex Market's dates) and its durations last 1/scale."""

from __future__ import annotations

import time

import pytest

from exchange.dev.simclock import SimClock


def test_a_still_clock_moves_only_when_advanced_and_its_seconds_count_as_they_are() -> None:
    clock = SimClock(0, start=1_790_000_000.0)
    time.sleep(0.02)
    assert (1_790_000_000.0, 0.0) == (clock.now(), clock.elapsed())
    clock.advance(61)
    assert (1_790_000_061.0, 1_790_000_061.0) == (clock.now(), clock.wall_now())
    assert (1.0, 60.0) == (clock.pace, clock.wall(60))
    assert "2026-09-21T14:14:21+00:00" == clock.datetime().isoformat()


@pytest.mark.timing
def test_a_scaled_clock_runs_faster_but_its_wall_view_keeps_the_wall_clocks_moment() -> None:
    clock = SimClock(3600)
    time.sleep(0.1)
    assert clock.elapsed() >= 360  # 0.1 s of wall clock, an hour's tenth simulated
    assert abs(clock.wall_now() - time.time()) < 0.05
    assert 1.0 == clock.wall(3600)
    clock.advance(3600)  # an hour simulated: a second of the wall view
    assert 0.9 < clock.wall_now() - time.time() < 1.05


def test_a_negative_scale_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        SimClock(-1)
