"""exchange serve (contract 9): where it listens, TLS, the 1C exchange, the JSON intake."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr


class ServeSettings(BaseModel):
    """EXCHANGE_HTTP_*, EXCHANGE_1C_*, EXCHANGE_INTAKE_*."""

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
        description="Password of 1c_user. Never logged or printed. Unset: the exchange is "
        "closed. A new password (or user) ends every 1C session opened under the old one.",
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
        description="Most intents one POST /api/v1/intents (or a broker's message) may carry "
        "(413 beyond); a body may also hold 256 arrays and objects and 1024 values per intent "
        "(at least 64 intents' worth), counted before it is parsed.",
    )
