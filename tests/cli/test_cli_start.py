"""Starting ``exchange`` costs only what the command needs: no password hash and no spreadsheet
library for a command that signs no one in and writes no workbook (each CLI process paid
200-390 ms for the hash alone)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine

from exchange.ops import operators
from exchange.web.config import WebConfig
from exchange.web.workbench import Workbench
from tests.support.clitools import Cli, describe

PROBE = """
import sys
import argon2
made = []
hash_ = argon2.PasswordHasher.hash
argon2.PasswordHasher.hash = lambda self, *a, **k: made.append(1) or hash_(self, *a, **k)
import exchange.cli
print(len(made), "openpyxl" in sys.modules)
"""


@pytest.mark.subprocess
def test_importing_the_cli_hashes_no_password_and_imports_no_openpyxl() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert "0 False" == done.stdout.strip(), done.stderr


# Runs one command in this process, then names the heavy libraries it imported.
HEAVY_PROBE = """
import sys
from exchange.cli import main
sys.argv = ["exchange", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = ("aiohttp", "alembic", "httpx", "jinja2", "prometheus_client", "exchange.web")
print("imported:", sorted(name for name in heavy if name in sys.modules))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("command", [["--help"], ["config"], ["status"], ["quarantine", "list"]])
def test_a_command_that_serves_nothing_imports_neither_the_web_nor_alembic(
    db_url: str, command: list[str], tmp_path: Path
) -> None:
    """An operator's every command paid ~2 s of CPU for aiohttp, the web, the shop clients and
    Alembic before it did anything: only ``serve``, ``run`` and ``migrate`` need them."""
    env = {**os.environ, "EXCHANGE_DATABASE_URL": db_url, "EXCHANGE_LANG": "en"}
    done = subprocess.run(
        [sys.executable, "-c", HEAVY_PROBE, *command],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    assert "imported: []" == done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_workbench_makes_the_unknown_name_hash_before_the_first_sign_in(
    engine: Engine, tmp_path: Path
) -> None:
    operators._dummy.cache_clear()

    Workbench(WebConfig(kinds={}, exchange_dir=tmp_path), engine, "k" * 32)

    assert 1 == operators._dummy.cache_info().currsize


@pytest.mark.parametrize(
    ("lang", "said"),
    [("C.UTF-8", "Address already in use"), ("ru_RU.UTF-8", "адрес уже занят")],
)
def test_serve_on_a_port_already_taken_says_so_in_one_line_and_exits_2(
    cli: Cli, db_url: str, lang: str, said: str
) -> None:
    """A second `serve`, or another program, on the port: the person who starts it reads which
    address and which settings, never a traceback (found by a helper's walk-through)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli(
            "serve",
            db=db_url,
            env={"EXCHANGE_HTTP_HOST": "127.0.0.1", "EXCHANGE_HTTP_PORT": str(port), "LANG": lang},
        )
    assert 2 == result.returncode, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    last = result.stderr.splitlines()[-1]
    assert f"127.0.0.1:{port} (EXCHANGE_HTTP_HOST, EXCHANGE_HTTP_PORT)" in last, describe(result)
    assert said in last, describe(result)
