"""``exchange check`` and ``exchange config`` as an operator runs them: a controlled
environment, exit codes, and never a traceback or the token in what they print. The commands
run in the test's process (clitools.run_in_process); a configuration that does not load is
shown by the real binary (``python -m exchange``), exit code and stdout as a process gives them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from checktools import TOKEN
from clitools import run_in_process

from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import load_scale

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def exchange(
    cwd: Path, *args: str, process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    environment.update(env)
    if not process:
        result = run_in_process(args, environment, cwd)
    else:
        result = subprocess.run(
            [sys.executable, "-m", "exchange", *args],
            env=environment,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60 * load_scale(),
        )
    printed = result.stdout + result.stderr
    assert "Traceback" not in printed, printed
    assert TOKEN not in printed, f"the site token was printed:\n{printed}"
    return result


def test_check_on_a_ready_installation_exits_0(
    db_url: str, site: SiteSimulator, tmp_path: Path
) -> None:
    result = exchange(
        tmp_path,
        "check",
        EXCHANGE_DATABASE_URL=db_url,
        EXCHANGE_SITE_URL=site.url,
        EXCHANGE_SITE_TOKEN=TOKEN,
        EXCHANGE_REPORT_DIR=str(tmp_path / "reports"),
    )
    assert 0 == result.returncode, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert 6 == len(lines), result.stdout
    assert all(line.startswith("OK   ") for line in lines), result.stdout


def test_check_with_a_refused_token_exits_1_and_names_the_reason(
    db_url: str, site: SiteSimulator, tmp_path: Path
) -> None:
    site.faults = Faults(auth_status=401)
    result = exchange(
        tmp_path,
        "check",
        EXCHANGE_DATABASE_URL=db_url,
        EXCHANGE_SITE_URL=site.url,
        EXCHANGE_SITE_TOKEN=TOKEN,
    )
    assert 1 == result.returncode, result.stdout + result.stderr
    assert "FAIL site reachable and token accepted" in result.stdout
    assert "token refused (HTTP 401)" in result.stdout
    assert "SKIP report directory writable" in result.stdout


def test_check_with_a_configuration_that_does_not_load_exits_2(tmp_path: Path) -> None:
    result = exchange(
        tmp_path,
        "check",
        process=True,
        EXCHANGE_KINDS='{"financial_refund": "latest-wins"}',
        EXCHANGE_SITE_TOKEN=TOKEN,
    )
    assert 2 == result.returncode, result.stdout + result.stderr
    assert result.stdout.startswith("FAIL configuration valid: invalid configuration:")
    assert "financial_refund" in result.stdout
    assert 1 == len(result.stdout.splitlines())


def test_config_shows_the_values_in_force_with_secrets_masked(tmp_path: Path) -> None:
    result = exchange(
        tmp_path,
        "config",
        EXCHANGE_DATABASE_URL="postgresql+psycopg://exchange:db-pw-77@db.example/exchange",
        EXCHANGE_SITE_URL="https://shop.example.com",
        EXCHANGE_SITE_TOKEN=TOKEN,
        EXCHANGE_BATCH_SIZE="250",
    )
    assert 0 == result.returncode, result.stderr
    shown = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert "postgresql+psycopg://exchange:***@db.example/exchange" == shown["EXCHANGE_DATABASE_URL"]
    assert "***" == shown["EXCHANGE_SITE_TOKEN"]
    assert "250" == shown["EXCHANGE_BATCH_SIZE"]
    assert "db-pw-77" not in result.stdout


def test_the_committed_configuration_reference_is_what_the_command_prints(
    tmp_path: Path,
) -> None:
    # Some EXCHANGE_* set on purpose: the reference describes the model, not this environment.
    result = exchange(
        tmp_path, "config", "--markdown", EXCHANGE_BATCH_SIZE="7", EXCHANGE_SITE_TOKEN=TOKEN
    )
    assert 0 == result.returncode, result.stderr
    assert DOCS.read_text(encoding="utf-8") == result.stdout, (
        "docs/configuration.md is out of date: run "
        "`exchange config --markdown > docs/configuration.md`"
    )
