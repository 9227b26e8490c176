"""Helpers for the command-line tests: ``exchange`` as an operator runs it.

Every call gets a controlled environment: the caller's ``EXCHANGE_*`` variables are dropped,
then only what the test names is set. Whatever a command prints, two things never appear in it
(contract 6 and 7): a Python traceback, and the value of ``EXCHANGE_SITE_TOKEN``.

A command runs in the test's own process (``exchange.cli.main`` with that argv, environment,
directory and empty stdin; its exit code, stdout and stderr captured): starting a Python that
imports the whole application costs 1.5-2 s of CPU, and most tests are about what a command
does, not about the binary. ``Cli(cwd, process=True)`` runs the real ``python -m exchange``:
for the tests whose point is the binary itself (its exit code and one line on stderr for a
bad configuration or option, signals, what other processes see).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

import exchange.db.engine
from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, load_scale, one_channel_messages, run_worker, stage
from exchange.domain.identity import message_id

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


def _import_main() -> Callable[[], None]:
    """``exchange.cli.main``, imported without COLUMNS or LINES in the environment: the CLI's
    rich consoles are made at its import, and one made while COLUMNS is set keeps that width
    for good; made without, each prints at the COLUMNS of the command that runs (rich's
    ``Console.size`` reads it as it prints)."""
    saved = {name: os.environ.pop(name) for name in ("COLUMNS", "LINES") if name in os.environ}
    try:
        from exchange.cli import main
    finally:
        os.environ.update(saved)
    return main


main = _import_main()

TOKEN = "test-token"

# Millisecond delays: a whole pipeline run takes a fraction of a second (contract 7).
FAST_ENV = {
    "EXCHANGE_POLL_INTERVAL": "0.01",
    "EXCHANGE_RETRY_BASE_DELAY": "0.001",
    "EXCHANGE_RETRY_MAX_DELAY": "0.01",
}

Result = subprocess.CompletedProcess[str]


def describe(result: Result) -> str:
    """What a failed assertion shows: the command, its exit code and everything it printed."""
    args = " ".join(result.args[3:]) if isinstance(result.args, list) else result.args
    return (
        f"\n$ exchange {args}\nexit code: {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}--- stderr ---\n{result.stderr}"
    )


def assert_one_line_error(result: Result, *fragments: str) -> str:
    """Exit 2 and exactly one line on stderr, ``error: …``, naming what is wrong."""
    assert result.returncode == 2, describe(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one error line on stderr{describe(result)}"
    assert lines[0].startswith("error:"), describe(result)
    for fragment in fragments:
        assert fragment in lines[0], f"the error does not mention {fragment!r}{describe(result)}"
    return lines[0]


def assert_usage_error(result: Result, *fragments: str) -> None:
    """A bad option: exit 2 and stderr names the problem (tracebacks: see assert_no_leaks)."""
    assert result.returncode == 2, describe(result)
    for fragment in fragments:
        assert fragment in result.stderr, f"stderr does not mention {fragment!r}{describe(result)}"


def assert_no_leaks(args: Sequence[str], env: Mapping[str, str], stdout: str, stderr: str) -> None:
    shown = f"$ exchange {' '.join(args)}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}"
    if "Traceback" in stdout + stderr:
        frames = [line for line in stderr.splitlines() if line.startswith('  File "')]
        ours = [line for line in frames if "/exchange/" in line or "/migrations/" in line]
        last = [line for line in stderr.splitlines() if line and not line.startswith((" ", "("))]
        where = "\n".join([*ours[-2:], *frames[-1:], *last[-1:]])
        raise AssertionError(
            f"a traceback was printed by: exchange {' '.join(args)}\n--- stdout ---\n{stdout}"
            f"--- the traceback ends ---\n{where}"
        )
    token = env.get("EXCHANGE_SITE_TOKEN")
    if token:
        assert token not in stdout + stderr, f"the site token was printed\n{shown}"


def assert_clean(result: Result, token: str = TOKEN) -> None:
    """No traceback and no token in what a command printed."""
    assert_no_leaks(result.args[3:], {"EXCHANGE_SITE_TOKEN": token}, result.stdout, result.stderr)


@contextmanager
def _as_a_process(
    environment: Mapping[str, str], cwd: Path, stdin: str = ""
) -> Iterator[tuple[io.StringIO, ...]]:
    """What a fresh ``python -m exchange`` would have, for the length of one command: the
    environment (``os.environ`` changed in place: what reads it later, e.g. rich's COLUMNS,
    sees it), the directory, stdin (``stdin``, not a terminal), stdout and stderr of its own;
    and afterwards what a command changes in the process put back: the log handlers, levels
    and masked secrets (logs.configure), the signal handlers (run), the engines it made
    (disposed, as a process's exit closes its connections)."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr, sys.argv
    root = logging.getLogger()
    saved_root = root.handlers[:], root.level
    # A fresh process has no service log handler: one an earlier test of this process left
    # (logs.configure outside a command) would print this command's log lines on its stderr.
    root.handlers[:] = [
        handler for handler in root.handlers if not isinstance(handler, logs._Handler)
    ]
    saved_levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    saved_installed = logs._installed
    saved_switches = (
        logging.logThreads,
        logging.logProcesses,
        logging.logMultiprocessing,
        logging._srcfile,
    )
    saved_signals = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    engines: list[Any] = []
    make = exchange.db.engine.create_engine

    def recorded(*args: Any, **kwargs: Any) -> Any:
        engines.append(make(*args, **kwargs))
        return engines[-1]

    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(cwd)
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    exchange.db.engine.create_engine = recorded  # type: ignore[assignment]
    try:
        yield out, err
    finally:
        exchange.db.engine.create_engine = make
        for engine in engines:
            engine.dispose()
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        root.handlers[:], _ = saved_root
        root.setLevel(saved_root[1])
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        logs._installed = saved_installed
        (
            logging.logThreads,
            logging.logProcesses,
            logging.logMultiprocessing,
            logging._srcfile,
        ) = saved_switches
        for number, handler in saved_signals.items():
            signal.signal(number, handler)


def run_in_process(
    args: Sequence[str], environment: Mapping[str, str], cwd: Path, stdin: str = ""
) -> Result:
    """``exchange ARGS`` run by ``exchange.cli.main`` in this process; the result a process
    would give: SystemExit's code (a message: printed on stderr, code 1), an escaped
    exception as Python prints it (its traceback on stderr, code 1)."""
    from exchange.cli import common

    # The width a process would print at (its COLUMNS, else rich's 80 for a pipe), whatever an
    # earlier test in this process left in the CLI's consoles (seen once in the full suite:
    # a table narrower than COLUMNS said, its times wrapped across lines).
    columns = environment.get("COLUMNS", "")
    consoles = (common.out, common.err)
    saved = [console._width for console in consoles]
    with _as_a_process(environment, cwd, stdin) as (out, err):
        for console in consoles:
            console.width = int(columns) if columns.isdigit() else 80
        sys.argv = ["exchange", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        for console, width in zip(consoles, saved, strict=True):
            console._width = width
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "exchange", *args], code, out.getvalue(), err.getvalue()
    )


