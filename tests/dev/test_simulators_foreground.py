"""The shop simulators start on their own (issue 24 item 14): ``python -m exchange.dev.woosim
--port N`` (and bitrixsim, sitesim) listens in the foreground and prints the ``EXCHANGE_*``
settings that point the service at it; ``exchange check`` with exactly those settings passes
against the running process; a credential the person gave is never printed.

The marketplace simulators (ozonsim, wbsim, ymsim; contract 14, issue 32 item 4) start the same
way and print ``EXCHANGE_CHANNELS`` with their channel: a request made with exactly those
settings is answered, and SIGTERM or SIGINT stops the process cleanly. (No ``exchange check``
against them yet: the service has no marketplace targets.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from foreground import channels, settings, start, stop

from exchange.dev.dbkit import sqlite_copy

COMMAND = [sys.executable, "-m", "exchange"]


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


# -- the marketplace simulators --------------------------------------------------------------------


def ozon_request(channel: dict[str, Any]) -> httpx.Response:
    """Ozon's key roles (research §1.2), with the Client-Id and the key file it printed."""
    from exchange.dev.ozonsim import IMPORT_PRICES, ROLES

    key = Path(channel["ozon_api_key_file"]).read_text(encoding="utf-8").strip()
    headers = {"Client-Id": channel["ozon_client_id"], "Api-Key": key}
    answer = httpx.post(channel["ozon_api_url"] + ROLES, headers=headers, timeout=10)
    assert IMPORT_PRICES in answer.json()["roles"][0]["methods"], answer.text
    return answer


def wb_request(channel: dict[str, Any]) -> httpx.Response:
    """Wildberries' catalogue (research §2.1), with the token file it printed."""
    token = Path(channel["wb_token_file"]).read_text(encoding="utf-8").strip()
    answer = httpx.get(
        channel["wb_api_url"] + "/api/v2/list/goods/filter",
        params={"limit": 1},
        headers={"Authorization": token},
        timeout=10,
    )
    assert ["SKU-0001"] == [g["vendorCode"] for g in answer.json()["data"]["listGoods"]]
    return answer


def ym_request(channel: dict[str, Any]) -> httpx.Response:
    """Yandex Market's price read-back (research §3.4), with the key file it printed."""
    key = Path(channel["ym_api_key_file"]).read_text(encoding="utf-8").strip()
    answer = httpx.post(
        f"{channel['ym_api_url']}/v2/businesses/{channel['ym_business_id']}/offer-prices",
        json={"offerIds": ["SKU-1"]},
        headers={"Api-Key": key},
        timeout=10,
    )
    assert "OK" == answer.json()["status"], answer.text
    return answer


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    ("module", "target", "request_", "own_key_file"),
    [
        ("ozonsim", "ozon", ozon_request, "ozon_api_key_file"),
        ("wbsim", "wildberries", wb_request, "wb_token_file"),
        ("ymsim", "yandex-market", ym_request, "ym_api_key_file"),
    ],
)
def test_a_marketplace_simulator_started_as_a_process_answers_the_settings_it_prints(
    tmp_path: Path,
    module: str,
    target: str,
    request_: Callable[[dict[str, Any]], httpx.Response],
    own_key_file: str | None,
    signum: int,
) -> None:
    """Started with no credentials given, it makes its own; the channel it prints is enough to
    be answered; the signal stops it with exit 0 (and the key file it made for itself gone)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    process, lines = start(module, env)
    try:
        [channel] = channels(lines).values()
        assert target == channel["target"], lines
        answer = request_(channel)
    finally:
        out = stop(process, signum)
    assert 200 == answer.status_code, answer.text
    assert "simulator stopped" in out
    if own_key_file is not None:
        assert not Path(channel[own_key_file]).exists()
    switches = "  # clock x" if module == "ozonsim" else "  # switches in force: "
    assert any(line.startswith(switches) for line in lines), lines  # one line, at the start


def run_briefly(module: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The simulator started with ``extra`` and let end on its own (it should not start)."""
    return subprocess.run(
        [sys.executable, "-m", f"exchange.dev.{module}", *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )


SIMULATORS = ["sitesim", "woosim", "bitrixsim", "ozonsim", "wbsim", "ymsim"]


@pytest.mark.parametrize("module", SIMULATORS)
def test_a_simulator_on_a_port_in_use_says_one_line_and_exits_2(module: str) -> None:
    """exchange/dev/httpsim.py ``listening``: one line naming the address, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_briefly(module, "--port", str(port))
    assert 2 == done.returncode
    [line] = done.stderr.splitlines()
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line, line


@pytest.mark.parametrize("module", ["ozonsim", "wbsim", "ymsim"])
@pytest.mark.parametrize("scale", ["-1", "0", "fast"])
def test_a_marketplace_simulator_refuses_a_time_scale_not_above_0_in_one_line(
    module: str, scale: str
) -> None:
    """contract 14's ``--time-scale``: negative makes no clock; 0 is a still clock, which only
    a test moves (SimClock.advance): on its own nothing would, so it is refused too."""
    done = run_briefly(module, "--port", "0", "--time-scale", scale)
    assert 2 == done.returncode
    [line] = done.stderr.splitlines()
    assert "error: argument --time-scale: " in line, line


@pytest.mark.parametrize("module", SIMULATORS)
def test_a_bad_argument_is_one_line_exit_2(module: str) -> None:
    done = run_briefly(module, "--port", "not-a-port")
    assert 2 == done.returncode
    [line] = done.stderr.splitlines()
    assert "error: argument --port" in line, line


KEY_FLAGS = [("ozonsim", "--key-file"), ("wbsim", "--token-file"), ("ymsim", "--api-key-file")]


@pytest.mark.parametrize(("module", "flag"), KEY_FLAGS)
def test_a_key_file_that_cannot_be_made_is_one_line_exit_2(
    tmp_path: Path, module: str, flag: str
) -> None:
    """Bad input is one clear line and exit 2, never a traceback (a directory that does not
    exist: the file can be neither read nor written)."""
    missing = tmp_path / "no-such-dir" / "key"
    done = run_briefly(module, "--port", "0", flag, str(missing))
    assert 2 == done.returncode, done.stderr
    [line] = done.stderr.splitlines()
    assert str(missing) in line and "No such file or directory" in line, line


@pytest.mark.parametrize(("module", "flag"), KEY_FLAGS)
def test_a_key_file_that_does_not_exist_yet_is_written_and_named_in_the_channel(
    tmp_path: Path, module: str, flag: str
) -> None:
    """The three alike (ozonsim's way): a key file named but missing is written with the
    simulator's credential and the channel it prints names it; it stays (the person's)."""
    path = tmp_path / "key"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.pop("OZONSIM_API_KEY_FILE", None)
    process, lines = start(module, env, flag, str(path))
    try:
        [channel] = channels(lines).values()
    finally:
        stop(process, signal.SIGTERM)
    named = {k: v for k, v in channel.items() if k.endswith("_file")}
    assert [path.resolve()] == [Path(v).resolve() for v in named.values()], channel
    assert path.read_text(encoding="utf-8").strip()
