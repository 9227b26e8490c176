"""The shop's side (contract 10): which target, and the settings of WooCommerce, 1C-Bitrix and
the shop API's batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator

from exchange.settings.marketplaces import MARKETPLACE_TARGETS
from exchange.settings.rules import MAX_SECONDS, _finite_seconds, is_loopback

# Contract 10: these targets take price messages only (and the marketplaces, contract 14); the
# others (api; rabbitmq, contract 12) take every kind.
PRICE_ONLY_TARGETS = ("bitrix", "woocommerce", *MARKETPLACE_TARGETS)


def kinds_taken(target: str, kinds: Iterable[str]) -> list[str]:
    """Of ``kinds``, those the target takes, in their order."""
    return [kind for kind in kinds if target not in PRICE_ONLY_TARGETS or kind == "price"]


def _default_woo_fields() -> dict[str, Literal["regular_price", "sale_price"] | None]:
    return {"retail": "regular_price"}


def _same_field(name: str) -> str:
    """The shop's field as the shop tells fields apart: WooCommerce's are fixed words; a
    Bitrix price type is found by its name (the package's Ид and Наименование, bitrix/package.py)
    in MySQL, whose default collations ignore case and trailing spaces."""
    return name.strip().casefold()


class TargetSettings(BaseModel):
    """The target chosen and each target's own settings."""

    target: Literal[
        "api", "bitrix", "woocommerce", "rabbitmq", "ozon", "wildberries", "yandex-market"
    ] = Field(
        "api",
        description="The shop's side (contract 10): api (the shop API of section 5), bitrix "
        "(1C-Bitrix's own exchange, the service acting as 1C), woocommerce (REST API v3), "
        "rabbitmq (an exchange the shop's back end reads, contract 12), or a marketplace "
        "(contract 14): ozon, wildberries, yandex-market. All but api and rabbitmq take price "
        "messages only.",
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
        "(consumer_key and consumer_secret in the query: the secret lands in the shop's access "
        "log) work only where PHP sees HTTPS; oauth1 is OAuth 1.0a one-legged (the secret never "
        "travels; WooCommerce takes it over https:// too). auto: over http:// oauth1 only; over "
        "https:// basic, then oauth1, never query; what worked remembered (in memory) per URL "
        "and key and tried again after a 401.",
    )
    woo_price_fields: dict[str, Literal["regular_price", "sale_price"] | None] = Field(
        default_factory=_default_woo_fields,
        description="WooCommerce: price_type -> the product field it sets, e.g. "
        '{"retail": "regular_price", "sale": "sale_price", "wholesale": null}. A price type '
        "not listed is quarantined as unmapped-price-type; one mapped to null (false in TOML) "
        "is left out of this shop on purpose: cancelled as not-for-this-shop. Two price types "
        "that set one field are refused at start.",
    )
    bitrix_url: str | None = Field(
        None,
        description="1C-Bitrix: the exchange URL, e.g. "
        "https://shop.example.com/bitrix/admin/1c_exchange.php, exactly as 1C's administrator "
        "would type it (a query included: ?type=…&mode=… is appended to it as 1C appends it). "
        "http:// only for loopback.",
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
    bitrix_price_types: dict[str, str | None] = Field(
        default_factory=dict,
        description="1C-Bitrix: price_type -> the site's price type name, e.g. "
        '{"retail": "Розничная", "purchase": null}. A price type not listed is quarantined as '
        "unmapped-price-type; one mapped to null (false in TOML) is left out of this shop on "
        "purpose: cancelled as not-for-this-shop. Two price types mapped to one site price "
        "type (names compared ignoring case and surrounding spaces) are refused at start.",
    )
    bitrix_max_import_steps: int = Field(
        200,
        ge=1,
        le=100_000,
        description="1C-Bitrix: most import requests answered progress before the package "
        "counts as a temporary failure (an import that never ends).",
    )
    ym_business_id: int | None = Field(
        None,
        ge=1,
        description="Yandex Market: the cabinet's (business's) id, as the cabinet's address "
        "shows it (…/business/<id>/…); prices are set for all its stores.",
    )
    ym_api_key: SecretStr | None = Field(
        None,
        description="Yandex Market: the cabinet's Api-Key token with the «Pricing» or «All "
        "methods» access (never logged).",
    )
    ym_api_key_file: Path | None = Field(
        None, description="Yandex Market: a file holding the Api-Key; wins over ym_api_key."
    )
    ym_offers_per_minute: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description="Yandex Market: the offers a minute the price methods take (Yandex counts "
        "offers, not requests: 10 000); the target's pace keeps under it, its read-backs too.",
    )
    ym_parallel: int = Field(
        4,
        ge=1,
        le=64,
        description="Yandex Market: the most requests at once to the cabinet (Yandex allows 4); "
        "a refusal for parallel requests lowers it for every worker of the business while they "
        "keep sending (it lapses 10 minutes after the last request).",
    )
    ym_apply_timeout: float = Field(
        600.0,
        gt=0,
        description="Yandex Market: seconds after Yandex accepted a price within which its "
        "read-back must show it; later, a price in Yandex's price quarantine is withheld, "
        "any other is sent again (a temporary failure).",
    )
    wb_token: SecretStr | None = Field(
        None,
        description="Wildberries: the seller's API token (a Personal or Service token with the "
        "«Цены и скидки» category, not read-only); never logged.",
    )
    wb_token_file: Path | None = Field(
        None, description="Wildberries: a file holding the API token; wins over wb_token."
    )
    wb_catalogue_refresh: float = Field(
        900.0,
        gt=0,
        le=MAX_SECONDS,
        description="Wildberries: seconds between rebuilds of the vendor code -> nmID map from "
        "WB's catalogue: no price goes out on a map older than this (it is read again first), "
        "nor is it read again sooner for a vendor code missing from it (WB refusing an nmID, or "
        "a task's line naming another vendor code, rebuilds it at once); a price for a vendor "
        "code missing meanwhile waits for the next rebuild, then is unknown-sku if still "
        "missing.",
    )
    site_batch_size: int = Field(
        1,
        ge=1,
        le=1000,
        description="Most messages per request to the batch API (POST /api/v1/updates:batch, "
        "contract 5b); 1 sends one request per message. A site that answers 404 there gets "
        "single requests.",
    )

    @field_validator("wb_catalogue_refresh", mode="before")
    @classmethod
    def _wb_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("woo_price_fields", "bitrix_price_types", mode="before")
    @classmethod
    def _null_in_toml(cls, value: Any) -> Any:
        """TOML has no null: ``false`` there maps a price type to null (left out of the shop,
        contract 10). ``true`` means nothing and stays an error."""
        if isinstance(value, dict):
            return {k: None if v is False else v for k, v in value.items()}
        return value

    @field_validator("woo_price_fields", "bitrix_price_types")
    @classmethod
    def _one_price_type_per_field(
        cls, value: dict[str, str | None], info: ValidationInfo
    ) -> dict[str, str | None]:
        """Two price types that set one shop field would overwrite each other there: the older
        price of one over the newer of the other (each has its own versions, contract 15 "one
        (sku, price type), one aggregate"), so the shop ends with whichever went last. Refused
        at start; a price type left out of this shop (null) sets nothing."""
        by_field: dict[str, list[str]] = {}
        for price_type, target_field in value.items():
            if target_field is not None:
                by_field.setdefault(_same_field(target_field), []).append(price_type)
        for price_types in by_field.values():
            if len(price_types) > 1:
                names = sorted(price_types)
                quoted = ", ".join(f'"{n}"' for n in names[:-1]) + f' and "{names[-1]}"'
                shown = value[names[0]]
                raise ValueError(
                    f'price types {quoted} both set "{shown}": the older price of one would '
                    "overwrite the newer of the other on the shop; map each field from one "
                    "price type (null leaves a price type out of this shop)"
                )
        return value

    @field_validator("ym_apply_timeout", mode="before")
    @classmethod
    def _ym_seconds(cls, value: Any) -> Any:
        return _finite_seconds(value)

    @field_validator("woo_url", "bitrix_url")
    @classmethod
    def _shop_url(cls, value: str | None, info: ValidationInfo) -> str | None:
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
        if info.field_name == "bitrix_url":
            # Kept as typed, a query or a trailing slash included: 1C appends its
            # ``?type=…&mode=…`` to the address its administrator typed, whatever it holds, and
            # receivers are set up for that (targets/bitrix/target.py, exchange_url).
            if parts.fragment or value.endswith("#"):
                raise ValueError("must not hold a #fragment (1C's query would follow it unsent)")
            return value
        return value.rstrip("/")
