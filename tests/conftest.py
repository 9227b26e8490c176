"""Fixtures shared by every tier: databases (SQLite and a real PostgreSQL), clocks, staging.

PostgreSQL is required, never skipped: when it cannot be reached the tests that need it
fail with the reason. Each test gets a migrated database of its own: a copy of a migrated
SQLite file, or a PostgreSQL database of the process's pool, reset and proven clean
(exchange/dev/dbkit.py).
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import quickhash
from hypothesis import settings
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.dev.dbkit import PgKit, SqliteTemplate, pg_admin_url
from exchange.dev.testing import load_scale
from exchange.domain.clock import FakeClock
from exchange.ops import operators
from exchange.worker import common as worker_common

PG_ADMIN_URL = pg_admin_url()
# Which tests share an xdist worker (the `timing` tests, a module-scoped fixture's module):
# tests/support/xdistgroups.py, checked by tests/test_xdist_groups.py (with pytester).
pytest_plugins = ["pytester", "xdistgroups"]


@pytest.fixture(scope="session")
def pg_kit() -> Iterator[PgKit]:
    """This process's PostgreSQL databases (exchange/dev/dbkit.py): one xdist worker, one kit."""
    if FAST:
        pytest.fail(
            "this test reaches PostgreSQL: mark it `postgres` (or use a fixture that does) so "
            "that `make test-fast` leaves it out",
            pytrace=False,
        )
    kit = PgKit(PG_ADMIN_URL)
    try:
        kit.admin()
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is required for these tests and is unreachable at {PG_ADMIN_URL}: {exc}",
            pytrace=False,
        )
    yield kit
    kit.close()


@pytest.fixture(scope="session")
def pg_template(pg_kit: PgKit) -> str:
    """The name of the migrated template database the pool is cloned from."""
    return pg_kit.template


@pytest.fixture
def pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A migrated PostgreSQL database for this test alone: empty but for the rows migrations
    write (the one channel), sequences where the migrations left them,
    the schema of a fresh migration (proven when handed out)."""
    name = pg_kit.acquire()
    yield pg_kit.url(name)
    pg_kit.release(name)


@pytest.fixture
def other_pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A second migrated PostgreSQL database for one test (a staging database of its own,
    EXCHANGE_STAGING_URL), the same promise as ``pg_url``."""
    name = pg_kit.acquire()
    yield pg_kit.url(name)
    pg_kit.release(name)


@pytest.fixture
def analyzed_engine(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: SqliteTemplate
) -> Iterator[Engine]:
    """``engine`` for a test that fills tables and ANALYZEs them to read a plan: the
    planner's statistics outlive the rows the pool deletes (exchange/dev/dbkit.py), so its
    PostgreSQL database is dropped afterwards, never handed to another test. Parametrise it
    as ``db_url`` is (``indirect``), or it is SQLite's and PostgreSQL's in turn."""
    kind = getattr(request, "param", None)
    if kind == "sqlite":
        url, name = sqlite_template.copy_to(tmp_path / "exchange.db"), None
    else:
        kit: PgKit = request.getfixturevalue("pg_kit")
        name = kit.acquire()
        url = kit.url(name)
    engine = make_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()
        if name is not None:
            kit.drop(name)


