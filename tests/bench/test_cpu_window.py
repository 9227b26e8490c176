"""The bench's worker CPU inside the delivery window (bench/cpu.py): the interpolation between
samples, and the sampler against a real process whose busy and idle moments are known."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from bench.cpu import CpuSampler, cpu_at, cpu_between

# (time, CPU seconds so far): 1 s of CPU in the first second, 0.5 s in the next, then 1 s in 4 s
SAMPLES = [(10.0, 0.0), (11.0, 1.0), (12.0, 1.5), (16.0, 2.5)]


@pytest.mark.parametrize(
    ("start", "end", "spent"),
    [
        (10.0, 16.0, 2.5),  # the whole series
        (11.0, 12.0, 0.5),  # exactly on samples
        (10.5, 11.5, 0.75),  # half of each side: 0.5 + 0.25
        (10.25, 10.75, 0.5),  # inside one interval
        (11.5, 16.0, 1.25),  # 0.25 + 1.0
        (13.0, 15.0, 0.5),  # inside the long interval: 2 s at 0.25 CPU s a second
        (11.0, 11.0, 0.0),  # an empty stretch (one effect)
        (9.99, 11.0, None),  # starts before the first sample: unknown
        (11.0, 16.01, None),  # ends after the last sample: unknown
    ],
)
def test_cpu_between_interpolates_between_the_samples_either_side(
    start: float, end: float, spent: float | None
) -> None:
    got = cpu_between(SAMPLES, start, end)
    if spent is None:
        assert got is None
    else:
        assert got == pytest.approx(spent)


def test_the_samples_order_does_not_matter() -> None:
    assert cpu_between(list(reversed(SAMPLES)), 10.5, 11.5) == pytest.approx(0.75)


def test_a_stretch_that_ends_before_it_starts_is_an_error() -> None:
    with pytest.raises(ValueError):
        cpu_between(SAMPLES, 12.0, 11.0)


@pytest.mark.parametrize(
    ("moment", "cpu"),
    [(10.0, 0.0), (10.1, 0.1), (14.0, 2.0), (16.0, 2.5), (9.0, None), (17.0, None)],
)
def test_cpu_at(moment: float, cpu: float | None) -> None:
    got = cpu_at(SAMPLES, moment)
    assert got == (None if cpu is None else pytest.approx(cpu))


def test_a_final_figure_never_makes_the_series_go_down() -> None:
    sampler = CpuSampler()
    sampler.watch(1, 10.0)
    sampler.samples[1].append((11.0, 1.0))
    sampler.finish(1, 12.0, 0.99)  # wait4's figure a hair under /proc's ticks
    sampler.finish(1, 11.5, 5.0)  # seen gone before the last sample: ignored
    assert sampler.samples[1] == [(10.0, 0.0), (11.0, 1.0), (12.0, 1.0)]


# A child that spins on the CPU, sleeps, and spins again, printing the time.time() of its sleep.
SPIN_SLEEP_SPIN = """
import json, time
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
spin(0.3)
asleep = time.time()
time.sleep(0.8)
awake = time.time()
spin(0.3)
print(json.dumps([asleep, awake]))
"""


@pytest.mark.timing  # the child's busy and idle moments are timed on the wall clock
@pytest.mark.subprocess
def test_the_sampler_sees_a_process_s_cpu_on_the_wall_clock_of_another() -> None:
    """The window's ends are stamped in another process (the site's time.time()): the CPU the
    sampler puts between a child's own stamps of its sleep is near nothing, and over its whole
    life it is all of the child's CPU."""
    sampler = CpuSampler(interval=0.01)
    spawned = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN_SLEEP_SPIN], stdout=subprocess.PIPE, text=True
    )
    sampler.watch(proc.pid, spawned)
    sampler.start()
    out, _ = proc.communicate(timeout=60)
    seen_gone = time.time()
    sampler.stop()
    asleep, awake = json.loads(out)
    samples = sampler.samples[proc.pid]
    assert len(samples) > 10
    # a tick (10 ms) of accounting and a late sample at either end, on a busy machine
    slept = cpu_between(samples, asleep + 0.2, awake - 0.2)
    assert slept is not None and slept <= 0.03
    before = cpu_between(samples, spawned, asleep)
    assert before is not None and before >= 0.25  # the first spin, with Python's start-up
    sampler.finish(proc.pid, seen_gone, samples[-1][1])
    assert cpu_between(samples, spawned, seen_gone) == pytest.approx(samples[-1][1])
