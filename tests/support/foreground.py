"""A simulator started on its own, as a person starts it (``python -m exchange.dev.<module>
--port 0``; exchange/dev/httpsim.py ``run_in_foreground``), written once for the tests that
start one: started and read until it says how to stop it, its printed ``EXCHANGE_*`` settings
parsed, stopped by a signal with exit 0.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from typing import Any


def start(
    module: str, env: dict[str, str] | None = None, *extra: str
) -> tuple[subprocess.Popen[str], list[str]]:
    """The process and the lines it printed up to "(Ctrl-C to stop)"; a process that ends or
    stays silent for 30 s before that is killed and fails the test with what it printed."""
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
    """The ``EXCHANGE_*`` settings printed (indented, as a shell takes them), by name."""
    found: dict[str, str] = {}
    for line in lines:
        if line.startswith("  EXCHANGE_"):
            name, value = shlex.split(line.strip())[0].split("=", 1)
            found[name] = value
    return found


def channels(lines: list[str]) -> dict[str, Any]:
    """The channels of the printed ``EXCHANGE_CHANNELS`` (contract 13), by name."""
    found: dict[str, Any] = json.loads(settings(lines)["EXCHANGE_CHANNELS"])
    return found


def stop(process: subprocess.Popen[str], signum: int = signal.SIGTERM) -> str:
    """Stop it with ``signum`` (as Ctrl-C, docker stop or systemd would); it exits 0. Its
    stdout after the start."""
    process.send_signal(signum)
    out, _ = process.communicate(timeout=30)
    assert 0 == process.returncode, out
    return out
