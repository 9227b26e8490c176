"""Configuration: environment variables ``EXCHANGE_*``, optionally a TOML file.

Built once by the CLI (``load_settings``) and passed down; nothing here runs at import time.
Precedence, highest first: explicit overrides (tests, the demo), environment, the TOML file,
the defaults below.
"""

from __future__ import annotations

import contextlib
import functools
import html
import ipaddress
import json
import logging
import math
import os
import re
import socket
import ssl
import sys
import tomllib
import zoneinfo
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, quote_plus, urlsplit

import tzlocal
from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from exchange.domain.policy import DEFAULT_KINDS, KindPolicies, Policy
from exchange.errors import ConfigurationError

SUPPORTED_DIALECTS = ("sqlite", "postgresql")

# Bounds (issue 12 item 7). A duration is added to "now" (a lease's end, a retry's time, a gap's
# deadline): ten years keeps every such sum far inside what a datetime and the databases hold,
# and is longer than any wait that means something. Infinity and NaN are refused: "never" is
# written as the bound itself.
MAX_SECONDS = 315_360_000  # 10 years of 365 days
MAX_SECONDS_TEXT = "315360000 (10 years)"
# Counts that reach SQL as parameters of INTEGER columns stay far below 2**31.
MAX_ATTEMPTS = 1_000_000
# The width of every worker column (messages.locked_by, history.worker, workers.worker_id).
WORKER_ID_MAX = 200


def _default_woo_fields() -> dict[str, Literal["regular_price", "sale_price"]]:
    return {"retail": "regular_price"}


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[-WORKER_ID_MAX:]


def host_zone() -> str:
    """The host's own time zone (TZ, /etc/timezone, /etc/localtime, the Windows registry, as
    tzlocal reads them), so that people read times on their own clock by default; UTC where
    the host names none that zoneinfo knows."""
    try:
        name = tzlocal.get_localzone_name()
        zoneinfo.ZoneInfo(name or "")
    except Exception:  # any host's odd set-up ends in UTC, never in a refused start
        return "UTC"
    # Debian names UTC «Etc/UTC»: the pages say the zone, and «UTC» is the name people know.
    return "UTC" if not name or name in _UTC_NAMES else name


_UTC_NAMES = {"Etc/UTC", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu", "Etc/GMT", "GMT"}


# -- secrets -----------------------------------------------------------------------------------
#
# One mechanism for every output (issue 12 item 4): ``Settings.secrets()`` names the values,
# ``secret_forms`` spells each as it may be quoted on its way out, ``mask_secrets`` hides them.
# The logs (exchange.logs), the reports (exchange.report_mask), the site client, the database
# errors and the command line all go through these.

SECRET_MASK = "***"
# The service's own secrets are chosen by whoever sets the service up: one shorter than this is
# refused at start (it is guessed, and as a word it would stand in ordinary text). The shop
# issues its own credentials and the site its token: those are only warned about.
MIN_SECRET_LENGTH = 8
_REFUSED_SHORT = ("onec_password", "intake_token", "http_secret_key")
_WARNED_SHORT = ("woo_key", "woo_secret", "bitrix_password")
log = logging.getLogger(__name__)
# Names of URL query parameters that carry a secret (libpq's password and sslpassword, and the
# usual spellings of others): masked wherever a URL is shown.
_SECRET_QUERY_KEY = re.compile(r"pass|pwd|secret|token|api_?key", re.IGNORECASE)
BOM = "\ufeff"


def secret_forms(secret: str) -> list[str]:
    """Every spelling under which ``secret`` may appear in a text, longest first: as is, as a
    Python str or bytes repr shows it, JSON-escaped (ASCII-only or not), percent-encoded (either
    hex case, with "+" for a space or not), HTML-escaped, and JSON-escaped twice (a repr inside
    a JSON string). Masking all of them masks the secret in any quoting."""
    if not secret:
        return []
    once = {
        secret,
        repr(secret)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        repr(secret.encode("utf-8"))[2:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        html.escape(secret),
        html.escape(secret, quote=False),
    }
    for encoded in (quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)):
        once |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)}
    # Python's repr escapes a quote only when both kinds are present: both spellings.
    once |= {form.replace("'", "\\'") for form in list(once)}
    forms = set(once)
    for form in once:
        forms.add(json.dumps(form)[1:-1])
    return sorted(forms, key=lambda f: (-len(f), f))


def mask_secrets(text: str, forms: Iterable[str]) -> str:
    """``text`` with every form (from ``secret_forms``, longest first) replaced by ``***``,
    except where that would cut a word: a form is not masked where a word character (a letter,
    a digit or ``_``) on its edge meets one beside it. Inside a longer word the same letters
    are another word ("t" in "rejected", "exchange" in "1c_exchange.php"): replacing them
    there damages the text and hides nothing."""
    pattern = _secret_pattern(tuple(form for form in forms if form))
    return text if pattern is None else pattern.sub(SECRET_MASK, text)


@functools.lru_cache(maxsize=64)
def _secret_pattern(forms: tuple[str, ...]) -> re.Pattern[str] | None:
    if not forms:
        return None
    # Longest first: a secret that contains another is replaced whole.
    ordered = sorted(set(forms), key=lambda f: (-len(f), f))
    return re.compile("|".join(_alone(form) for form in ordered))


def _alone(form: str) -> str:
    """``form`` as a pattern that does not match inside a word."""
    before = r"(?<!\w)" if re.match(r"\w", form) else ""
    after = r"(?!\w)" if re.match(r"\w", form[-1]) else ""
    return before + re.escape(form) + after


def url_secrets(url: str | None) -> list[str]:
    """The secrets a database URL carries: the password of its userinfo and the values of its
    secret query parameters (``?password=…``, ``sslpassword=…``)."""
    if not url:
        return []
    try:
        parsed = make_url(url)
    except ArgumentError:
        return []
    found = [str(parsed.password)] if parsed.password else []
    for key, value in parsed.query.items():
        if _SECRET_QUERY_KEY.search(key):
            found += [value] if isinstance(value, str) else list(value)
    return [secret for secret in found if secret]


