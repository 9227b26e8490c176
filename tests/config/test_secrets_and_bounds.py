"""Issue 12 items 4 and 7, at the settings' level: a secret as a person really writes it (a
Windows env file, a Notepad token file, credentials in a URL), masking in every quoting, and a
bound on every number, time and string setting.

Promises: a token that can work is made to work (surrounding whitespace and a BOM are
stripped); one that cannot go into an HTTP header is refused at load in one line that never
holds it; a secret is hidden in any quoting; every setting is refused at load, in one line
naming it, when its value would fail later (OverflowError, a column too narrow).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from exchange.errors import ConfigurationError
from exchange.logs import RedactSecrets
from exchange.report.mask import Redactor
from exchange.settings import (
    MAX_SECONDS,
    WORKER_ID_MAX,
    Settings,
    load_settings,
    mask_secrets,
    safe_url,
    secret_forms,
)

TOKEN = "tok-Issue12-a1b2c3"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("EXCHANGE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def refused(**env: str) -> str:
    """The one-line ConfigurationError load_settings raises for these variables."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with pytest.raises(ConfigurationError) as caught:
            load_settings()
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, message
    return message


# -- the token as written by hand ---------------------------------------------------------------

AROUND = [
    pytest.param(TOKEN + "\r", id="trailing-CR"),
    pytest.param(TOKEN + "\n", id="trailing-LF"),
    pytest.param(TOKEN + "\r\n", id="trailing-CRLF"),
    pytest.param(f"  {TOKEN}\t ", id="spaces-and-tab"),
    pytest.param("\ufeff" + TOKEN, id="BOM"),
    pytest.param("\ufeff" + TOKEN + "\r\n", id="BOM-and-CRLF"),
]


@pytest.mark.parametrize("raw", AROUND)
def test_whitespace_and_a_bom_around_the_env_token_are_stripped(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN", raw)
    assert TOKEN == load_settings().token()


@pytest.mark.parametrize("raw", AROUND)
def test_whitespace_and_a_bom_around_the_file_token_are_stripped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raw: str
) -> None:
    path = tmp_path / "token"
    path.write_bytes(raw.encode("utf-8"))  # "\ufeff" is written as Notepad writes it: EF BB BF
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN_FILE", str(path))
    settings = load_settings()
    assert TOKEN == settings.token()
    assert TOKEN in settings.secrets()


UNUSABLE = [
    pytest.param(TOKEN[:5] + "\r" + TOKEN[5:], id="inner-CR"),
    pytest.param(TOKEN[:5] + "\n" + TOKEN[5:], id="inner-LF"),
    pytest.param(TOKEN[:5] + "\x00" + TOKEN[5:], id="NUL"),
    pytest.param(TOKEN[:5] + "\x7f" + TOKEN[5:], id="DEL"),
    pytest.param(TOKEN[:5] + "\t" + TOKEN[5:], id="inner-tab"),
    pytest.param(TOKEN[:5] + " " + TOKEN[5:], id="inner-space"),
    pytest.param(TOKEN[:5] + "é" + TOKEN[5:], id="non-ASCII"),
    pytest.param(TOKEN[:5] + "\u200b" + TOKEN[5:], id="zero-width-space"),
    pytest.param("Bearer " + TOKEN, id="Bearer-prefix"),
]