@dataclass
class Cli:
    """Runs ``exchange …`` in ``cwd`` with a controlled environment: in this process, or as
    ``python -m exchange`` when ``process`` (see the module's docstring)."""

    cwd: Path
    process: bool = False

    def environment(
        self,
        db: str | None = None,
        site: str | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> dict[str, str]:
        # The command line speaks the locale's language (contract 15): English unless a test
        # names another, whatever the developer's own locale.
        locale = ("LC_ALL", "LC_MESSAGES", "LANG")
        result = {
            k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_") and k not in locale
        }
        result["LANG"] = "C.UTF-8"
        result["COLUMNS"] = "250"  # rich tables: no truncated message ids
        result["EXCHANGE_SITE_TOKEN"] = TOKEN
        if db is not None:
            result["EXCHANGE_DATABASE_URL"] = db
        if site is not None:
            result["EXCHANGE_SITE_URL"] = site
            result.update(FAST_ENV)
        for name, value in (env or {}).items():
            if value is None:
                result.pop(name, None)
            else:
                result[name] = value
        return result

    def command(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "exchange", *args]

    def __call__(
        self,
        *args: str,
        db: str | None = None,
        site: str | None = None,
        env: Mapping[str, str | None] | None = None,
        timeout: float = 60,
        stdin: str = "",
    ) -> Result:
        """``stdin``: what the command reads on standard input (a pipe, never a terminal)."""
        environment = self.environment(db, site, env)
        if not self.process:
            result = run_in_process(args, environment, self.cwd, stdin)
            assert_no_leaks(args, environment, result.stdout, result.stderr)
            return result
        result = subprocess.run(
            self.command(args),
            env=environment,
            cwd=self.cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout * load_scale(),
        )
        assert_no_leaks(args, environment, result.stdout, result.stderr)
        return result

    def many(
        self,
        invocations: Sequence[Sequence[str]],
        *,
        db: str | None = None,
        site: str | None = None,
        env: Mapping[str, str | None] | None = None,
        envs: Sequence[Mapping[str, str | None]] | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> list[Result]:
        """Independent commands: one after another in this process, or started together as
        processes (each is a second of Python start-up).

        ``envs`` gives each invocation its own variables on top of ``env``; ``check=False``
        leaves the traceback and token checks to the caller (``assert_clean``).
        """
        environments = [
            self.environment(db, site, {**(env or {}), **own})
            for own in (envs or [{}] * len(invocations))
        ]
        if not self.process:
            results = []
            for args, environment in zip(invocations, environments, strict=True):
                result = run_in_process(args, environment, self.cwd)
                if check:
                    assert_no_leaks(args, environment, result.stdout, result.stderr)
                results.append(result)
            return results
        processes = [
            subprocess.Popen(
                self.command(args),
                env=environment,
                cwd=self.cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args, environment in zip(invocations, environments, strict=True)
        ]
        results = []
        for args, environment, process in zip(invocations, environments, processes, strict=True):
            try:
                stdout, stderr = process.communicate(timeout=timeout * load_scale())
            except subprocess.TimeoutExpired:
                for other in processes:
                    other.kill()
                    other.communicate()
                raise
            if check:
                assert_no_leaks(args, environment, stdout, stderr)
            results.append(
                subprocess.CompletedProcess(self.command(args), process.returncode, stdout, stderr)
            )
        return results


def until_stopped(
    cli: Cli,
    *args: str,
    stop_when: Callable[[], bool],
    seconds: float,
    what: str,
    db: str | None = None,
    site: str | None = None,
    env: Mapping[str, str | None] | None = None,
) -> Result:
    """A command that runs until stopped (``run``, ``serve``), in this process: once
    ``stop_when()`` holds, SIGTERM to this process, which the command's own handler takes
    (the operator's ``kill``). Not within ``seconds`` (times the load): stopped all the same,
    and an AssertionError naming ``what``.

    The signal goes only while the command's handler is installed (the one the command's
    event loop puts in place; asyncio's and uvloop's both set a Python-level handler); until
    the command returns, a no-op handler stands behind it, so a late signal never reaches
    pytest's default one, which would end the test process."""
    deadline = time.monotonic() + seconds * load_scale()
    finished = threading.Event()
    late: list[str] = []

    def placeholder(signum: int, frame: object) -> None:
        pass

    def watch() -> None:
        while not finished.wait(0.05):
            handler = signal.getsignal(signal.SIGTERM)
            if handler in (placeholder, signal.SIG_DFL, signal.SIG_IGN, None):
                continue  # the command's handler is not in place yet
            held = stop_when()
            if held or time.monotonic() > deadline:
                if not held:
                    late.append(f"not within {seconds} s: {what}")
                os.kill(os.getpid(), signal.SIGTERM)
                return

    saved = signal.signal(signal.SIGTERM, placeholder)
    watcher = threading.Thread(target=watch, name="until-stopped", daemon=True)
    watcher.start()
    try:
        result = cli(*args, db=db, site=site, env=env)
    finally:
        finished.set()
        watcher.join()
        signal.signal(signal.SIGTERM, saved)
    if late:
        raise AssertionError(late[0] + describe(result))
    return result


def run_json(
    cli: Cli, *args: str, db: str, code: int = 0, env: Mapping[str, str | None] | None = None
) -> Any:
    """A ``--json`` command: exit ``code`` (0 unless told) and exactly one JSON document on
    stdout (``exchange status`` exits 1 when something needs a person); ``env`` as ``Cli``'s."""
    result = cli(*args, db=db, env=env)
    assert result.returncode == code, describe(result)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not one JSON document: {exc}{describe(result)}") from None


# -- the database and the site, seen from the test process ---------------------------------------


def deliver_in_process(
    db_url: str, engine: Engine, site: SiteSimulator, rows: list[dict[str, Any]] | None = None
) -> None:
    """Stage rows and run the pipeline to idle in this process: the set-up of operator tests."""
    if rows:
        stage(engine, rows)
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), engine))


