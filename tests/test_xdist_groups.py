"""The suite's xdist groups hold (tests/support/xdistgroups.py): under ``-n 2 --dist
loadgroup`` the tests marked ``timing`` run on one worker, and so do the tests of a module with a
module-scoped fixture. The grouping rests on private attributes of pytest and pytest-xdist (the
node id xdist's scheduler reads): a new version of either that breaks it fails here, where
otherwise the timing tests would silently run beside each other again.

A pytester run of four tests, each writing down its worker: ungrouped, they are four units of
work that xdist hands out one per worker first, so the two of each pair land on different
workers; grouped, they are two units, one per worker. Two worker processes (about a second of
CPU each); no sleeping, nothing timed.
"""

from __future__ import annotations

import os

import pytest

RECORD = """
import os
import pathlib

import pytest


def record(name):
    pathlib.Path({seen!r}, name).write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_timing_tests_share_one_worker_and_so_do_a_module_fixtures_tests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # xdist alone: the other installed plugins (Hypothesis, anyio, respx...) would double what
    # the two workers cost to start (the workers inherit the environment)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    seen = pytester.path / "seen"
    seen.mkdir()
    record = RECORD.format(seen=str(seen))
    pytester.makeini("[pytest]\nmarkers =\n    timing: asserts on wall-clock time\n")
    pytester.makeconftest('pytest_plugins = ["xdistgroups"]  # as tests/conftest.py loads it\n')
    pytester.makepyfile(
        test_first=record + "\n\n@pytest.mark.timing\ndef test_one():\n    record('timing-1')\n",
        test_second=record + "\n\n@pytest.mark.timing\ndef test_two():\n    record('timing-2')\n",
        test_shared=record
        + "\n\n@pytest.fixture(scope='module')\ndef made_once():\n    return object()\n"
        + "\n\ndef test_three(made_once):\n    record('module-3')\n"
        + "\n\ndef test_four(made_once):\n    record('module-4')\n",
    )

    result = pytester.runpytest_inprocess("-p", "xdist", "-n", "2", "--dist", "loadgroup")

    result.assert_outcomes(passed=4)
    workers = {path.name: path.read_text() for path in seen.iterdir()}
    assert workers["timing-1"] == workers["timing-2"], workers
    assert workers["module-3"] == workers["module-4"], workers
    # both workers ran tests: the run could have split a group
    assert {"gw0", "gw1"} == set(workers.values()), workers


def test_auto_starts_half_as_many_workers_again_as_there_are_cores(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-n auto`` asks the hook; ours must answer before xdist's own (cores only), and
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins."""
    from xdistgroups import workers_for

    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    pytester.makeconftest('pytest_plugins = ["xdistgroups"]\n')
    config = pytester.parseconfigure("-p", "xdist", "-n", "auto")
    cores = len(os.sched_getaffinity(0))
    assert workers_for(cores) == config.hook.pytest_xdist_auto_num_workers(config=config)
    assert [2, 3, 6, 12] == [workers_for(n) for n in (1, 2, 4, 8)]
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert 5 == config.hook.pytest_xdist_auto_num_workers(config=config)