@pytest.mark.parametrize("raw", UNUSABLE)
def test_a_token_that_cannot_go_into_a_header_is_refused_at_load_without_showing_it(
    tmp_path: Path, raw: str
) -> None:
    if "\x00" not in raw:  # an environment variable cannot hold NUL
        message = refused(EXCHANGE_SITE_TOKEN=raw)
        assert "EXCHANGE_SITE_TOKEN" in message
        assert TOKEN[:5] not in message and TOKEN[5:] not in message
    path = tmp_path / "exchange.toml"
    path.write_text(f"site_token = {json.dumps(raw)}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)
    assert "EXCHANGE_SITE_TOKEN" in str(caught.value)
    assert TOKEN[:5] not in str(caught.value) and TOKEN[5:] not in str(caught.value)


@pytest.mark.parametrize("raw", UNUSABLE)
def test_a_file_token_that_cannot_go_into_a_header_is_refused_at_load_without_showing_it(
    tmp_path: Path, raw: str
) -> None:
    path = tmp_path / "token"
    path.write_bytes(("\ufeff" + raw + "\r\n").encode("utf-8"))
    message = refused(EXCHANGE_SITE_TOKEN_FILE=str(path))
    assert "EXCHANGE_SITE_TOKEN_FILE" in message
    assert TOKEN[:5] not in message and TOKEN[5:] not in message


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_token_file_saved_as_notepad_unicode_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, encoding: str
) -> None:
    path = tmp_path / "token"
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(encoding, b"")
    path.write_bytes(bom + (TOKEN + "\r\n").encode(encoding))
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN_FILE", str(path))
    assert TOKEN == load_settings().token()


def test_a_token_file_that_is_not_utf8_is_refused_at_load_without_showing_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "token"
    path.write_bytes(TOKEN.encode() + b"\xff\xfe")
    message = refused(EXCHANGE_SITE_TOKEN_FILE=str(path))
    assert "EXCHANGE_SITE_TOKEN_FILE" in message and "UTF-8" in message
    assert TOKEN not in message


def test_a_token_file_replaced_by_an_unusable_one_is_a_configuration_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN_FILE", str(path))
    settings = load_settings()
    path.write_text(TOKEN + "\x01\n", encoding="utf-8")  # the worker reads it again on a 401
    with pytest.raises(ConfigurationError) as caught:
        settings.token()
    assert TOKEN not in str(caught.value)


# -- credentials in the site URL ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://bridge:pw-Site-9f8e@shop.example.com",
        "https://bridge:pw-Site-9f8e@shop.example.com:8443/base",
        "https://:pw-Site-9f8e@shop.example.com",
        "https://pw-Site-9f8e@shop.example.com",
        "http://bridge:pw-Site-9f8e@127.0.0.1:8080",
    ],
)
def test_a_site_url_with_credentials_is_refused_at_load_without_showing_them(url: str) -> None:
    message = refused(EXCHANGE_SITE_URL=url, EXCHANGE_SITE_TOKEN=TOKEN)
    assert "EXCHANGE_SITE_URL" in message and "user name or password" in message
    assert "pw-Site-9f8e" not in message and TOKEN not in message


def test_a_site_url_with_a_trailing_cr_is_read_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_URL", "https://shop.example.com/\r")
    assert "https://shop.example.com" == load_settings().site_url


@pytest.mark.parametrize(
    "url",
    ["https://shop.example.com/?key=x", "https://shop.example.com/#x", "https://", "https://a b"],
)
def test_a_site_url_that_is_not_a_base_url_is_refused(url: str) -> None:
    assert "EXCHANGE_SITE_URL" in refused(EXCHANGE_SITE_URL=url)


# -- database passwords in the query ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql+psycopg://u@db/shop?password=pw-Query-1",
            "postgresql+psycopg://u@db/shop?password=***",
        ),
        (
            "postgresql+psycopg://u:pw-User-1@db/shop?sslmode=require&sslpassword=pw-Key-1",
            "postgresql+psycopg://u:***@db/shop?sslmode=require&sslpassword=***",
        ),
        (
            "postgresql://u@db/shop?PASSWORD=pw%20Q%2Fx",
            "postgresql://u@db/shop?PASSWORD=***",
        ),
    ],
)
def test_safe_url_masks_passwords_in_the_userinfo_and_in_the_query(url: str, expected: str) -> None:
    assert expected == safe_url(url)


def test_the_secrets_are_the_token_and_every_database_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_SITE_TOKEN", TOKEN + "\r\n")
    monkeypatch.setenv(
        "EXCHANGE_DATABASE_URL", "postgresql+psycopg://u:pw-User-1@db/shop?sslpassword=pw-Key-1"
    )
    monkeypatch.setenv("EXCHANGE_STAGING_URL", "postgresql+psycopg://u@db/st?password=pw%2FQ")
    assert {TOKEN, "pw-User-1", "pw-Key-1", "pw/Q"} == set(load_settings().secrets())