def state_counts(engine: Engine) -> Counter[str]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(messages.c.state, func.count()).group_by(messages.c.state))
        return Counter({state: count for state, count in rows})


def states(engine: Engine) -> dict[str, tuple[str, str | None]]:
    """message_id -> (state, reason) for every message and quarantine record."""
    with transaction(engine, read_only=True) as connection:
        return {
            message_id: (state, reason)
            for message_id, state, reason in connection.execute(
                select(messages.c.message_id, messages.c.state, messages.c.reason)
            )
        }


def untaken_rows(engine: Engine) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(
            connection.execute(
                select(func.count()).select_from(staging).where(staging.c.taken_at.is_(None))
            ).scalar_one()
        )


@dataclass(frozen=True)
class Scenario:
    """After a run: what the operator tests find in the database.

    delivered   SKU-1 v2 (v1 superseded), SKU-2 v1, DOC-2 v1 and v2
    quarantined SKU-REJ v1 (http-422), DOC-1 v1 (http-422),
                a row that is not JSON (invalid-contract), a row of an unknown kind
    new         DOC-1 v2 and v3, held behind the quarantined DOC-1 v1
    """

    sku_rejected: str = message_id("price", "SKU-REJ", 1)
    doc1_v1: str = message_id("financial_posting", "DOC-1", 1)
    doc1_v2: str = message_id("financial_posting", "DOC-1", 2)
    doc1_v3: str = message_id("financial_posting", "DOC-1", 3)
    sku2: str = message_id("price", "SKU-2", 1)