@pytest.fixture
def empty_pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A fresh PostgreSQL database with no tables (for migration tests), dropped afterwards."""
    name = pg_kit.create_empty()
    yield pg_kit.url(name)
    pg_kit.drop(name)


@pytest.fixture(scope="session")
def sqlite_template() -> SqliteTemplate:
    """The migrations run once per process into a file that each test copies."""
    return SqliteTemplate.shared()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: SqliteTemplate) -> str:
    """A migrated database URL of this test alone, once for SQLite and once for PostgreSQL."""
    if request.param == "sqlite":
        return sqlite_template.copy_to(tmp_path / "exchange.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashes() -> Iterator[None]:
    """argon2id at its smallest cost in this process (tests/support/quickhash.py: 0.25 s of
    CPU a hash or a verification at production's, hundreds of sign-ins in the suite); the
    production parameters are checked by tests/security/test_password_hashing.py."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(operators, "_hasher", quickhash.QUICK)
        operators._dummy.cache_clear()  # an unknown name is checked against a quick hash too
        yield
        operators._dummy.cache_clear()


@pytest.fixture(scope="session", autouse=True)
def _no_start_wait() -> Iterator[None]:
    """A marketplace loop of a worker in this process counts the others at once, without
    waiting ``START_WAIT`` for a second worker that never comes: a test's workers start one at
    a time. The wait is proven by tests/integration/test_marketplace_workers_start_together.py
    (real processes, the real wait) and tests/targets/test_account_shares.py (set back)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(worker_common, "START_WAIT", 0.0)
        yield


# -- selection, parallel runs, Hypothesis ------------------------------------------------------

# ``make test-fast`` (EXCHANGE_TEST_FAST=1) runs `-m "not postgres and not subprocess and not
# browser"`. The marks come from the fixtures a test uses (below) or from its module; a test
# that reaches PostgreSQL or starts a process without its mark fails there, saying which
# mark it lacks, so the fast selection never runs a slow test silently.
FAST = os.environ.get("EXCHANGE_TEST_FAST") == "1"
POSTGRES_FIXTURES = {"pg_kit", "pg_template", "pg_url", "other_pg_url", "empty_pg_url"}
# `serve` (tests/web) starts the 1C reader process of `exchange serve`. The `cli` fixture is not
# here: it runs a command in the test's process (tests/support/clitools.py); the tests that start
# the real binary (``Cli(..., process=True)``, subprocess) are listed below.
SUBPROCESS_FIXTURES = {"pki", "tls_site", "wrong_name_site", "serve"}
# Tests that start processes with no such fixture: a module, or one test (a node id prefix).
SUBPROCESS_TESTS = (
    "tests/bench/test_fastsite.py",
    "tests/bench/test_fanout_bench.py::test_a_tiny_run_delivers_every_price_once_to_each_channel",
    "tests/cli/test_cli_channels_registry.py::test_seed_killed_after_a_batch_goes_on_from_its_mark",
    "tests/config/test_one_field_one_price_type.py::test_the_service_refuses_to_start_exit_2",
    "tests/dev/test_ozonsim.py::test_runnable_on_its_own_printing_the_channel_settings",
    "tests/dev/test_ozonsim.py::test_a_key_file_it_is_given_is_used_and_never_printed",
    "tests/dev/test_ozonsim.py::test_an_unknown_switch_stops_it_with_one_line",
    "tests/dev/test_wbsim.py::test_runs_on_its_own_and_prints_the_channel_settings",
    "tests/dev/test_ymsim.py::test_a_bad_switch_value_stops_it_with_one_line",
    "tests/dev/test_ymsim.py::test_runnable_on_its_own_printing_the_channel_settings",
    "tests/integration/test_wildberries_channel.py::test_a_worker_killed_after_the_upload_leaves",
    "tests/check/test_check_cli.py::test_check_with_a_configuration_that_does_not_load",
    "tests/cli/test_cli_config_errors.py",
    "tests/cli/test_cli_options.py",
    "tests/cli/test_cli_run.py::test_run_forever_delivers_until_sigterm_then_exits_0_within_10_s",
    "tests/dev/test_simulators_foreground.py",
    "tests/dev/test_rehearsal_catalogue.py::test_the_simulator_command_takes_the_catalogue",
    # its fastsite front end is bench/fastsite.py, a process (started once per module)
    "tests/dev/test_site_conformance.py::test_every_front_end_answers_the_conformance_table_as_the_contract_says[fastsite-",
    "tests/dev/test_sitesim.py::test_command_line_serves_until_interrupted",
    "tests/faults/",
    "tests/integration/test_worker_killed.py",
    "tests/integration/test_workers.py",
    "tests/ops/test_notify.py::test_smtp_over_tls_verifies_the_servers_certificate",
    "tests/ops/test_run_metrics_cli.py::test_run_refuses_a_metrics_port_already_in_use_with_one_line",
    "tests/packaging/",
    "tests/report/test_report_cli.py::test_a_bad_report_schedule_stops_exchange_run_with_one_line",
    "tests/report/test_report_samples.py",
    "tests/security/test_intake_limits.py::test_serve_on_a_host_that_does_not_resolve_exits_2",
    "tests/security/test_masking.py::test_the_command_line_refuses_a_short_1c_password",
    "tests/security/test_plain_http_and_wire.py",
    "tests/security/test_secrets_and_tls.py::test_run_with_a_missing_ca_bundle_exits_2",
    "tests/security/test_secrets_in_commands.py",
    "tests/test_architecture.py",
    "tests/test_xdist_groups.py",
    "tests/web/test_cml_interrupted.py",
    "tests/web/test_cml_reading.py",
    "tests/web/test_onec_admin_path_browser.py",
    "tests/web/test_onec_exchange.py::test_exchange_status_shows_the_last_failures",
    "tests/web/test_separate_staging.py",
    "tests/web/test_serve.py",
)
# pytest-timeout is a hang detector, not a check: on a machine whose run queue is longer than
# its cores every test's wall time stretches by about that ratio, so the limits (the ini's 60 s
# and each @pytest.mark.timeout) stretch with the load measured when the run starts, up to 5x.
TIMEOUT_SCALE = load_scale()
# How many examples a property runs in the developer's loop (the "dev" profile); under CI=true
# ("ci") every test runs the count it names.
DEV_MAX_EXAMPLES = 20

settings.register_profile("ci", settings.get_profile("default"))
settings.register_profile("dev", max_examples=DEV_MAX_EXAMPLES)
PROFILE = os.environ.get(
    "HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI", "").lower() == "true" else "dev"
)
settings.load_profile(PROFILE)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        # db_url and the fixtures like it are parametrized "sqlite"/"postgresql" (or pairs of
        # them, "postgresql+sqlite")
        postgresql = any(isinstance(p, str) and "postgresql" in p.split("+") for p in params)
        if names & POSTGRES_FIXTURES or postgresql:
            item.add_marker(pytest.mark.postgres)
        if names & SUBPROCESS_FIXTURES or item.nodeid.startswith(SUBPROCESS_TESTS):
            item.add_marker(pytest.mark.subprocess)
        if "browser" in names:
            item.add_marker(pytest.mark.browser)
        _scale_timeout(config, item)
        if PROFILE != "ci":
            _fewer_examples(item)


def _scale_timeout(config: pytest.Config, item: pytest.Item) -> None:
    if TIMEOUT_SCALE == 1.0:
        return
    own = item.get_closest_marker("timeout")
    if own is not None:
        seconds = float(own.args[0] if own.args else own.kwargs.get("timeout", 0))
    else:
        seconds = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    if seconds > 0:
        item.add_marker(pytest.mark.timeout(seconds * TIMEOUT_SCALE), append=False)


def _fewer_examples(item: pytest.Item) -> None:
    """The dev profile caps the examples a test names itself (``@settings(max_examples=300)``
    overrides any profile): the test keeps its own settings otherwise."""
    test = getattr(item, "obj", None)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is None or own.max_examples <= DEV_MAX_EXAMPLES:
        return
    test._hypothesis_internal_use_settings = settings(own, max_examples=DEV_MAX_EXAMPLES)  # type: ignore[union-attr]


@pytest.fixture(scope="session", autouse=True)
def _fast_selection_guard() -> Iterator[None]:
    """Under ``make test-fast`` a process started by a test (or its fixtures) fails it."""
    if not FAST:
        yield
        return

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(
            "a test of `make test-fast` starts a process: mark it `subprocess` (or list it in "
            "SUBPROCESS_TESTS, tests/conftest.py) so that the fast selection leaves it out"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", refuse)
        patch.setattr(multiprocessing.util, "spawnv_passfds", refuse)
        patch.setattr(os, "fork", refuse)
        yield