# -- masking in any quoting -----------------------------------------------------------------------

AWKWARD = "pw'\"\\/+= é%&<>-Zz9"  # a database password may hold anything


def quotings(secret: str) -> dict[str, str]:
    """The secret as libraries and formats spell it in an error, a header repr, a body."""
    return {
        "plain": secret,
        "repr": repr(secret),
        "bytes repr": repr(secret.encode()),
        "header repr": repr(f"Bearer {secret}".encode()),
        "json": json.dumps(secret),
        "json ascii": json.dumps(secret, ensure_ascii=False),
        "json of repr": json.dumps(repr(secret)),
        "percent": quote(secret, safe=""),
        "percent lower": re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe="")),
        "percent plus": quote_plus(secret),
        "url path": quote(secret),
    }


@pytest.mark.parametrize("secret", [TOKEN, "tok+/Base64==", AWKWARD])
def test_mask_secrets_hides_a_secret_in_every_quoting(secret: str) -> None:
    forms = secret_forms(secret)
    for how, text in quotings(secret).items():
        masked = mask_secrets(f"error: {text} (end)", forms)
        assert "***" in masked, how
        for piece in (secret, secret.encode("unicode_escape").decode()):
            assert piece not in masked, how


@pytest.mark.parametrize("secret", ["tok+/Base64==", AWKWARD])
def test_the_log_filter_hides_a_secret_in_every_quoting(secret: str) -> None:
    redact = RedactSecrets([secret])
    for how, text in quotings(secret).items():
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed: %s", (text,), None)
        redact.filter(record)
        assert "***" in record.getMessage() and secret not in record.getMessage(), how


@pytest.mark.parametrize("secret", ["tok+/Base64==", AWKWARD])
def test_the_report_hides_a_secret_in_every_quoting(secret: str) -> None:
    redactor = Redactor(secrets=[secret])
    for how, text in quotings(secret).items():
        masked = redactor.text(f"HTTP 500: {text}")
        assert "***" in masked and secret not in masked, how


# -- bounds ----------------------------------------------------------------------------------------

SECONDS = [
    "EXCHANGE_POLL_INTERVAL",
    "EXCHANGE_LEASE_SECONDS",
    "EXCHANGE_RETRY_BASE_DELAY",
    "EXCHANGE_RETRY_MAX_DELAY",
    "EXCHANGE_HTTP_TIMEOUT",
    "EXCHANGE_GAP_TIMEOUT",
    "EXCHANGE_NOTIFY_EVERY",
    "EXCHANGE_NOTIFY_STALLED_AFTER",
    "EXCHANGE_REDIS_MIN_IDLE",
    "EXCHANGE_WB_CATALOGUE_REFRESH",
    "EXCHANGE_YM_APPLY_TIMEOUT",
]


def test_every_float_setting_is_one_of_the_bounded_ones() -> None:
    """A new time setting must join the bounded list (and so the tests below)."""
    floats = {
        f"EXCHANGE_{name.upper()}"
        for name, field in Settings.model_fields.items()
        if field.annotation in (float, float | None)
    }
    assert {
        *SECONDS,
        "EXCHANGE_RETENTION_DAYS",
        "EXCHANGE_SITE_MAX_RATE",
        "EXCHANGE_PAIR_SETTLE",
    } == floats


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "61", "1e400"])
def test_a_pair_settle_that_is_negative_beyond_a_minute_or_not_finite_is_refused(
    value: str,
) -> None:
    """``pair_settle`` holds a lone price back seconds, never longer than a minute (0: never)."""
    assert "EXCHANGE_PAIR_SETTLE" in refused(EXCHANGE_PAIR_SETTLE=value)


@pytest.mark.parametrize("value", ["0", "2.5", "60"])
def test_a_pair_settle_within_a_minute_is_taken(value: str) -> None:
    assert float(value) == load_settings(pair_settle=value).pair_settle


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "1e7"])
def test_a_site_rate_cap_out_of_bounds_is_refused_at_load(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"site_max_rate|SITE_MAX_RATE"):
        load_settings(site_max_rate=value)


