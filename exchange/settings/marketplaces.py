"""The marketplaces' side (contract 14): what the ``ozon``, ``wildberries`` and ``yandex-market``
targets share (their API's address, the account's currency, which id names an offer, whether a
price may be rounded) and how each maps the service's price types to its own fields.

Each marketplace's credentials and own limits are its target's (beside it, in this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from exchange.settings.rules import is_loopback

# Contract 14: the marketplaces are channels of these targets, and take price messages only.
MARKETPLACE_TARGETS = ("ozon", "wildberries", "yandex-market")

OzonField = Literal["price", "old_price", "min_price"]
WbField = Literal["price"]
YmField = Literal["value", "discountBase", "minimumForBestseller"]
CLIENT_ID_MAX = 2**63 - 1  # Ozon's Client-Id: a positive int64 (research §1.2)


def _default_ozon() -> dict[str, OzonField | None]:
    return {"retail": "price"}


def _default_wb() -> dict[str, WbField | None]:
    return {"retail": "price"}


def _default_ym() -> dict[str, YmField | None]:
    return {"retail": "value"}


def api_url(value: str | None) -> str | None:
    """A marketplace API's base address as a shop's is checked (``site_url``): http(s) with a
    host, no user:password, plain http only for loopback (a simulator on this machine)."""
    if value is None or value.strip() == "":
        return None
    value = value.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL with a host (e.g. https://api-seller.ozon.ru)")
    if "@" in parts.netloc:
        raise ValueError("must not hold a user name or password (user:password@host)")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ValueError(
            f"plain http:// to {parts.hostname} would send the credentials unencrypted; "
            "use https:// (http:// is accepted only for 127.0.0.0/8, ::1 and localhost)"
        )
    if parts.query or parts.fragment:
        raise ValueError("must be the API's base address, without ?query or #fragment")
    return value.rstrip("/")


class MarketplaceSettings(BaseModel):
    """The settings the three marketplace targets share, and their price type mappings."""

    ozon_api_url: str = Field(
        "https://api-seller.ozon.ru",
        description="Ozon: the Seller API's base address. http:// only for loopback (a "
        "simulator on this machine).",
    )
    wb_api_url: str = Field(
        "https://discounts-prices-api.wildberries.ru",
        description="Wildberries: the Prices and Discounts API's base address. http:// only "
        "for loopback.",
    )
    ym_api_url: str = Field(
        "https://api.partner.market.yandex.ru",
        description="Yandex Market: the Partner API's base address. http:// only for loopback.",
    )
    currency: str = Field(
        "RUB",
        pattern=r"^[A-Z]{3}$",
        description="The marketplaces: the account's currency (ISO 4217, e.g. RUB); a price "
        "in another currency is quarantined as invalid-for-channel, never converted.",
    )
    sku_source: Literal["sku", "article"] = Field(
        "sku",
        description="The marketplaces: which id names the offer there. sku: the SKU as staged; "
        "article: 1C's Артикул of the offer, from the CommerceML the service read (an offer "
        "without one is quarantined as invalid-for-channel).",
    )
    rounding: Literal["none", "half-up", "down"] = Field(
        "none",
        description="The marketplaces: what to do with a price the marketplace cannot take as "
        "it is (kopecks where only whole roubles go, more decimals than it keeps). none: never "
        "rounded, quarantined as invalid-for-channel; half-up or down: rounded so.",
    )
    pair_settle: float = Field(
        5.0,
        ge=0,
        le=60,
        description="Ozon and Yandex Market: seconds a price taken in alone waits for 1C's "
        "other price type of its pair (a price, or an old price, whose other type comes in a "
        "row of its own; a re-post of either too), so that rows 1C writes a moment apart go "
        "in one update, never a moment of a discount 1C did not state; 0: never waits.",
    )
    ozon_price_types: dict[str, OzonField | None] = Field(
        default_factory=_default_ozon,
        description="Ozon: price_type -> the field it sets (price, old_price, min_price), e.g. "
        '{"retail": "price", "old": "old_price", "wholesale": null}. A price type not listed '
        "is quarantined as unmapped-price-type; one mapped to null (false in TOML) is left out "
        "of this channel: cancelled as not-for-this-shop. Two price types that set one field "
        "are refused at start.",
    )
    wb_price_types: dict[str, WbField | None] = Field(
        default_factory=_default_wb,
        description="Wildberries: price_type -> price (the only field sent), e.g. "
        '{"retail": "price", "old": null}. Unlisted: unmapped-price-type; null (false in '
        "TOML): not-for-this-shop.",
    )
    ym_price_types: dict[str, YmField | None] = Field(
        default_factory=_default_ym,
        description="Yandex Market: price_type -> the field it sets (value, discountBase, "
        'minimumForBestseller), e.g. {"retail": "value", "old": "discountBase"}. Unlisted: '
        "unmapped-price-type; null (false in TOML): not-for-this-shop. Two price types that "
        "set one field are refused at start, and so is a mapping that sets no value (Yandex "
        "takes discountBase and minimumForBestseller only beside it).",
    )

    ozon_client_id: str | None = Field(
        None,
        description="Ozon: the seller's Client-Id (a number up to 9223372036854775807; Seller "
        "account → Settings → Seller API).",
    )
    ozon_api_key: SecretStr | None = Field(
        None,
        description="Ozon: the Seller API key (Api-Key), with a role that may set prices; "
        "never logged. In a channel only as ozon_api_key_file.",
    )
    ozon_api_key_file: Path | None = Field(
        None,
        description="Ozon: a file holding the API key; wins over ozon_api_key. Read again when "
        "Ozon refuses the key.",
    )

    @field_validator("ozon_client_id")
    @classmethod
    def _ozon_client_id(cls, value: str | None) -> str | None:
        """Ozon reads ``Client-Id`` as a positive 64-bit number: a larger one is refused by
        every request as a 400 (research §1.2, ``code 3``), and erroneous requests may get the
        account restricted (§1.3): refused here, before any."""
        if value is None:
            return None
        if not (value.isascii() and value.isdigit() and value[0] != "0"):
            raise ValueError("must be the seller's Client-Id: a whole number above 0")
        if len(value) > len(str(CLIENT_ID_MAX)) or int(value) > CLIENT_ID_MAX:
            raise ValueError(
                f"must be at most {CLIENT_ID_MAX} (Ozon reads Client-Id as a 64-bit number "
                "and refuses a larger one); copy it from Seller account → Settings → Seller API"
            )
        return value

    @field_validator("ozon_api_url", "wb_api_url", "ym_api_url", mode="before")
    @classmethod
    def _marketplace_api_url(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError("must be an http(s) URL with a host; leave it unset for the default")
        return api_url(value) if isinstance(value, str) else value

    @field_validator("ozon_price_types", "wb_price_types", "ym_price_types", mode="before")
    @classmethod
    def _marketplace_null_in_toml(cls, value: Any) -> Any:
        """TOML has no null: ``false`` maps a price type to null (left out of the channel)."""
        if isinstance(value, dict):
            return {k: None if v is False else v for k, v in value.items()}
        return value

    @field_validator("ozon_price_types", "wb_price_types", "ym_price_types")
    @classmethod
    def _marketplace_one_price_type_per_field(
        cls, value: dict[str, str | None]
    ) -> dict[str, str | None]:
        """Two price types setting one field would overwrite each other's newer price with an
        older one (as for woo_price_fields): refused at start."""
        by_field: dict[str, list[str]] = {}
        for price_type, target_field in value.items():
            if target_field is not None:
                by_field.setdefault(target_field, []).append(price_type)
        for target_field, price_types in by_field.items():
            if len(price_types) > 1:
                names = sorted(price_types)
                quoted = ", ".join(f'"{n}"' for n in names[:-1]) + f' and "{names[-1]}"'
                raise ValueError(
                    f'price types {quoted} both set "{target_field}": map each field from one '
                    "price type (null leaves a price type out of this channel)"
                )
        return value

    @field_validator("ym_price_types")
    @classmethod
    def _ym_value_mapped(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        """Yandex Market takes an offer's price only with its ``value`` (research §3.1:
        ``price`` with ``value`` is required; "Missing price value"): without a price type
        mapped to it, every discount base and minimum would be refused and nothing would
        ever go, so such settings are refused at start."""
        if "value" not in value.values():
            raise ValueError(
                'maps no price type to "value": Yandex Market takes discountBase and '
                'minimumForBestseller only beside the price; map one, e.g. {"retail": "value"}'
            )
        return value
