"""Which pause it is (issue 34 item 4): a site's refusal that paused delivery, named by what a
person must mend, so that ``status``, the page, the notice and ``run``'s last line say what it
is and whom to ask in the target's own words (``ops/attention.py`` holds the words).

Pure: the verdict's facts and the target's kind in, a ``PauseCause`` out.
"""

from __future__ import annotations

from enum import StrEnum

from exchange.domain.verdicts import Classification

TLS_ERROR = "TLSError"  # targets/wire.py's error_class of an untrusted certificate
SETTING_MISSING = "SettingMissing"  # error_class: the target's key or login is not configured
NO_REST_API = "NoRestApi"  # WooCommerce's error_class: no REST API at the configured address
ADDRESS_REFUSED = "AddressRefused"  # WooCommerce's: the URL is not the shop's home address
# The 1C-Bitrix target's: the service's own database did not give the latest known prices of the
# other price types, so the package is not sent (it would delete them at the site).
KNOWN_PRICES_UNREAD = "KnownPricesUnread"
# A marketplace's (contract 14): the account's API key refused, or it lacks the role that may
# write prices (Ozon's 404 code 5, "missing a required role").
MARKETPLACE_KEY_REFUSED = "MarketplaceKeyRefused"
# Ozon's (research §1.2): Ozon refused the Client-Id (a 400 "Client-Id header value should be
# positive integer"): the channel's ozon_client_id, not the key, is to mend.
OZON_CLIENT_ID_REFUSED = "OzonClientIdRefused"
# Ozon's (research §1.2): 403 "Offer not signed", the seller has not accepted Ozon's current
# offer (оферта): no key mends it, the seller accepts the offer in the seller's account.
OZON_OFFER_NOT_SIGNED = "OzonOfferNotSigned"
# Ozon's (research §1.2): "Api-Key is restricted to specific IP addresses": the key is bound to
# addresses this server's is not among; the key's allowed addresses are to mend, not the key.
OZON_KEY_IP_RESTRICTED = "OzonKeyIpRestricted"
# Wildberries' (contract 14, research §2.2): WB refused the token (expired, withdrawn, without
# the Prices category), or the token is read-only (its claims, or WB's 401 saying so).
WB_TOKEN_REFUSED = "TokenRefused"
WB_READ_ONLY_TOKEN = "ReadOnlyToken"


class PauseCause(StrEnum):
    TOKEN = "token"  # the shop API refused the bearer token (401/403)
    WOO_KEY = "woo-key"  # WooCommerce refused the REST API key
    READ_ONLY_KEY = "read-only-key"  # reads accepted, writes refused (Read-only key, no rights)
    BITRIX_LOGIN = "bitrix-login"  # a 1C-Bitrix receiver refused the exchange's user/password
    TLS = "tls"  # the site's certificate is not trusted
    API_NOT_FOUND = "api-not-found"  # 404 on the API's root: the address
    WOO_NO_REST_API = "woo-no-rest-api"  # no WooCommerce REST API at EXCHANGE_WOO_URL
    WOO_ADDRESS = "woo-address"  # OAuth "Invalid signature": not the shop's home address
    WOO_KEY_MISSING = "woo-key-missing"  # EXCHANGE_WOO_KEY or EXCHANGE_WOO_SECRET not set
    BITRIX_LOGIN_MISSING = "bitrix-login-missing"  # EXCHANGE_BITRIX_USER/PASSWORD not set
    BROKER = "broker"  # RabbitMQ refused the user, the exchange or the publishing
    # The service's own database did not give the known prices a Bitrix offer must carry.
    KNOWN_PRICES = "known-prices"
    # A marketplace refused the account's API key or its role (contract 14): said by the one
    # marketplace whose key it was (``KEY_REFUSED_BY_TARGET``); ``marketplace-key`` itself is
    # only what a worker of an earlier version reported (its words name both).
    MARKETPLACE_KEY = "marketplace-key"
    OZON_KEY = "ozon-key"
    YM_KEY = "ym-key"
    # Wildberries refused the token, or the token may read but not write (its own advice:
    # where the seller makes a token with the Prices category and write access).
    WB_TOKEN = "wb-token"
    WB_READ_ONLY_TOKEN = "wb-read-only-token"
    # Yandex Market reads with the Api-Key but refuses its price updates: a read-only access.
    YM_READ_ONLY_KEY = "ym-read-only-key"
    # Ozon reads with the key but refuses its price updates: the key has no role that sets
    # prices (research §1.2, "missing a required role"); its role is chosen at its creation.
    OZON_READ_ONLY_KEY = "ozon-read-only-key"
    # Ozon refused the Client-Id the channel sends (research §1.2): ozon_client_id is wrong.
    OZON_CLIENT_ID = "ozon-client-id"
    # Ozon refuses every request until the seller accepts its current offer (research §1.2).
    OZON_OFFER = "ozon-offer"
    # Ozon's key is restricted to IP addresses this server's is not among (research §1.2).
    OZON_KEY_IP = "ozon-key-ip"
    OTHER = "other"  # a refusal with no words of its own: its answer is shown