def test_a_site_rate_cap_within_bounds_is_taken() -> None:
    assert 120.5 == load_settings(site_max_rate="120.5").site_max_rate


@pytest.mark.parametrize("variable", SECONDS)
@pytest.mark.parametrize("value", ["inf", "Infinity", "-inf", "1e12", "1e400", "315360001"])
def test_a_time_beyond_ten_years_or_infinite_is_refused_saying_what_to_write(
    variable: str, value: str
) -> None:
    message = refused(**{variable: value})
    assert variable in message
    assert str(MAX_SECONDS) in message, message  # what to write instead


@pytest.mark.parametrize("variable", [*SECONDS, "EXCHANGE_RETENTION_DAYS"])
@pytest.mark.parametrize("value", ["nan", "NaN", "0", "-1"])
def test_a_time_that_is_nan_zero_or_negative_is_refused(variable: str, value: str) -> None:
    assert variable in refused(**{variable: value})


@pytest.mark.parametrize("value", ["inf", "nan", "36501"])
def test_retention_days_beyond_a_century_or_not_finite_are_refused(value: str) -> None:
    assert "EXCHANGE_RETENTION_DAYS" in refused(EXCHANGE_RETENTION_DAYS=value)


@pytest.mark.parametrize("variable", SECONDS)
def test_a_time_at_its_bound_is_accepted(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, str(MAX_SECONDS))
    if variable == "EXCHANGE_RETRY_BASE_DELAY":
        monkeypatch.setenv("EXCHANGE_RETRY_MAX_DELAY", str(MAX_SECONDS))
    assert MAX_SECONDS == getattr(load_settings(), variable.removeprefix("EXCHANGE_").lower())


def test_a_gap_timeout_written_as_infinity_in_the_file_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text("gap_timeout = inf\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path)
    assert "EXCHANGE_GAP_TIMEOUT" in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_MAX_ATTEMPTS", "1000001"),
        ("EXCHANGE_MAX_ATTEMPTS", str(2**63)),
        ("EXCHANGE_BREAKER_THRESHOLD", "1000001"),
        ("EXCHANGE_BULK_LIMIT", str(2**63)),
        ("EXCHANGE_REPORT_KEEP", "100001"),
        ("EXCHANGE_BATCH_SIZE", "100001"),
        ("EXCHANGE_CONCURRENCY", "1001"),
        ("EXCHANGE_SITE_BATCH_SIZE", "1001"),
        ("EXCHANGE_METRICS_PORT", "65536"),
        ("EXCHANGE_METRICS_HOST", ""),
        ("EXCHANGE_METRICS_HOST", "127.0.0.1 8080"),
        ("EXCHANGE_KINDS", '{"price\\r": "latest-wins"}'),
        ("EXCHANGE_REPORT_MASK_FIELDS", '["inn\\u0000"]'),
        ("EXCHANGE_REPORT_MASK_FIELDS", json.dumps(["x" * 201])),
    ],
)
def test_a_count_or_name_beyond_its_bound_is_refused(variable: str, value: str) -> None:
    assert variable in refused(**{variable: value})


def test_a_worker_id_longer_than_the_database_column_is_refused() -> None:
    message = refused(EXCHANGE_WORKER_ID="w" * (WORKER_ID_MAX + 1))
    assert "EXCHANGE_WORKER_ID" in message and str(WORKER_ID_MAX) in message


@pytest.mark.parametrize("value", ["", "   ", "w\x00x", "w\nx", "w\x1bx"])
def test_an_empty_or_unprintable_worker_id_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(worker_id=value)
    assert "EXCHANGE_WORKER_ID" in str(caught.value)


def test_a_worker_id_of_the_column_width_is_accepted_and_surrounding_spaces_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EXCHANGE_WORKER_ID", " " + "w" * WORKER_ID_MAX + "\r")
    assert "w" * WORKER_ID_MAX == load_settings().worker_id


