"""A worker process killed (SIGKILL) at each crash point; a fresh one finishes; nothing breaks.

The points: (a) intake, in a chunk's open transaction or between chunks; (b) a lease committed,
no request sent; (c) the site applied the effect and holds the answer (killed from here);
(d) an answer arrived, nothing recorded; (e) in the middle of recording a batch. Each runs on
SQLite and PostgreSQL with a few variants drawn from seeds (data, batch size, concurrency,
intake chunk, which hit of the failpoint kills, site failures); the invariants are
``procs.check_invariants``. CI runs ``EXCHANGE_CRASH_RUNS`` variants per point and database
(default 2, about a minute in all); ``scripts/crash-runs`` runs many more and prints a table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from procs import POINTS, crash_run, plan, sqlite_database

from exchange.dev.sitesim import SiteSimulator
from exchange.failpoints import POINTS as FAILPOINTS
from exchange.failpoints import parse

VARIANTS = int(os.environ.get("EXCHANGE_CRASH_RUNS", "2"))
CASES = [
    pytest.param(point, database, seed, marks=marks, id=f"{point}-{database}-{seed}")
    for point in POINTS
    for database, marks in (
        ("sqlite", [pytest.mark.slow]),
        ("postgresql", [pytest.mark.slow, pytest.mark.postgres]),
    )
    for seed in range(1, VARIANTS + 1)
]


@pytest.mark.parametrize(("point", "database", "seed"), CASES)
def test_a_worker_killed_at_a_crash_point_loses_doubles_or_reorders_nothing_and_another_finishes(
    point: str, database: str, seed: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = sqlite_database(tmp_path) if database == "sqlite" else request.getfixturevalue("pg_url")
    result = crash_run(url, tmp_path, plan(point, seed, sqlite=database == "sqlite"))
    assert result.passed, "\n".join(result.problems)


@pytest.mark.slow
def test_the_checks_catch_an_effect_applied_twice_when_the_site_forgets_keys_and_versions(
    tmp_path: Path,
) -> None:
    def forget_keys(site: SiteSimulator) -> None:  # and the versions it holds: no 409 either
        site.forget_keys()
        site.forget_versions()

    url = sqlite_database(tmp_path)
    result = crash_run(url, tmp_path, plan("in-flight", 1, sqlite=True), after_kill=forget_keys)
    assert not result.passed
    assert any("effects applied more than once" in problem for problem in result.problems)


def test_the_harness_arms_every_failpoint_and_only_failpoints_that_exist() -> None:
    # serve's own point, the brokers' and a channel's seeding are armed by their own tests
    # (tests/web/test_cml_interrupted.py, tests/brokers/test_broker_crashes.py,
    # tests/cli/test_cli_channels_registry.py)
    armed_elsewhere = {"import-started", "source-staged", "seed-batch-done"}
    assert FAILPOINTS - armed_elsewhere == {name for names in POINTS.values() for name in names}


def test_a_failpoint_spec_is_parsed_with_its_hit_number_and_kill_means_the_first_hit() -> None:
    armed = parse("after-answer=kill@3, record-applied=kill")
    assert {"after-answer": 3, "record-applied": 1} == {k: v.kill_at for k, v in armed.items()}
    assert {} == parse("")


@pytest.mark.parametrize(
    "spec",
    ["after-answer", "after-answer=kill@0", "after-answer=stop", "no-such-point=kill", "=kill@2"],
)
def test_a_malformed_failpoint_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match=r"kill|unknown failpoint"):
        parse(spec)


def _python(code: str, failpoints: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EXCHANGE_FAILPOINTS": failpoints}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_an_armed_failpoint_kills_the_process_on_the_given_hit_and_not_before() -> None:
    code = (
        "from exchange.failpoints import failpoint\n"
        "for n in range(1, 6):\n"
        "    print(n, flush=True)\n"
        "    failpoint('after-answer')\n"
        "    failpoint('record-applied')\n"
    )
    done = _python(code, "after-answer=kill@3")
    assert -signal.SIGKILL == done.returncode
    assert ["1", "2", "3"] == done.stdout.split()


def test_a_malformed_failpoints_variable_is_a_one_line_error_and_exit_2() -> None:
    done = _python("import exchange.failpoints", "after-answer=kill@x")
    assert 2 == done.returncode
    assert 1 == len(done.stderr.strip().splitlines()), done.stderr
    assert "EXCHANGE_FAILPOINTS" in done.stderr and "Traceback" not in done.stderr
