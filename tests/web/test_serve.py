"""``exchange serve`` itself (contract 9): the TLS rule, closed ways in, secrets from files and
masked, the command run as a process and stopped by SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from web_helpers import PASSWORD, TOKEN, USER, running, web_settings

from exchange import app as bootstrap
from exchange.config_doc import effective_text
from exchange.db.engine import make_engine
from exchange.dev.dbkit import sqlite_copy
from exchange.errors import ConfigurationError

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def test_plain_http_off_loopback_is_refused_naming_the_way_out(db_url: str, tmp_path: Path) -> None:
    settings = web_settings(db_url, tmp_path, http_host="0.0.0.0")
    with pytest.raises(ConfigurationError) as caught:
        bootstrap.http_server(settings, make_engine(db_url))
    assert "EXCHANGE_HTTP_TLS_CERT" in str(caught.value)
    assert "EXCHANGE_HTTP_BEHIND_PROXY" in str(caught.value)


def test_a_certificate_without_its_key_is_refused(db_url: str, tmp_path: Path) -> None:
    settings = web_settings(db_url, tmp_path, http_tls_cert=str(tmp_path / "c.pem"))
    with pytest.raises(ConfigurationError, match="set together"):
        bootstrap.http_server(settings, make_engine(db_url))


def test_behind_a_proxy_plain_http_is_allowed_on_any_address(db_url: str, tmp_path: Path) -> None:
    settings = web_settings(db_url, tmp_path, http_host="0.0.0.0", http_behind_proxy=True)
    with running(settings) as base:
        port = base.rsplit(":", 1)[1]
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").text == "ok\n"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_with_a_certificate_serve_speaks_https(db_url: str, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    settings = web_settings(
        db_url, tmp_path, http_host="0.0.0.0", http_tls_cert=str(cert), http_tls_key=str(key)
    )
    with running(settings) as base:
        port = base.rsplit(":", 1)[1]
        response = httpx.get(
            f"https://127.0.0.1:{port}/1c_exchange.php?type=catalog&mode=checkauth",
            auth=(USER, PASSWORD),
            verify=False,  # self-signed: the test checks TLS is spoken, not the chain
        )
        assert response.text.startswith("success\n")


def test_secrets_come_from_their_files_and_are_masked(db_url: str, tmp_path: Path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text("from-a-file-77\n")
    settings = web_settings(
        db_url,
        tmp_path,
        **{"1c_password": "not-this", "1c_password_file": str(password_file)},
        http_secret_key="cookie-key-secret-99",
    )
    shown = effective_text(settings)
    for secret in ("not-this", "from-a-file-77", TOKEN, "cookie-key-secret-99"):
        assert secret not in shown
    assert "EXCHANGE_1C_PASSWORD" in shown and "EXCHANGE_INTAKE_TOKEN" in shown
    assert "not-this" not in repr(bootstrap.web_config(settings))
    with running(settings) as base:
        url = f"{base}/1c_exchange.php?type=catalog&mode=checkauth"
        assert httpx.get(url, auth=(USER, "from-a-file-77")).text.startswith("success")
        assert httpx.get(url, auth=(USER, "not-this")).text.startswith("failure")


def test_an_unreadable_secret_file_stops_serve_with_one_line(db_url: str, tmp_path: Path) -> None:
    settings = web_settings(db_url, tmp_path, intake_token_file=str(tmp_path / "missing"))
    with pytest.raises(ConfigurationError, match="EXCHANGE_INTAKE_TOKEN_FILE cannot be read"):
        bootstrap.http_server(settings, make_engine(db_url))


def test_the_serve_command_runs_until_sigterm_and_never_logs_a_secret(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": db,
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_1C_USER": USER,
        "EXCHANGE_1C_PASSWORD": PASSWORD,
        "EXCHANGE_1C_DIR": str(tmp_path / "1c"),
        "EXCHANGE_LOG_LEVEL": "INFO",
    }
    command = [sys.executable, "-m", "exchange"]
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    process = subprocess.Popen(
        [*command, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        port = None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline() if process.stderr else ""
            lines.append(line)
            if "serving on" in line:
                port = int(line.rsplit(":", 1)[1].split()[0])
        assert port is not None, "".join(lines)
        # The warning follows "serving on" at once: read it here, through the same buffered
        # reader (communicate() reads the pipe beneath it and never sees what it buffered).
        while not any("EXCHANGE_PUBLIC_URL" in s for s in lines) and time.monotonic() < deadline:
            lines.append(process.stderr.readline() if process.stderr else "")
        url = f"http://127.0.0.1:{port}/1c_exchange.php?type=catalog&mode=checkauth"
        assert httpx.get(url, auth=(USER, PASSWORD)).text.startswith("success")
        assert httpx.get(url, auth=(USER, "wrong")).text.startswith("failure")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert 0 == process.returncode
    assert PASSWORD not in "".join(lines) + out + err
    assert "intake closed" in "".join(lines) + err
    # Where to go next, on stdout for the person who started it (issue 24 item 13).
    assert f"workbench:    http://127.0.0.1:{port}/\n" in out, out
    assert f"1C exchange:  http://127.0.0.1:{port}/1c_exchange.php\n" in out, out
    # Contract 15: no address for a way in that is closed (the intake has no token here), and
    # without EXCHANGE_PUBLIC_URL a warning that 1C needs the public address, not this one.
    assert "JSON intake" not in out, out
    assert "EXCHANGE_PUBLIC_URL is not set" in "".join(lines) + err


def test_serve_prints_the_workbench_address_that_answers_with_its_sign_in_page(
    tmp_path: Path,
) -> None:
    """Read from stdout while serve runs (not after it stopped): the printed address opens
    the workbench's sign-in page."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_HTTP_PORT": "0",
    }
    command = [sys.executable, "-m", "exchange"]
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    process = subprocess.Popen(
        [*command, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        address = None
        deadline = time.monotonic() + 30
        while address is None and time.monotonic() < deadline:
            line = process.stdout.readline() if process.stdout else ""
            if line.startswith("workbench:"):
                address = line.split()[1]
        assert address is not None
        page = httpx.get(address, follow_redirects=True)
        assert 200 == page.status_code
        assert "Войти</button>" in page.text, page.text[:300]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


@pytest.mark.parametrize("variable", ["EXCHANGE_PUBLIC_URL", "EXCHANGE_WORKBENCH_URL"])
def test_serve_prints_1cs_address_from_the_public_url_and_no_warning(
    tmp_path: Path, variable: str
) -> None:
    """Contract 15: with EXCHANGE_PUBLIC_URL (or its old name) serve prints the address 1C
    must use, path included, never its loopback listen address; the closed intake gets none."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_HTTP_PORT": "0",
        "EXCHANGE_1C_USER": USER,
        "EXCHANGE_1C_PASSWORD": PASSWORD,
        "EXCHANGE_1C_DIR": str(tmp_path / "1c"),
        variable: "https://exchange.shop.ru:8443/prices/",
    }
    command = [sys.executable, "-m", "exchange"]
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    process = subprocess.Popen(
        [*command, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        shown: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(s.startswith("1C") for s in shown):
            line = process.stdout.readline() if process.stdout else ""
            shown.append(line)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    # Through the same buffered readers (communicate() would miss what readline buffered).
    out = process.stdout.read() if process.stdout else ""
    err = process.stderr.read() if process.stderr else ""
    printed = "".join(shown) + out
    assert "workbench:    https://exchange.shop.ru:8443/prices/\n" in printed, printed
    assert "1C exchange:  https://exchange.shop.ru:8443/prices/1c_exchange.php\n" in printed
    assert "JSON intake" not in printed and "127.0.0.1" not in printed
    assert "EXCHANGE_PUBLIC_URL is not set" not in err


@pytest.mark.parametrize(
    ("host", "public", "expected"),
    [
        ("127.0.0.1", None, "http://127.0.0.1:8080/"),
        ("::1", None, "http://[::1]:8080/"),
        ("exchange.local", None, "http://exchange.local:8080/"),
        ("0.0.0.0", "https://exchange.shop.ru/", "https://exchange.shop.ru/"),
    ],
)
def test_the_printed_addresses_follow_the_host_and_the_public_url(
    host: str, public: str | None, expected: str
) -> None:
    from exchange.web.server import addresses

    where = dict(
        addresses(scheme="http", host=host, port=8080, public=public, onec=True, intake=True)
    )
    assert expected == where["workbench"]
    assert where["1C exchange"] == expected + "1c_exchange.php"
    assert where["JSON intake"] == expected + "api/v1/intents"


def test_the_public_url_gives_1c_its_scheme_host_port_and_path() -> None:
    """Contract 15: EXCHANGE_PUBLIC_URL is the whole address 1C uses, a proxy's path too."""
    from exchange.web.server import addresses, public_url_missing

    public = "https://exchange.shop.ru:8443/prices"
    where = dict(
        addresses(scheme="http", host="0.0.0.0", port=8080, public=public, onec=True, intake=False)
    )
    assert {
        "workbench": "https://exchange.shop.ru:8443/prices/",
        "1C exchange": "https://exchange.shop.ru:8443/prices/1c_exchange.php",
    } == where
    assert public_url_missing(public=public, onec=True, intake=False) is None


@pytest.mark.parametrize(
    ("onec", "intake", "shown"),
    [
        (False, False, ["workbench"]),
        (True, False, ["workbench", "1C exchange"]),
        (False, True, ["workbench", "JSON intake"]),
        (True, True, ["workbench", "1C exchange", "JSON intake"]),
    ],
)
def test_only_the_ways_in_that_are_open_get_an_address(
    onec: bool, intake: bool, shown: list[str]
) -> None:
    from exchange.web.server import addresses, public_url_missing

    where = addresses(
        scheme="http", host="127.0.0.1", port=8080, public=None, onec=onec, intake=intake
    )
    assert shown == [what for what, _ in where]
    # The warning speaks of 1C: given when a way in for 1C is open and no public address is set.
    warned = public_url_missing(public=None, onec=onec, intake=intake)
    assert (onec or intake) == (warned is not None)
    assert warned is None or "EXCHANGE_PUBLIC_URL" in warned


def test_a_wildcard_host_is_shown_by_the_machines_name() -> None:
    import socket

    from exchange.web.server import addresses

    where = dict(
        addresses(scheme="https", host="0.0.0.0", port=443, public=None, onec=False, intake=False)
    )
    assert f"https://{socket.getfqdn()}:443/" == where["workbench"]


def test_the_serve_command_refuses_plain_http_off_loopback_with_exit_2(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_HTTP_HOST": "0.0.0.0",
    }
    command = [sys.executable, "-m", "exchange"]
    sqlite_copy(tmp_path / "x.db")  # migrated (a copy: `exchange migrate` has tests of its own)
    result = subprocess.run([*command, "serve"], env=env, capture_output=True, text=True)
    assert 2 == result.returncode
    assert result.stderr.count("\n") == 1 and "not loopback" in result.stderr