def test_the_default_worker_id_fits_the_column(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "h" * 300)
    worker_id = load_settings().worker_id
    assert 0 < len(worker_id) <= WORKER_ID_MAX
    assert worker_id.endswith(str(os.getpid()))


def test_a_configuration_file_saved_by_notepad_with_a_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_bytes(b"\xef\xbb\xbf" + f'site_token = "{TOKEN}"\r\nbatch_size = 7\r\n'.encode())
    settings = load_settings(path)
    assert (TOKEN, 7) == (settings.token(), settings.batch_size)


def test_an_integer_beyond_any_float_is_refused_as_too_long_not_a_crash() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(gap_timeout=10**400)
    assert "EXCHANGE_GAP_TIMEOUT" in str(caught.value) and str(MAX_SECONDS) in str(caught.value)


# -- the operators' notifications (issue 16 item 6) ------------------------------------------------


def test_the_notification_secrets_join_the_masked_ones_with_their_file_twins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EXCHANGE_NOTIFY_SMTP_HOST", "smtp.shop.example")
    monkeypatch.setenv("EXCHANGE_NOTIFY_SMTP_FROM", "exchange@shop.example")
    monkeypatch.setenv("EXCHANGE_NOTIFY_SMTP_TO", '["ops@shop.example"]')
    monkeypatch.setenv("EXCHANGE_NOTIFY_SMTP_PASSWORD", "smtp-Pw-1")
    monkeypatch.setenv("EXCHANGE_NOTIFY_TELEGRAM_TOKEN", "1234:bot-Tok-1")
    monkeypatch.setenv("EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID", "-100")
    assert {"smtp-Pw-1", "1234:bot-Tok-1"} <= set(load_settings().secrets())
    (tmp_path / "pw").write_text("smtp-Pw-2\n", encoding="utf-8")
    (tmp_path / "bot").write_text("1234:bot-Tok-2\r\n", encoding="utf-8")
    monkeypatch.setenv("EXCHANGE_NOTIFY_SMTP_PASSWORD_FILE", str(tmp_path / "pw"))
    monkeypatch.setenv("EXCHANGE_NOTIFY_TELEGRAM_TOKEN_FILE", str(tmp_path / "bot"))
    settings = load_settings()
    assert settings.secret("notify_telegram_token") == "1234:bot-Tok-2"  # the file wins
    assert {"smtp-Pw-2", "1234:bot-Tok-2"} <= set(settings.secrets())


@pytest.mark.parametrize(
    ("env", "words"),
    [
        (
            {"EXCHANGE_NOTIFY_SMTP_HOST": "smtp.shop.example"},
            "set EXCHANGE_NOTIFY_SMTP_FROM and EXCHANGE_NOTIFY_SMTP_TO",
        ),
        (
            {"EXCHANGE_NOTIFY_TELEGRAM_TOKEN": "1234:abc"},
            "set EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID",
        ),
        (
            {
                "EXCHANGE_NOTIFY_TELEGRAM_TOKEN": "1234:abc",
                "EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID": "-100",
                "EXCHANGE_NOTIFY_TELEGRAM_API_URL": "http://bots.example",
            },
            "plain http:// would send the bot's token unencrypted",
        ),
        (
            {
                "EXCHANGE_NOTIFY_SMTP_HOST": "smtp.shop.example",
                "EXCHANGE_NOTIFY_SMTP_FROM": "a@b.example",
                "EXCHANGE_NOTIFY_SMTP_TO": '["c@d.example"]',
                "EXCHANGE_NOTIFY_SMTP_SECURITY": "none",
                "EXCHANGE_NOTIFY_SMTP_PASSWORD": "pw-Never-Shown",
            },
            "would send the SMTP password unencrypted",
        ),
    ],
)
def test_a_notification_way_set_by_half_is_refused_in_one_line(
    env: dict[str, str], words: str
) -> None:
    message = refused(**env)
    assert words in message and "pw-Never-Shown" not in message and "abc" not in message


def test_notifications_are_off_by_default_and_the_period_is_an_hour() -> None:
    from exchange.ops.notify_by import messengers

    settings = load_settings()
    assert [] == messengers(settings) and 3600.0 == settings.notify_every
