"""The shop simulators start on their own (issue 24 item 14): ``python -m exchange.dev.woosim
--port N`` (and bitrixsim, sitesim) listens in the foreground and prints the ``EXCHANGE_*``
settings that point the service at it; ``exchange check`` with exactly those settings passes
against the running process; a credential the person gave is never printed."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exchange.dev.dbkit import sqlite_copy

COMMAND = [sys.executable, "-m", "exchange"]


def start(module: str, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", f"exchange.dev.{module}", "--port", "0", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline() if process.stdout else ""
        if not line:
            break
        lines.append(line)
        if "Ctrl-C" in line:
            return process, lines
    process.kill()
    raise AssertionError("".join(lines) + (process.stderr.read() if process.stderr else ""))


def settings(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lines:
        if line.startswith("  EXCHANGE_"):
            name, value = shlex.split(line.strip())[0].split("=", 1)
            found[name] = value
    return found


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert 0 == process.returncode
    return out


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env["EXCHANGE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.db'}"
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    return env


@pytest.mark.parametrize(
    ("module", "target", "checked"),
    [
        ("woosim", "woocommerce", "WooCommerce key may write"),
        ("bitrixsim", "bitrix", "1C-Bitrix exchange: checkauth and init"),
        ("sitesim", "api", "site reachable and token accepted"),
    ],
)
def test_exchange_check_passes_against_a_simulator_started_as_a_process(
    tmp_path: Path, module: str, target: str, checked: str
) -> None:
    env = clean_env(tmp_path)
    process, lines = start(module, env)
    try:
        printed = settings(lines)
        assert target == printed["EXCHANGE_TARGET"], lines
        result = subprocess.run(
            [*COMMAND, "check"], env={**env, **printed}, capture_output=True, text=True
        )
    finally:
        stop(process)
    assert 0 == result.returncode, result.stdout + result.stderr
    target_lines = [line for line in result.stdout.splitlines() if checked in line]
    assert target_lines and all(line.startswith("OK") for line in target_lines), result.stdout


def test_a_credential_from_the_environment_is_used_and_never_printed(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    secret = "cs_given_by_the_owner_7f3a"
    env.update({"EXCHANGE_WOO_KEY": "ck_given_key_1", "EXCHANGE_WOO_SECRET": secret})
    process, lines = start("woosim", env)
    try:
        printed = settings(lines)
        assert "EXCHANGE_WOO_SECRET" not in printed
        assert any("EXCHANGE_WOO_SECRET: the value you gave (not shown)" in x for x in lines)
        result = subprocess.run(
            [*COMMAND, "check"], env={**env, **printed}, capture_output=True, text=True
        )
    finally:
        out = stop(process)
    assert secret not in "".join(lines) + out
    assert 0 == result.returncode, result.stdout