# A key that reads but may not write, by target: where the key's rights are set is the
# target's own (review 32: Yandex Market's read-only key was told to see WooCommerce's REST API
# settings or Bitrix's import right). A target not listed: READ_ONLY_KEY (WooCommerce, Bitrix).
READ_ONLY_BY_TARGET: dict[str, PauseCause] = {
    "yandex-market": PauseCause.YM_READ_ONLY_KEY,
    "ozon": PauseCause.OZON_READ_ONLY_KEY,
}
# A marketplace's refused key, by target: the words name that marketplace and its own cabinet
# (the words of both, Ozon's and Yandex Market's, were said of either).
KEY_REFUSED_BY_TARGET: dict[str, PauseCause] = {
    "ozon": PauseCause.OZON_KEY,
    "yandex-market": PauseCause.YM_KEY,
}
# What the worker's pause says of such a key, around the write's refusal (worker/loop.py); the
# cause's words say it themselves, so the words quote the refusal alone (ops/attention.py).
READ_ONLY_NOTE = "the key may read but not write"


def pause_cause(target: str, answer: Classification, *, write_refused: bool) -> PauseCause:
    """What paused delivery to ``target`` (EXCHANGE_TARGET's value) on ``answer``."""
    if target == "wildberries" and (write_refused or answer.error_class == WB_READ_ONLY_TOKEN):
        return PauseCause.WB_READ_ONLY_TOKEN
    if target == "wildberries" and answer.error_class == WB_TOKEN_REFUSED:
        return PauseCause.WB_TOKEN
    if write_refused:
        return READ_ONLY_BY_TARGET.get(target, PauseCause.READ_ONLY_KEY)
    if answer.error_class == KNOWN_PRICES_UNREAD:
        return PauseCause.KNOWN_PRICES
    if answer.error_class == TLS_ERROR:
        return PauseCause.TLS
    if answer.error_class == MARKETPLACE_KEY_REFUSED:
        return KEY_REFUSED_BY_TARGET.get(target, PauseCause.MARKETPLACE_KEY)
    if answer.error_class == OZON_CLIENT_ID_REFUSED:
        return PauseCause.OZON_CLIENT_ID
    if answer.error_class == OZON_OFFER_NOT_SIGNED:
        return PauseCause.OZON_OFFER
    if answer.error_class == OZON_KEY_IP_RESTRICTED:
        return PauseCause.OZON_KEY_IP
    if answer.error_class == SETTING_MISSING:
        return PauseCause.BITRIX_LOGIN_MISSING if target == "bitrix" else PauseCause.WOO_KEY_MISSING
    if target == "woocommerce" and answer.error_class == NO_REST_API:
        return PauseCause.WOO_NO_REST_API
    if target == "woocommerce" and answer.error_class == ADDRESS_REFUSED:
        return PauseCause.WOO_ADDRESS
    if answer.http_status == 404:
        return PauseCause.API_NOT_FOUND
    if target == "rabbitmq":
        return PauseCause.BROKER
    if target == "bitrix":
        return PauseCause.BITRIX_LOGIN if answer.error_class == "BitrixAuth" else PauseCause.OTHER
    if answer.http_status in (401, 403):
        return PauseCause.WOO_KEY if target == "woocommerce" else PauseCause.TOKEN
    if target == "woocommerce" and answer.error_class in ("KeyRefused", "TransportRefused"):
        return PauseCause.WOO_KEY
    return PauseCause.OTHER
