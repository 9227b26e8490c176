"""TLS to the site, and the token's way from its file to the Authorization header and nowhere
else (logs, history).

The HTTPS site is the project's simulator wrapped in TLS, with a CA and certificates made at
test time (conftest.py). Commands and their printed output are in test_secrets_in_commands.py.
"""

from __future__ import annotations

import asyncio
import io
import logging
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from securitytools import Pki
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange import logs
from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import history
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    drain,
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.errors import ConfigurationError
from exchange.ops.check import Status, check_site
from exchange.settings import Settings, load_settings
from exchange.targets.shop_api.client import TLS_ERROR
from exchange.worker import Worker

SECRET = "tok-7Hq2-Zx91-never-shown"


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'security.db'}"
    engine = make_engine(url)
    upgrade(engine)
    yield url, engine
    engine.dispose()


def run(worker: Worker, cycles: int | None = None) -> None:
    async def go() -> None:
        try:
            if cycles is None:
                await drain(worker)
            else:
                for _ in range(cycles):
                    await worker.cycle()
        finally:
            await worker.target.aclose()

    asyncio.run(go())


def rows(engine: Engine, table: Any) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [dict(r) for r in connection.execute(select(table)).mappings()]


# -- TLS -------------------------------------------------------------------------------------


def test_a_certificate_from_an_unknown_ca_is_refused_as_a_tls_connection_error_and_nothing_is_sent(
    sqlite_engine: tuple[str, Engine], tls_site: SiteSimulator
) -> None:
    url, engine = sqlite_engine
    stage(engine, [price_row("SKU-1", 1)])
    run(bootstrap.worker(fast_settings(url, tls_site.url, max_attempts=50), engine), cycles=1)
    [message] = rows(engine, one_channel_messages())
    failures = [e for e in rows(engine, history) if e["error_class"] is not None]
    # A configuration verdict (contract 10): delivery pauses, nothing is charged, and it goes
    # once the site is trusted (the health check fails the same way until then).
    assert ("new", 0) == (message["state"], message["attempts"])
    assert failures, "no failed attempt was recorded"
    assert {TLS_ERROR} == {e["error_class"] for e in failures}
    assert all("CERTIFICATE_VERIFY_FAILED" in e["detail"] for e in failures)
    assert not any(e["detail"].startswith("result-unknown") for e in failures)
    assert (0, []) == (tls_site.request_count, tls_site.effects())


def test_with_the_ca_bundle_the_certificate_is_verified_and_the_messages_are_delivered(
    sqlite_engine: tuple[str, Engine], tls_site: SiteSimulator, pki: Pki
) -> None:
    url, engine = sqlite_engine
    stage(engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])
    assert tls_site.url.startswith("https://127.0.0.1:")
    settings = fast_settings(url, tls_site.url, site_ca_bundle=pki.ca)
    run(bootstrap.worker(settings, engine))
    assert {"delivered"} == {m["state"] for m in rows(engine, one_channel_messages())}
    assert 2 == len(tls_site.effects())


def test_a_certificate_for_another_host_name_is_refused_even_from_the_trusted_ca(
    sqlite_engine: tuple[str, Engine], wrong_name_site: SiteSimulator, pki: Pki
) -> None:
    url, engine = sqlite_engine
    stage(engine, [price_row("SKU-1", 1)])
    settings = fast_settings(url, wrong_name_site.url, site_ca_bundle=pki.ca, max_attempts=50)
    run(bootstrap.worker(settings, engine), cycles=1)
    failures = [e for e in rows(engine, history) if e["error_class"] is not None]
    assert failures and {TLS_ERROR} == {e["error_class"] for e in failures}
    assert any("IP address mismatch" in e["detail"] for e in failures), failures
    assert [] == wrong_name_site.effects()


