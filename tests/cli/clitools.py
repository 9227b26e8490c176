"""Helpers for the command-line tests: ``exchange`` as a real subprocess, as an operator runs it.

Every call gets a controlled environment: the caller's ``EXCHANGE_*`` variables are dropped,
then only what the test names is set. Whatever a command prints, two things never appear in it
(contract 6 and 7): a Python traceback, and the value of ``EXCHANGE_SITE_TOKEN``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import messages, staging
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, run_worker, stage
from exchange.domain.identity import message_id

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


@dataclass
class Cli:
    """Runs ``python -m exchange …`` in ``cwd`` with a controlled environment."""

    cwd: Path

    def environment(
        self,
        db: str | None = None,
        site: str | None = None,
        env: Mapping[str, str | None] | None = None,
    ) -> dict[str, str]:
        result = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
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
    ) -> Result:
        environment = self.environment(db, site, env)
        result = subprocess.run(
            self.command(args),
            env=environment,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
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
        """Independent commands, started together (each is a second of Python start-up).

        ``envs`` gives each invocation its own variables on top of ``env``; ``check=False``
        leaves the traceback and token checks to the caller (``assert_clean``).
        """
        environments = [
            self.environment(db, site, {**(env or {}), **own})
            for own in (envs or [{}] * len(invocations))
        ]
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
                stdout, stderr = process.communicate(timeout=timeout)
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


def run_json(cli: Cli, *args: str, db: str, code: int = 0) -> Any:
    """A ``--json`` command: exit ``code`` (0 unless told) and exactly one JSON document on
    stdout (``exchange status`` exits 1 when something needs a person)."""
    result = cli(*args, db=db)
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


def wait_for(condition: Callable[[], bool], *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


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