def clean_token(raw: str, source: str = "") -> str | None:
    """The token as it goes into the Authorization header, or ValueError with one line that
    never holds the token.

    Surrounding whitespace (a trailing CR/LF of a file or an env file written on Windows, a
    space pasted along) and a byte order mark (a file saved by Notepad) are stripped: they are
    never part of a token, and that is what a person who wrote the file means. What remains
    must be visible ASCII: a control character, a space or a non-ASCII character inside it
    cannot travel in an HTTP header, and is refused here instead of failing every request."""
    token = raw.strip().strip(BOM).strip()
    if not token:
        return None
    where = f"{source}: " if source else ""
    if token[:7].lower() == "bearer ":
        raise ValueError(f"{where}write the token alone, without 'Bearer ' (the service adds it)")
    for position, char in enumerate(token, start=1):
        if "!" <= char <= "~":
            continue
        what = (
            "a space"
            if char == " "
            else "a control character"
            if char < " " or char == "\x7f"
            else "a non-ASCII character"
        )
        raise ValueError(
            f"{where}character {position} of {len(token)} of the token is {what}; a token "
            "goes into an HTTP header and may hold only visible ASCII characters: copy it "
            "again from the site"
        )
    return token


def read_secret_file(path: Path, source: str) -> str:
    """A secret file's text, or ConfigurationError when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{source} cannot be read: {exc.strerror}") from None
    return secret_file_text(data, source)


def secret_file_text(data: bytes, source: str) -> str:
    """A secret file's bytes as text: UTF-8, a byte order mark (Notepad's) dropped, or UTF-16
    with its byte order mark (Notepad's "Unicode"); ValueError naming ``source`` otherwise
    (never the content)."""
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{source}: the file is not UTF-8 text (save it as UTF-8)") from None


def _distinct_text(values: list[str]) -> list[str]:
    return list(dict.fromkeys(value.strip() for value in values if value.strip()))


def _finite_seconds(value: Any, *, most: float = MAX_SECONDS, unit: str = "seconds") -> Any:
    """Before pydantic's own checks: infinity, NaN and values past the bound are refused with a
    message that says what to write instead."""
    try:
        number = float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return value  # not a number at all: pydantic says so
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if number is None or isinstance(value, bool):
        return value
    if math.isnan(number):
        raise ValueError(f"must be a number of {unit}, not NaN")
    if math.isinf(number) or number > most:
        bound = MAX_SECONDS_TEXT if most == MAX_SECONDS else f"{most:.15g}"
        raise ValueError(
            f"must be a finite number of {unit} greater than 0 and at most {bound}; for "
            f"(practically) never, write {most:.15g}"
        )
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EXCHANGE_",
        extra="forbid",
        validate_default=True,
        toml_file=None,
    )

    database_url: str = Field(
        "sqlite:///exchange.db",
        description="SQLAlchemy URL of the service's database (postgresql+psycopg://… for "
        "PostgreSQL).",
    )
    staging_url: str | None = Field(
        None,
        description="URL of the database that holds staging_intents, when it is not the "
        "service's own database.",
    )
    site_url: str | None = Field(
        None,
        description="Base URL of the site API, e.g. https://shop.example.com; required by run. "
        "No user:password@ (the site is authenticated by the token), no ?query or #fragment.",
    )
    site_token: SecretStr | None = Field(
        None,
        description="Bearer token sent to the site API (Authorization header). Surrounding "
        "whitespace (a trailing CR/LF) and a byte order mark are stripped; what remains must be "
        "visible ASCII, else the service refuses to start. Never logged, exported or printed.",
    )
    site_token_file: Path | None = Field(
        None,
        description="A file holding the site token (container or systemd secrets), UTF-8 (or "
        "UTF-16 with a BOM), read at start and again when the site refuses the token; wins over "
        "site_token. A byte order mark and surrounding whitespace (the last line break) are "
        "stripped, as for site_token.",
    )
    site_ca_bundle: Path | None = Field(
        None,
        description="A PEM file of the certificate authorities trusted for the site's HTTPS "
        "certificate, instead of the default ones (a company CA); a file that cannot be read "
        "stops the service at start. Verification itself cannot be turned off.",
    )
    site_allow_http: bool = Field(
        False,
        description="Allow a plain http:// site_url to a host that is not loopback (127.0.0.0/8, "
        "::1, localhost); without it such a URL is refused at start: token and prices would "
        "cross the network unencrypted.",
    )
    worker_id: str = Field(
        default_factory=_default_worker_id,
        description="Name of this worker in leases, history and exchange status; must differ "
        f"between workers that share a database. 1 to {WORKER_ID_MAX} printable characters "
        "(the width of the database's worker columns).",
    )
    poll_interval: float = Field(
        5.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds between cycles of run: how soon a new staging row is taken.",
    )
    batch_size: int = Field(
        100,
        ge=1,
        le=100_000,
        description="Most messages one lease takes (and sends) in a cycle; intake is not bounded "
        "by it.",
    )
    concurrency: int = Field(
        8,
        ge=1,
        le=1000,
        description="Most site requests in flight at once per worker process; the number in "
        "flight adapts between 1 and this to the site's pace (contract 5c).",
    )
    site_max_rate: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Requests per second to the site (more than 0, at most 1000000), a hard "
        "cap for all workers together "
        "(each live worker takes its share); unset: only the site's pace limits them.",
    )
    lease_seconds: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds a leased aggregate stays with its worker unless renewed (a live "
        "worker renews every third of it); then another worker may take it over.",
    )
    max_attempts: int = Field(
        5,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Delivery attempts on temporary failures before a message is quarantined "
        "with reason retry-limit.",
    )
    retry_base_delay: float = Field(
        1.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: the ceiling of the first retry's backoff (full jitter), doubling "
        "per attempt up to retry_max_delay; must not exceed it.",
    )
    retry_max_delay: float = Field(
        300.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: the longest wait before a retry, also the cap on Retry-After and on "
        "the circuit breaker's cool-down.",
    )
    http_timeout: float = Field(
        10.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds one site request may take in all, from waiting for a connection to "
        "the last byte of the answer's body; a request cut off by it is a temporary failure, "
        "result unknown once it was sent (the stop of `run` waits no longer for it).",
    )
    gap_timeout: float = Field(
        600.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds a strictly ordered message waits for a missing earlier version "
        "before it is quarantined with reason sequence-gap.",
    )
    breaker_threshold: int = Field(
        5,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Consecutive temporary failures on distinct aggregates that open the "
        "circuit breaker.",
    )
    target: Literal["api", "bitrix", "woocommerce", "rabbitmq"] = Field(
        "api",
        description="The shop's side (contract 10): api (the shop API of section 5), bitrix "
        "(1C-Bitrix's own exchange, the service acting as 1C), woocommerce (REST API v3) or "
        "rabbitmq (an exchange the shop's back end reads, contract 12). bitrix and "
        "woocommerce take price messages only.",
    )
    woo_url: str | None = Field(
        None,
        description="WooCommerce: the shop's base URL (https://shop.example.com); the REST API "
        "is under /wp-json/wc/v3. http:// only for loopback.",
    )
    woo_key: SecretStr | None = Field(
        None, description="WooCommerce: the REST API consumer key (ck_…), read and write."
    )
    woo_key_file: Path | None = Field(
        None, description="WooCommerce: a file holding the consumer key; wins over woo_key."
    )
    woo_secret: SecretStr | None = Field(
        None, description="WooCommerce: the REST API consumer secret (cs_…)."
    )
    woo_secret_file: Path | None = Field(
        None, description="WooCommerce: a file holding the consumer secret; wins over woo_secret."
    )
    woo_auth: Literal["auto", "basic", "query", "oauth1"] = Field(
        "auto",
        description="WooCommerce: how the key travels. basic (HTTP Basic) and query "
        "(consumer_key in the query, for hosts that drop the Authorization header) work only "
        "where PHP sees HTTPS; oauth1 is OAuth 1.0a one-legged (the secret never travels). auto: "
        "over http:// oauth1 only; over https:// basic, then query, then oauth1, what worked "
        "remembered (in memory) per URL and key and tried again after a 401.",
    )
    woo_price_fields: dict[str, Literal["regular_price", "sale_price"]] = Field(
        default_factory=_default_woo_fields,
        description="WooCommerce: price_type -> the product field it sets, e.g. "
        '{"retail": "regular_price", "sale": "sale_price"}. A price type not listed is '
        "quarantined as unmapped-price-type.",
    )
    bitrix_url: str | None = Field(
        None,
        description="1C-Bitrix: the exchange URL, e.g. "
        "https://shop.example.com/bitrix/admin/1c_exchange.php. http:// only for loopback.",
    )
    bitrix_user: str | None = Field(
        None, description="1C-Bitrix: the user the exchange logs in as (Basic, at checkauth)."
    )
    bitrix_password: SecretStr | None = Field(
        None, description="1C-Bitrix: the exchange user's password (never logged)."
    )
    bitrix_password_file: Path | None = Field(
        None, description="1C-Bitrix: a file holding the password; wins over bitrix_password."
    )
    bitrix_catalog_id: str | None = Field(
        None,
        description="1C-Bitrix: the catalogue's Ид, written as the package's ИдКаталога.",
    )
    bitrix_price_types: dict[str, str] = Field(
        default_factory=dict,
        description="1C-Bitrix: price_type -> the site's price type name, e.g. "
        '{"retail": "Розничная"}. A price type not listed is quarantined as '
        "unmapped-price-type.",
    )
    bitrix_max_import_steps: int = Field(
        200,
        ge=1,
        le=100_000,
        description="1C-Bitrix: most import requests answered progress before the package "
        "counts as a temporary failure (an import that never ends).",
    )
    site_batch_size: int = Field(
        1,
        ge=1,
        le=1000,
        description="Most messages per request to the batch API (POST /api/v1/updates:batch, "
        "contract 5b); 1 sends one request per message. A site that answers 404 there gets "
        "single requests.",
    )
    report_dir: Path | None = Field(
        None,
        description="Directory where run writes the operators' report on a schedule; unset: "
        "no scheduled report.",
    )
    report_cron: str = Field(
        "0 * * * *",
        description="When run writes the report: a crontab line (minute hour day month "
        "day-of-week), in UTC.",
    )
    report_formats: list[Literal["csv", "xlsx", "html", "json"]] = Field(
        ["html", "csv"],
        min_length=1,
        description="Formats of the scheduled report.",
    )
    report_keep: int = Field(
        10,
        ge=1,
        le=100_000,
        description="Timestamped scheduled reports kept per format; older ones are deleted.",
    )
    report_lang: Literal["ru", "en"] = Field(
        "ru",
        description="Language of the report's labels; also the default of quarantine export "
        "--lang.",
    )
    report_mask_fields: list[str] = Field(
        default_factory=list,
        description="Payload fields shown as *** in reports, at any depth (case-insensitive); "
        "each name at most 200 printable characters.",
    )

    @field_validator("report_cron")
    @classmethod
    def _report_cron(cls, value: str) -> str:
        # Checked here, so that a bad line stops `exchange run` at start, not at the first export.
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not a crontab line (minute hour day month day-of-week, "
                f"e.g. '0 * * * *'): {exc}"
            ) from None
        return value

    @field_validator(
        "poll_interval",
        "lease_seconds",
        "retry_base_delay",
        "retry_max_delay",
        "http_timeout",
        "gap_timeout",
        mode="before",
    )
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("retention_days", mode="before")
    @classmethod
    def _days(cls, value: Any) -> Any:
        return _finite_seconds(value, most=36_500, unit="days")

    @field_validator("worker_id", mode="before")
    @classmethod
    def _worker_id(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if len(value) > WORKER_ID_MAX:
            raise ValueError(
                f"is {len(value)} characters long, at most {WORKER_ID_MAX} fit the database's "
                "worker columns"
            )
        if not value.isprintable():
            raise ValueError("must hold printable characters only (no control characters)")
        return value

    @field_validator("metrics_host")
    @classmethod
    def _metrics_host(cls, value: str) -> str:
        if not value.isprintable() or any(char.isspace() for char in value):
            raise ValueError("must be an address or a host name, without spaces")
        return value

    @field_validator("site_token", mode="before")
    @classmethod
    def _site_token(cls, value: Any) -> Any:
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str):
            return clean_token(value)
        return value

    @field_validator("report_formats", "report_mask_fields")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(item.strip() for item in value if item.strip()))

    @field_validator("display_tz")
    @classmethod
    def _display_tz(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r}: an IANA name such as UTC or Europe/Moscow"
            ) from None
        return value

    @field_validator("report_mask_fields")
    @classmethod
    def _mask_fields(cls, value: list[str]) -> list[str]:
        for name in value:
            if len(name) > 200 or not name.isprintable():
                raise ValueError(
                    f"field names are at most 200 printable characters ({name[:20]!r}…)"
                )
        return value

    kinds: dict[str, Policy] = Field(
        default_factory=lambda: dict(DEFAULT_KINDS),
        description="Message kinds and their policy: latest-wins (only the newest pending version "
        "is sent) or strict (every version, in order). A kind starting with financial must be "
        "strict; an unknown kind is quarantined as unknown-kind.",
    )
    bulk_limit: int = Field(
        500,
        ge=1,
        le=MAX_ATTEMPTS,
        description="Most messages a bulk retry or cancel touches unless --limit N confirms more.",
    )
    retention_days: float = Field(
        30.0,
        gt=0,
        le=36_500,
        description="Days delivered and cancelled messages (with their history), taken "
        "staging rows and the 1C exchange's log are kept before prune removes them.",
    )
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING, ERROR.")
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines: readable text, or json (one JSON object per line)."
    )
    display_tz: str = Field(
        default_factory=host_zone,
        description="The time zone in which people read times: the workbench, the console's "
        "tables and the quarantine reports (an IANA name such as Europe/Moscow). Logs, JSON "
        "and --json output stay UTC.",
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port of the Prometheus metrics (/metrics) and health (/healthz) server of "
        "run; unset: no server; 0: any free port (logged).",
    )
    metrics_host: str = Field(
        "0.0.0.0",
        min_length=1,
        max_length=253,
        description="Address the metrics server listens on; 127.0.0.1 keeps it on this host.",
    )

    # -- exchange serve (contract 9) --------------------------------------------------------
    http_host: str = Field(
        "127.0.0.1",
        description="Address exchange serve listens on. Any address but loopback needs TLS "
        "(http_tls_cert and http_tls_key) or http_behind_proxy=true.",
    )
    http_port: int = Field(
        8080, ge=0, le=65535, description="Port exchange serve listens on; 0: any free port."
    )
    http_tls_cert: Path | None = Field(
        None, description="PEM certificate (chain) exchange serve presents for HTTPS."
    )
    http_tls_key: Path | None = Field(
        None, description="PEM private key of http_tls_cert; both or neither must be set."
    )
    http_behind_proxy: bool = Field(
        False,
        description="A reverse proxy in front of exchange serve terminates TLS: plain HTTP is "
        "then allowed on a host other than loopback, cookies are Secure, HSTS is sent, and the "
        "client's address is the right-most X-Forwarded-For entry.",
    )
    http_secret_key: SecretStr | None = Field(
        None,
        description="Key that signs exchange serve's session cookies. Unset: a key generated "
        "once and kept in the database (the same for every serve process).",
    )
    http_secret_key_file: Path | None = Field(
        None, description="A file holding http_secret_key, read at start; wins over it."
    )
    onec_user: str | None = Field(
        None,
        validation_alias=AliasChoices("exchange_1c_user", "1c_user"),
        description="User name 1C's exchange node sends (HTTP Basic). Unset: the standard "
        "exchange (/1c_exchange.php) is closed.",
    )
    onec_password: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("exchange_1c_password", "1c_password"),
        description="Password of 1c_user. Never logged or printed. Unset: the exchange is closed.",
    )
    onec_password_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("exchange_1c_password_file", "1c_password_file"),
        description="A file holding the 1C exchange password, read at start; wins over it.",
    )
    onec_sku: Literal["id", "article"] = Field(
        "id",
        validation_alias=AliasChoices("exchange_1c_sku", "1c_sku"),
        description="What an offer's sku is: id (its Ид, guid#guid for a characteristic) or "
        "article (its Артикул, #characteristic Ид appended).",
    )
    onec_price_types: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("exchange_1c_price_types", "1c_price_types"),
        description="1C price types (by Ид or Наименование) -> price_type codes, e.g. "
        '{"Розничная": "retail"}. A type not listed is never sent.',
    )
    onec_dir: Path | None = Field(
        None,
        validation_alias=AliasChoices("exchange_1c_dir", "1c_dir"),
        description="Folder for the files of running 1C exchanges (one subfolder each, removed "
        "when it completes), private to the service's user (0700). Unset: $STATE_DIRECTORY/1c "
        "under systemd, else beside a SQLite database (exchange.db: exchange-1c), else "
        "exchange/1c in the user's cache folder.",
    )
    onec_file_limit: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        le=1024**3,
        validation_alias=AliasChoices("exchange_1c_file_limit", "1c_file_limit"),
        description="Bytes per upload request 1C is told (file_limit in the answer to init).",
    )
    onec_max_file_bytes: int = Field(
        1024**3,
        ge=1024,
        validation_alias=AliasChoices("exchange_1c_max_file_bytes", "1c_max_file_bytes"),
        description="Largest file (and largest unpacked archive) one exchange may upload; "
        "beyond it the upload fails.",
    )
    onec_zip: bool = Field(
        True,
        validation_alias=AliasChoices("exchange_1c_zip", "1c_zip"),
        description="Ask 1C to send zip archives (zip=yes in the answer to init).",
    )
    onec_max_zip_ratio: int = Field(
        200,
        ge=1,
        validation_alias=AliasChoices("exchange_1c_max_zip_ratio", "1c_max_zip_ratio"),
        description="Largest unpacked/packed size ratio of an archive member (zip bombs).",
    )
    onec_reader_processes: int = Field(
        1,
        ge=0,
        le=8,
        validation_alias=AliasChoices("exchange_1c_reader_processes", "1c_reader_processes"),
        description="Processes of exchange serve that read CommerceML files (on PostgreSQL "
        "while the publishing transaction stages what they have read); 0: read in serve's "
        "own process, then stage.",
    )
    intake_token: SecretStr | None = Field(
        None,
        description="Bearer token of the JSON intake (POST /api/v1/intents). Unset: the "
        "intake is closed.",
    )
    intake_token_file: Path | None = Field(
        None, description="A file holding intake_token, read at start; wins over it."
    )
    intake_max_items: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="Most intents one POST /api/v1/intents may carry (413 beyond).",
    )

    # -- brokers (contract 12, issue 26): RabbitMQ and Redis Streams as ways in, RabbitMQ as a
    # target. One block, so that it merges beside other work on this file.
    source: Literal["rabbitmq", "redis"] | None = Field(
        None,
        description="A broker that exchange run also takes intents from at each cycle's intake "
        "(contract 12): rabbitmq or redis; unset: the staging table alone (which is read "
        "either way).",
    )
    rabbitmq_url: str | None = Field(
        None,
        description="The rabbitmq source and target: amqp://user:password@host:5672/vhost "
        "(amqps:// for TLS). Its password is never logged.",
    )
    rabbitmq_queue: str | None = Field(
        None,
        description="The rabbitmq source: the durable queue of JSON intents (it must exist). "
        "A bad message is rejected without requeue: dead-lettered where the queue has a "
        "dead-letter exchange, dropped (as an ack would) where it has none, after it is "
        "recorded in the quarantine.",
    )
    rabbitmq_exchange: str | None = Field(
        None,
        max_length=255,
        description="The rabbitmq target: the exchange each message is published to (it must "
        "exist), routing key = the message's kind, message_id = its message_id, persistent, "
        "mandatory, with publisher confirms; a message no queue is bound for is quarantined "
        "unroutable.",
    )
    rabbitmq_prefetch: int = Field(
        100,
        ge=1,
        le=65_535,
        description="The rabbitmq source: most messages delivered and not yet acknowledged.",
    )
    redis_url: str | None = Field(
        None,
        description="The redis source: redis://[:password@]host:6379/0 (rediss:// for TLS). "
        "Its password is never logged.",
    )
    redis_stream: str | None = Field(
        None, description="The redis source: the stream whose entries carry intents (field intent)."
    )
    redis_group: str = Field(
        "exchange",
        min_length=1,
        description="The redis source: the consumer group (created, from the stream's start, "
        "when missing); each worker reads as a consumer named by its worker id.",
    )
    redis_min_idle: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: an entry another consumer read and left unacknowledged this long "
        "(a dead worker) is claimed and staged.",
    )

    @field_validator("redis_min_idle", mode="before")
    @classmethod
    def _broker_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @model_validator(mode="after")
    def _brokers(self) -> Settings:
        missing: list[str] = []
        if self.source == "rabbitmq":
            missing += [
                v
                for v, x in (
                    ("EXCHANGE_RABBITMQ_URL", self.rabbitmq_url),
                    ("EXCHANGE_RABBITMQ_QUEUE", self.rabbitmq_queue),
                )
                if not x
            ]
        if self.source == "redis":
            missing += [
                v
                for v, x in (
                    ("EXCHANGE_REDIS_URL", self.redis_url),
                    ("EXCHANGE_REDIS_STREAM", self.redis_stream),
                )
                if not x
            ]
        if missing:
            raise ValueError(f"EXCHANGE_SOURCE={self.source} needs {', '.join(missing)}")
        if self.target == "rabbitmq":
            missing = [
                v
                for v, x in (
                    ("EXCHANGE_RABBITMQ_URL", self.rabbitmq_url),
                    ("EXCHANGE_RABBITMQ_EXCHANGE", self.rabbitmq_exchange),
                )
                if x is None or (v == "EXCHANGE_RABBITMQ_URL" and not x)
            ]
            if missing:
                raise ValueError(f"EXCHANGE_TARGET=rabbitmq needs {', '.join(missing)}")
        return self

    def broker_secrets(self) -> list[str]:
        """The passwords the brokers' URLs carry."""
        return url_secrets(self.rabbitmq_url) + url_secrets(self.redis_url)

    # -- notifications to the operators (issue 16 item 6): off unless a channel is set -------
    notify_every: float = Field(
        3600.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: at most one notification to the operators per this period, for "
        "all workers and serve processes sharing the database together. A new quarantine entry "
        "or a stop of delivery is told at once when nothing was told in the last period, "
        "else when the period ends.",
    )
    notify_stalled_after: float = Field(
        900.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: delivery counts as stopped when work has waited this long and no "
        "worker has reported for this long (seen by exchange serve and exchange notify --once, "
        "not by a worker, which is itself alive).",
    )
    notify_smtp_host: str | None = Field(
        None,
        description="E-mail notifications: the SMTP server; unset: no e-mail. Needs "
        "notify_smtp_from and notify_smtp_to.",
    )
    notify_smtp_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="SMTP port; unset: 587 for starttls, 465 for tls, 25 for none.",
    )
    notify_smtp_security: Literal["starttls", "tls", "none"] = Field(
        "starttls",
        description="starttls (plain connection upgraded with STARTTLS, required), tls (TLS "
        "from the first byte, port 465) or none (plain, refused with a password unless the "
        "server is on loopback). The server's certificate is always verified.",
    )
    notify_smtp_ca_bundle: Path | None = Field(
        None,
        description="A PEM file of the certificate authorities trusted for the SMTP server's "
        "certificate instead of the default ones (a company CA). Verification cannot be "
        "turned off.",
    )
    notify_smtp_user: str | None = Field(
        None, description="SMTP login; unset: no login (a relay that trusts the host)."
    )
    notify_smtp_password: SecretStr | None = Field(
        None, description="SMTP password (never logged or printed)."
    )
    notify_smtp_password_file: Path | None = Field(
        None, description="A file holding the SMTP password; wins over notify_smtp_password."
    )
    notify_smtp_from: str | None = Field(None, description="The sender address of the e-mail.")
    notify_smtp_to: list[str] = Field(
        default_factory=list,
        description='Addresses the e-mail goes to, e.g. ["ops@shop.example"].',
    )
    notify_telegram_token: SecretStr | None = Field(
        None,
        description="Telegram notifications: the bot's token (from @BotFather); unset: no "
        "Telegram. It travels in the URL's path, and is masked in every log line and error.",
    )
    notify_telegram_token_file: Path | None = Field(
        None, description="A file holding the bot's token; wins over notify_telegram_token."
    )
    notify_telegram_chat_id: str | None = Field(
        None,
        description="The chat (or group, or channel) the bot writes to: its numeric id or "
        "@channelname.",
    )
    notify_telegram_api_url: str = Field(
        "https://api.telegram.org",
        description="The Bot API's base URL (a local Bot API server, or a simulated one in "
        "tests). http:// only for loopback.",
    )
    workbench_url: str | None = Field(
        None,
        description="The workbench's address as the operators open it (e.g. "
        "https://exchange.shop.local:8443), put into notifications; unset: not mentioned.",
    )

    @field_validator("notify_every", "notify_stalled_after", mode="before")
    @classmethod
    def _notify_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("notify_telegram_api_url", "workbench_url")
    @classmethod
    def _notify_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise ValueError("must be an http(s) URL with a host and no user:password@")
        return value.rstrip("/")

    @field_validator("notify_smtp_host", "notify_smtp_from", "notify_telegram_chat_id")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("notify_smtp_to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return _distinct_text(value)

    @model_validator(mode="after")
    def _notify_channels(self) -> Settings:
        if self.notify_telegram_api_url is None:
            self.notify_telegram_api_url = "https://api.telegram.org"
        api = urlsplit(self.notify_telegram_api_url)
        if api.scheme == "http" and not is_loopback(api.hostname):
            raise ValueError(
                "EXCHANGE_NOTIFY_TELEGRAM_API_URL: plain http:// would send the bot's token "
                "unencrypted; use https:// (http:// only for 127.0.0.0/8, ::1 and localhost)"
            )
        if self.notify_smtp_host is not None:
            missing = [
                name
                for name, value in (
                    ("EXCHANGE_NOTIFY_SMTP_FROM", self.notify_smtp_from),
                    ("EXCHANGE_NOTIFY_SMTP_TO", self.notify_smtp_to),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"EXCHANGE_NOTIFY_SMTP_HOST is set: set {' and '.join(missing)}")
            has_password = (
                self.notify_smtp_password is not None or self.notify_smtp_password_file is not None
            )
            if (
                self.notify_smtp_security == "none"
                and has_password
                and not is_loopback(self.notify_smtp_host)
            ):
                raise ValueError(
                    f"EXCHANGE_NOTIFY_SMTP_SECURITY=none to {self.notify_smtp_host} would send "
                    "the SMTP password unencrypted; use starttls or tls"
                )
        telegram = self.notify_telegram_token is not None or (
            self.notify_telegram_token_file is not None
        )
        if telegram and not self.notify_telegram_chat_id:
            raise ValueError(
                "EXCHANGE_NOTIFY_TELEGRAM_TOKEN is set: set EXCHANGE_NOTIFY_TELEGRAM_CHAT_ID "
                "(the chat the bot writes to)"
            )
        return self

    def notify_smtp_tls(self) -> ssl.SSLContext:
        """The context that verifies the SMTP server's certificate: against
        EXCHANGE_NOTIFY_SMTP_CA_BUNDLE when set, else the default CAs."""
        if self.notify_smtp_ca_bundle is None:
            return ssl.create_default_context()
        try:
            return tls_context(self.notify_smtp_ca_bundle)
        except ValueError as exc:
            raise ConfigurationError(f"EXCHANGE_NOTIFY_SMTP_CA_BUNDLE: {exc}") from None

    def notify_smtp_port_in_use(self) -> int:
        """The SMTP port: the one set, or the usual one of the security chosen."""
        if self.notify_smtp_port is not None:
            return self.notify_smtp_port
        return {"starttls": 587, "tls": 465, "none": 25}[self.notify_smtp_security]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlWithoutBom(settings_cls))

    @field_validator("database_url", "staging_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = make_url(value)
        except ArgumentError:
            raise ValueError("not a database URL (e.g. sqlite:///exchange.db)") from None
        if url.get_backend_name() not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql"
            )
        return value

    @field_validator("site_url")
    @classmethod
    def _site_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()  # a trailing CR of an env file written on Windows
        if value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if not value.isprintable() or any(char.isspace() for char in value):
            raise ValueError("must not hold spaces or control characters")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError:
            raise ValueError("is not a URL (e.g. https://shop.example.com)") from None
        if "@" in parts.netloc:
            # Never echoed: the part before "@" is a password more often than not.
            raise ValueError(
                "must not hold a user name or password (user:password@host): the site is "
                "authenticated by EXCHANGE_SITE_TOKEN or EXCHANGE_SITE_TOKEN_FILE; remove them "
                "from the URL"
            )
        if not parts.hostname:
            raise ValueError("has no host name (e.g. https://shop.example.com)")
        if parts.query or parts.fragment or value.endswith(("?", "#")):
            raise ValueError("must be the site's base URL, without ?query or #fragment")
        return value.rstrip("/")

    @field_validator("woo_url", "bitrix_url")
    @classmethod
    def _shop_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host (e.g. https://shop.example.com)")
        if "@" in parts.netloc:
            raise ValueError("must not hold a user name or password (user:password@host)")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ValueError(
                f"plain http:// to {parts.hostname} would send the credentials unencrypted; "
                "use https:// (http:// is accepted only for 127.0.0.0/8, ::1 and localhost)"
            )
        return value.rstrip("/")

    @field_validator("log_format", mode="before")
    @classmethod
    def _log_format(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return upper

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: dict[str, Policy]) -> dict[str, Policy]:
        for kind, policy in value.items():
            if not kind or len(kind) > 64 or not kind.isprintable() or kind != kind.strip():
                raise ValueError(
                    f"kind {kind!r} must be 1 to 64 printable characters, without surrounding "
                    "spaces"
                )
            if kind.startswith("financial") and policy is not Policy.STRICT:
                raise ValueError(
                    f"kind {kind!r} is financial and can never be coalesced: use policy 'strict'"
                )
        return value

    @field_validator("site_ca_bundle", "notify_smtp_ca_bundle")
    @classmethod
    def _site_ca_bundle(cls, value: Path | None) -> Path | None:
        if value is not None:
            tls_context(value)  # read now, so that a bad file stops the service at start
        return value

    @model_validator(mode="after")
    def _token_file(self) -> Settings:
        # Read now, so that a token that cannot work stops every command at start; a file that
        # is absent or unreadable is reported by `check` and `run` (token()).
        if self.site_token_file is None:
            return self
        try:
            data = self.site_token_file.read_bytes()
        except OSError:
            return self
        source = "EXCHANGE_SITE_TOKEN_FILE"
        clean_token(secret_file_text(data, source), source)  # ValueError: refused
        return self

    @model_validator(mode="after")
    def _secret_lengths(self) -> Settings:
        # Read now (the _file twins too): a weak secret stops every command at start, naming
        # the setting, never the value. A file that cannot be read is reported where it is used.
        for name in (*_REFUSED_SHORT, *_WARNED_SHORT, "site_token"):
            try:
                value = self.token() if name == "site_token" else self.secret(name)
            except ConfigurationError:
                continue
            if value is None or len(value) >= MIN_SECRET_LENGTH:
                continue
            variable = _variable(name, from_file=getattr(self, f"{name}_file") is not None)
            if name in _REFUSED_SHORT:
                raise ValueError(
                    f"{variable} is shorter than {MIN_SECRET_LENGTH} characters: choose a "
                    "longer one"
                )
            log.warning(
                "%s is shorter than %d characters: ask the shop for a longer one",
                variable,
                MIN_SECRET_LENGTH,
            )
        return self

    @model_validator(mode="after")
    def _target_kinds(self) -> Settings:
        # Contract 10: bitrix and woocommerce take price messages only. Unset, the kinds are
        # {"price": latest-wins} for them; set, any other kind is refused at start.
        if self.target in ("api", "rabbitmq"):  # every kind (contract 12 for rabbitmq)
            return self
        if "kinds" not in self.model_fields_set:
            self.kinds = {"price": Policy.LATEST_WINS}
            return self
        others = sorted(kind for kind in self.kinds if kind != "price")
        if others:
            raise ValueError(
                f"EXCHANGE_KINDS: the {self.target} target takes price messages only, not "
                f"{', '.join(others)}"
            )
        return self

    @model_validator(mode="after")
    def _delays(self) -> Settings:
        if self.retry_base_delay > self.retry_max_delay:
            raise ValueError("EXCHANGE_RETRY_BASE_DELAY must not exceed EXCHANGE_RETRY_MAX_DELAY")
        return self

    @model_validator(mode="after")
    def _plain_http(self) -> Settings:
        if not self.site_url or not self.site_url.startswith("http://") or self.site_allow_http:
            return self
        host = urlsplit(self.site_url).hostname
        if not is_loopback(host):
            raise ValueError(
                f"EXCHANGE_SITE_URL: plain http:// to {host or 'an empty host'} would send "
                "the token unencrypted; use https://, or set EXCHANGE_SITE_ALLOW_HTTP=true "
                "(http:// is accepted without it only for 127.0.0.0/8, ::1 and localhost)"
            )
        return self

    # -- derived values -------------------------------------------------------------------

    def token(self) -> str | None:
        """The site token: from EXCHANGE_SITE_TOKEN_FILE (read now, so that a replaced file is
        seen) or EXCHANGE_SITE_TOKEN. ConfigurationError (never holding the token) when the file
        cannot be read or holds no usable token; ValueError is never raised."""
        if self.site_token_file is not None:
            source = "EXCHANGE_SITE_TOKEN_FILE"
            try:
                return clean_token(read_secret_file(self.site_token_file, source), source)
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from None
        return self.site_token.get_secret_value() if self.site_token else None

    def secrets(self) -> list[str]:
        """Every value that must never be shown: the site token (as set and as read from its
        file) and the database passwords (userinfo and query parameters). Masked by value in
        every output, in any quoting (``secret_forms``)."""
        found: list[str] = []
        if self.site_token is not None:
            found.append(self.site_token.get_secret_value())
        if self.site_token_file is not None:
            with contextlib.suppress(ConfigurationError):
                found.append(self.token() or "")
        for url in (self.database_url, self.staging_url):
            found += url_secrets(url)
        found += self.broker_secrets()
        for name in (
            "onec_password",  # exchange serve's
            "intake_token",
            "http_secret_key",
            "woo_key",  # the targets'
            "woo_secret",
            "bitrix_password",
            "notify_smtp_password",  # the operators' notifications'
            "notify_telegram_token",
        ):
            with contextlib.suppress(ConfigurationError):
                found.append(self.secret(name) or "")
        return [secret for secret in dict.fromkeys(found) if secret]

    def secret(self, name: str) -> str | None:
        """A secret setting (``onec_password``, ``intake_token``, ``http_secret_key``): its
        ``_file`` twin wins; empty means unset. Raises ConfigurationError naming the file's
        variable when it cannot be read, never showing a value."""
        path = getattr(self, f"{name}_file")
        if path is not None:
            try:
                return path.read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                variable = _variable(name, from_file=True)
                raise ConfigurationError(f"{variable} cannot be read: {exc.strerror}") from None
        value: SecretStr | None = getattr(self, name)
        return value.get_secret_value() or None if value is not None else None

    def http_plain_refusal(self) -> str | None:
        """Why serve must not listen with these settings (contract 9), or None."""
        if (self.http_tls_cert is None) != (self.http_tls_key is None):
            return "EXCHANGE_HTTP_TLS_CERT and EXCHANGE_HTTP_TLS_KEY must be set together"
        try:  # the name the server will bind: one that does not resolve is refused here
            socket.getaddrinfo(self.http_host, self.http_port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            return (
                f"EXCHANGE_HTTP_HOST={self.http_host} cannot be resolved ({reason}): write an "
                "address (127.0.0.1, ::1, 0.0.0.0) or a host name this machine resolves"
            )
        if self.http_tls_cert is not None or self.http_behind_proxy:
            return None
        if is_loopback(self.http_host):
            return None
        return (
            f"EXCHANGE_HTTP_HOST={self.http_host} is not loopback: plain HTTP would carry the "
            "1C password and the intake token unencrypted; set EXCHANGE_HTTP_TLS_CERT and "
            "EXCHANGE_HTTP_TLS_KEY, or EXCHANGE_HTTP_BEHIND_PROXY=true when a proxy "
            "terminates TLS"
        )

    def site_tls(self) -> ssl.SSLContext | None:
        """The context that verifies the site's certificate against EXCHANGE_SITE_CA_BUNDLE;
        None: the default CAs. Either way the certificate is verified: there is no way off."""
        if self.site_ca_bundle is None:
            return None
        try:
            return tls_context(self.site_ca_bundle)
        except ValueError as exc:  # the file went away or changed since the start
            raise ConfigurationError(f"EXCHANGE_SITE_CA_BUNDLE: {exc}") from None

    @property
    def live_within(self) -> float:
        """A worker is live while its last report is younger than this many seconds (contract
        6): a live worker reports at least every poll and renews its lease every third of it,
        so a longer silence is a worker gone, never one between cycles."""
        return max(self.lease_seconds, 3 * self.poll_interval)

    @property
    def policies(self) -> KindPolicies:
        """The configured kinds and their policies, as the queue takes them."""
        return KindPolicies.of(self.kinds)


class _TomlWithoutBom(TomlConfigSettingsSource):
    """The TOML file, read as UTF-8 with a byte order mark dropped: Notepad on Windows writes
    one, and tomllib refuses it ("Invalid statement at line 1, column 1")."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        with file_path.open(mode="rb") as toml_file:
            data = toml_file.read()
        return tomllib.loads(data.decode("utf-8-sig"))


def _variable(name: str, *, from_file: bool = False) -> str:
    """The environment variable of a setting: ``onec_password`` -> ``EXCHANGE_1C_PASSWORD``."""
    return "EXCHANGE_" + name.replace("onec_", "1c_").upper() + ("_FILE" if from_file else "")


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost: a site on this machine, where plain http:// is safe."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_context(ca_bundle: Path) -> ssl.SSLContext:
    """A verifying TLS context that trusts the CAs in ``ca_bundle`` (PEM) and no others.

    Raises ValueError with one line when the file cannot be used.
    """
    if not ca_bundle.is_file():
        raise ValueError(f"CA bundle not found or not a file: {ca_bundle}")
    try:
        return ssl.create_default_context(cafile=str(ca_bundle))
    except OSError as exc:  # ssl.SSLError is an OSError too: not PEM, no certificate
        reason = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
        raise ValueError(f"CA bundle {ca_bundle} cannot be used: {reason}") from None


def safe_url(url: str) -> str:
    """A database URL fit for a log or an error message: the password masked, in the userinfo
    and in the query (``?password=…``, ``sslpassword=…``)."""
    try:
        parsed: URL = make_url(url)
    except ArgumentError:
        return "<invalid URL>"
    secret_keys = [key for key in parsed.query if _SECRET_QUERY_KEY.search(key)]
    if not secret_keys:
        return parsed.render_as_string(hide_password=True)
    marker = "EXCHANGEMASKEDVALUE"
    query = {**parsed.query, **dict.fromkeys(secret_keys, marker)}
    shown = parsed.set(query=query).render_as_string(hide_password=True)
    return shown.replace(marker, SECRET_MASK)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings, or raise ConfigurationError with one line naming what is wrong."""
    path = config_file or (
        Path(os.environ["EXCHANGE_CONFIG"]) if os.environ.get("EXCHANGE_CONFIG") else None
    )
    if path is not None and not path.is_file():
        raise ConfigurationError(f"configuration file not found: {path}")
    cls: type[Settings] = Settings
    if path is not None:
        cls = type(
            "FileSettings",
            (Settings,),
            {"model_config": SettingsConfigDict(**{**Settings.model_config, "toml_file": path})},
        )
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except SettingsError as exc:  # a value that is not even parseable (EXCHANGE_KINDS=x)
        raise ConfigurationError(describe_settings_error(exc)) from None
    except ValueError as exc:  # a TOML file that does not parse
        raise ConfigurationError(f"configuration file {path}: {exc}") from None


def describe_settings_error(exc: Exception) -> str:
    text = str(exc)
    match = re.search(r'field "([a-z_]+)"', text)
    name = f"EXCHANGE_{match.group(1).upper()}" if match else "the configuration"
    return f"invalid configuration: {name}: cannot be read (expected JSON for tables/lists)"


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if not where:  # a rule across fields names its variables itself
            parts.append(message)
            continue
        name = f"EXCHANGE_{where.split('.')[0].upper()}"
        if "." in where:
            name += f" ({where.split('.', 1)[1]})"
        parts.append(f"{name}: {message}")
    return "invalid configuration: " + "; ".join(parts)


def onec_folder(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """The 1C exchange's folder: ``EXCHANGE_1C_DIR``; when it names none, never a predictable
    name in the shared temporary folder (another user could make it first and read or replace
    the uploads): under systemd, ``$STATE_DIRECTORY/1c`` (``StateDirectory=`` in the unit); else
    beside a SQLite database (``exchange.db`` -> ``exchange-1c``); else the user's cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache``, ``%LOCALAPPDATA%`` on Windows) ``/exchange/1c``."""
    if settings.onec_dir is not None:
        return settings.onec_dir
    state = environ.get("STATE_DIRECTORY", "").split(":")[0]  # systemd lists several with ":"
    if state:
        return Path(state) / "1c"
    url = make_url(settings.database_url)
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database and database != ":memory:":
        path = Path(database.removeprefix("file:").partition("?")[0])
        if path.name:
            return path.parent / f"{path.stem}-1c"
    if sys.platform == "win32" and environ.get("LOCALAPPDATA"):
        cache = Path(environ["LOCALAPPDATA"])
    else:
        cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "exchange" / "1c"