def test_check_names_an_untrusted_certificate_and_the_setting_that_trusts_its_ca(
    tls_site: SiteSimulator, pki: Pki
) -> None:
    untrusted = check_site(fast_settings("sqlite:///unused.db", tls_site.url))
    assert Status.FAIL == untrusted.status
    assert "TLS" in untrusted.line() and "EXCHANGE_SITE_CA_BUNDLE" in untrusted.line()
    assert 1 == len(untrusted.line().splitlines())
    trusted = check_site(fast_settings("sqlite:///unused.db", tls_site.url, site_ca_bundle=pki.ca))
    assert Status.OK == trusted.status, trusted.line()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "not found"),
        ("not a certificate\n", "cannot be used"),
        ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "cannot be used"),
    ],
    ids=["missing", "not-pem", "broken-pem"],
)
def test_an_unusable_ca_bundle_is_refused_at_start_with_one_line_naming_the_setting(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_text(content, encoding="ascii")
    with pytest.raises(ConfigurationError) as refused:
        load_settings(site_url="https://shop.example.com", site_ca_bundle=bundle)
    assert "EXCHANGE_SITE_CA_BUNDLE" in str(refused.value)
    assert expected in str(refused.value)
    assert 1 == len(str(refused.value).splitlines())


def test_run_with_a_missing_ca_bundle_exits_2_with_one_error_line(tmp_path: Path) -> None:
    environment = {
        "PATH": "/usr/bin:/bin",
        "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}",
        "EXCHANGE_SITE_URL": "https://shop.example.com",
        "EXCHANGE_SITE_TOKEN": SECRET,
        "EXCHANGE_SITE_CA_BUNDLE": str(tmp_path / "missing-ca.pem"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "exchange", "run", "--once"],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 2 == done.returncode, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "EXCHANGE_SITE_CA_BUNDLE" in line, line
    assert "missing-ca.pem" in line
    assert SECRET not in done.stdout + done.stderr


def test_no_setting_turns_certificate_verification_off(tmp_path: Path) -> None:
    # Documented in docs/configuration.md: the CA bundle replaces the trusted CAs, nothing
    # disables the check. A would-be switch is refused loudly rather than silently ignored.
    switches = [n for n in Settings.model_fields if "verify" in n or "insecure" in n]
    assert [] == switches
    with pytest.raises(ConfigurationError, match="EXCHANGE_SITE_VERIFY"):
        load_settings(site_verify=False)
    toml = tmp_path / "exchange.toml"
    toml.write_text("site_verify = false\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="EXCHANGE_SITE_VERIFY"):
        load_settings(toml)


# -- the token: from its file to the header, and nowhere else -----------------------------------


@pytest.fixture
def captured_log(restore_logging: None) -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    names = ("httpx", "httpcore", "apscheduler", "alembic")
    saved = (root.level, list(root.handlers), {n: logging.getLogger(n).level for n in names})
    yield
    level, handlers, levels = saved
    root.setLevel(level)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


def test_the_token_file_is_read_and_its_token_never_reaches_the_log_or_the_history(
    sqlite_engine: tuple[str, Engine], tmp_path: Path, captured_log: io.StringIO
) -> None:
    url, engine = sqlite_engine
    token_file = tmp_path / "site_token"
    token_file.write_text(f"{SECRET}\n", encoding="utf-8")
    stage(engine, [price_row("SKU-1", 1), price_row("SKU-P", 1), price_row("SKU-R", 1)])
    with SiteSimulator(token=SECRET, faults=Faults(seed=1, auth_status=401)) as site:
        site.faults.poison, site.faults.reject = {"SKU-P"}, {"SKU-R"}
        for log_format in ("json", "text"):
            # site_token is set too (fast_settings): the file must win over it
            settings = fast_settings(
                url,
                site.url,
                site_token_file=token_file,
                log_level="DEBUG",
                log_format=log_format,
                max_attempts=2,
            )
            assert "test-token" == settings.site_token.get_secret_value()  # type: ignore[union-attr]
            logs.configure(settings, stream=captured_log)
            worker = bootstrap.worker(settings, engine, rng=random.Random(1))
            if log_format == "json":
                run(worker, cycles=1)  # 401: paused, nothing charged
                site.faults.auth_status = None
            else:
                run(worker)  # delivered, a 500 until retry-limit, a 422
        effects = site.effects()
    log = captured_log.getvalue()
    states = {
        m["aggregate"]: (m["state"], m["reason"]) for m in rows(engine, one_channel_messages())
    }
    assert {
        "SKU-1": ("delivered", None),
        "SKU-P": ("quarantined", "retry-limit"),
        "SKU-R": ("quarantined", "http-422"),
    } == states
    assert ["SKU-1"] == [e.aggregate for e in effects]  # the site only accepts the file's token
    # What the log must show, DEBUG included: httpx's request lines appear at DEBUG only
    # (logs.CHATTY); httpcore's wire trace too when httpx's own transport is used.
    for fragment in ("401", "500", "422", "HTTP Request: POST"):
        assert fragment in log, f"{fragment} missing from the log"
    assert SECRET not in log
    stored = repr(rows(engine, one_channel_messages())) + repr(rows(engine, history))
    assert SECRET not in stored
