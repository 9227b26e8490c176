"""Contract 7 (and 3): configuration from EXCHANGE_* variables and a TOML file."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange.domain.policy import DEFAULT_KINDS, Policy
from exchange.errors import ConfigurationError
from exchange.settings import Settings, load_settings, safe_url

TOKEN = "tok-3f9a1c77-SECRET"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exchange.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(**env: str) -> str:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with pytest.raises(ConfigurationError) as caught:
            load_settings()
    return str(caught.value)


# -- defaults -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("database_url", "sqlite:///exchange.db"),
        ("staging_url", None),
        ("site_url", None),
        ("site_token", None),
        ("poll_interval", 5),
        ("batch_size", 100),
        ("concurrency", 8),
        ("lease_seconds", 60),
        ("max_attempts", 5),
        ("retry_base_delay", 1.0),
        ("retry_max_delay", 300),
        ("http_timeout", 10),
        ("gap_timeout", 600),
        ("breaker_threshold", 5),
        ("site_batch_size", 1),
    ],
)
def test_default_matches_the_contract_table(field: str, expected: object) -> None:
    assert expected == getattr(load_settings(), field)


def test_default_worker_id_is_host_name_and_process_id() -> None:
    worker_id = load_settings().worker_id

    assert socket.gethostname() in worker_id
    assert str(os.getpid()) in worker_id


def test_default_kinds_are_price_latest_wins_and_financial_posting_strict() -> None:
    expected = {"price": Policy.LATEST_WINS, "financial_posting": Policy.STRICT}

    assert expected == load_settings().kinds
    assert expected == DEFAULT_KINDS


# -- environment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("EXCHANGE_DATABASE_URL", "postgresql+psycopg://u@db/x", "database_url", None),
        ("EXCHANGE_STAGING_URL", "sqlite:///staging.db", "staging_url", None),
        ("EXCHANGE_SITE_URL", "https://shop.example.com", "site_url", None),
        ("EXCHANGE_WORKER_ID", "worker-7", "worker_id", None),
        ("EXCHANGE_POLL_INTERVAL", "0.005", "poll_interval", 0.005),
        ("EXCHANGE_BATCH_SIZE", "7", "batch_size", 7),
        ("EXCHANGE_CONCURRENCY", "3", "concurrency", 3),
        ("EXCHANGE_LEASE_SECONDS", "0.5", "lease_seconds", 0.5),
        ("EXCHANGE_MAX_ATTEMPTS", "2", "max_attempts", 2),
        ("EXCHANGE_RETRY_BASE_DELAY", "0.001", "retry_base_delay", 0.001),
        ("EXCHANGE_RETRY_MAX_DELAY", "60", "retry_max_delay", 60),
        ("EXCHANGE_HTTP_TIMEOUT", "2.5", "http_timeout", 2.5),
        ("EXCHANGE_GAP_TIMEOUT", "0.2", "gap_timeout", 0.2),
        ("EXCHANGE_BREAKER_THRESHOLD", "3", "breaker_threshold", 3),
        ("EXCHANGE_SITE_BATCH_SIZE", "50", "site_batch_size", 50),
    ],
)
def test_exchange_environment_variable_overrides_the_default(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)

    assert (value if expected is None else expected) == getattr(load_settings(), field)


def test_site_token_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN", TOKEN)

    assert TOKEN == load_settings().token()


def test_exchange_kinds_adds_a_kind_with_a_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_KINDS", '{"price": "latest-wins", "stock": "latest-wins"}')

    assert Policy.LATEST_WINS == load_settings().policies.policy("stock")


# -- TOML file ------------------------------------------------------------------------------


def test_toml_file_is_read(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        'site_url = "https://shop.example.com"\nbatch_size = 7\nretry_max_delay = 30.5\n'
        '[kinds]\nprice = "latest-wins"\nfinancial_posting = "strict"\n'
        'financial_refund = "strict"\n',
    )

    settings = load_settings(path)

    assert ("https://shop.example.com", 7, 30.5) == (
        settings.site_url,
        settings.batch_size,
        settings.retry_max_delay,
    )
    assert Policy.STRICT == settings.policies.policy("financial_refund")


def test_toml_file_named_by_exchange_config_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EXCHANGE_CONFIG", str(write_toml(tmp_path, "batch_size = 11\n")))

    assert 11 == load_settings().batch_size


def test_environment_wins_over_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write_toml(tmp_path, "batch_size = 7\nconcurrency = 2\n")
    monkeypatch.setenv("EXCHANGE_BATCH_SIZE", "9")

    settings = load_settings(path)

    assert (9, 2) == (settings.batch_size, settings.concurrency)


def test_file_keeps_the_defaults_it_does_not_set(tmp_path: Path) -> None:
    settings = load_settings(write_toml(tmp_path, "batch_size = 7\n"))

    assert (5, 300) == (settings.max_attempts, settings.retry_max_delay)


# -- kinds and their policies (contract 3) -------------------------------------------------


@pytest.mark.parametrize("kind", ["financial_refund", "financial_posting", "financial"])
def test_financial_kind_configured_to_coalesce_is_refused_naming_the_kind(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("EXCHANGE_KINDS", '{"' + kind + '": "latest-wins"}')

    with pytest.raises(ConfigurationError) as caught:
        load_settings()

    assert kind in str(caught.value)


def test_financial_kind_configured_to_coalesce_in_the_file_is_refused(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[kinds]\nfinancial_refund = "latest-wins"\n')

    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)

    assert "financial_refund" in str(caught.value)


def test_financial_kind_configured_strict_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_KINDS", '{"financial_refund": "strict"}')

    assert Policy.STRICT == load_settings().policies.policy("financial_refund")


def test_unknown_policy_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_KINDS", '{"stock": "sometimes"}')

    with pytest.raises(ConfigurationError) as caught:
        load_settings()

    assert "stock" in str(caught.value)


def test_unreadable_exchange_kinds_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_KINDS", "price=latest-wins")

    with pytest.raises(ConfigurationError) as caught:
        load_settings()

    message = str(caught.value)
    assert "EXCHANGE_KINDS" in message
    assert "configuration file" not in message  # there is none


# -- bad values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_BATCH_SIZE", "0"),
        ("EXCHANGE_BATCH_SIZE", "-1"),
        ("EXCHANGE_BATCH_SIZE", "many"),
        ("EXCHANGE_CONCURRENCY", "0"),
        ("EXCHANGE_MAX_ATTEMPTS", "0"),
        ("EXCHANGE_POLL_INTERVAL", "0"),
        ("EXCHANGE_LEASE_SECONDS", "-5"),
        ("EXCHANGE_HTTP_TIMEOUT", "0"),
        ("EXCHANGE_BREAKER_THRESHOLD", "0"),
        ("EXCHANGE_SITE_BATCH_SIZE", "0"),
        ("EXCHANGE_RETRY_BASE_DELAY", "0"),
        ("EXCHANGE_DATABASE_URL", "mysql://x"),
        ("EXCHANGE_DATABASE_URL", "not a url"),
        ("EXCHANGE_STAGING_URL", "oracle://x"),
        ("EXCHANGE_SITE_URL", "ftp://x"),
        ("EXCHANGE_SITE_URL", "shop.example.com"),
    ],
)
def test_bad_value_is_a_configuration_error_in_one_line_naming_the_variable(
    variable: str, value: str
) -> None:
    message = config_error(**{variable: value})

    assert 1 == len(message.splitlines())
    assert variable in message


def test_base_delay_above_max_delay_is_refused() -> None:
    message = config_error(EXCHANGE_RETRY_BASE_DELAY="10", EXCHANGE_RETRY_MAX_DELAY="1")

    assert 1 == len(message.splitlines())


def test_missing_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"

    with pytest.raises(ConfigurationError) as caught:
        load_settings(missing)

    assert 1 == len(str(caught.value).splitlines())
    assert "nowhere.toml" in str(caught.value)


def test_missing_config_file_named_by_exchange_config_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EXCHANGE_CONFIG", str(tmp_path / "nowhere.toml"))

    with pytest.raises(ConfigurationError) as caught:
        load_settings()

    assert 1 == len(str(caught.value).splitlines())


def test_unparseable_config_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "batch_size = = 7\n")

    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)

    assert 1 == len(str(caught.value).splitlines())


def test_unknown_key_in_the_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "batch_sise = 7\n")

    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)

    assert "batch_sise" in str(caught.value).lower()


# -- secrets -------------------------------------------------------------------------------


def test_site_token_never_appears_in_repr_or_str(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN", TOKEN)

    settings = load_settings()

    assert TOKEN not in repr(settings)
    assert TOKEN not in str(settings)
    assert TOKEN not in repr(settings.site_token)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_BATCH_SIZE", "0"),
        ("EXCHANGE_SITE_URL", "ftp://" + TOKEN),
        ("EXCHANGE_DATABASE_URL", "mysql://u:" + TOKEN + "@db/x"),
    ],
)
def test_site_token_never_appears_in_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN", TOKEN)
    monkeypatch.setenv(variable, value)

    with pytest.raises(ConfigurationError) as caught:
        load_settings()

    assert TOKEN not in str(caught.value)


def test_site_token_in_a_bad_config_file_never_appears_in_the_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path, f'site_token = "{TOKEN}"\nbatch_size = 0\n')

    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)

    assert TOKEN not in str(caught.value)


def test_site_token_of_wrong_type_in_the_file_never_appears_in_the_error(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "site_token = 31415926535897\n")

    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)

    assert "31415926535897" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql+psycopg://exchange:s3cr3t@db:5432/shop",
            "postgresql+psycopg://exchange:***@db:5432/shop",
        ),
        ("sqlite:///exchange.db", "sqlite:///exchange.db"),
        ("postgresql://exchange@db/shop", "postgresql://exchange@db/shop"),
    ],
)
def test_safe_url_masks_the_password(url: str, expected: str) -> None:
    assert expected == safe_url(url)


def test_safe_url_of_garbage_reveals_nothing() -> None:
    assert "s3cr3t" not in safe_url("::not a url:s3cr3t@")


def test_explicit_overrides_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_BATCH_SIZE", "9")

    assert 3 == load_settings(batch_size=3).batch_size


def test_settings_class_reads_the_same_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_CONCURRENCY", "4")

    assert 4 == Settings().concurrency


def test_kind_policies_are_one_object_that_names_strict_and_latest_wins_kinds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "EXCHANGE_KINDS",
        '{"price": "latest-wins", "stock": "latest-wins", "financial_refund": "strict"}',
    )
    policies = load_settings().policies

    assert ("financial_refund",) == policies.strict
    assert ("price", "stock") == policies.latest_wins
    assert policies.is_strict("financial_refund") and not policies.is_strict("price")
    assert None is policies.policy("unknown"), "an unconfigured kind has no policy"
    assert hash(policies) == hash(load_settings().policies), "hashable: cached statements"
