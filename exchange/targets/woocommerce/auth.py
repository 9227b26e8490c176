"""How the WooCommerce target authenticates (contract 10, EXCHANGE_WOO_AUTH).

WooCommerce (``WC_REST_Authentication::authenticate``, woocommerce/woocommerce
plugins/woocommerce/includes/class-wc-rest-authentication.php) tries
``perform_basic_authentication`` only where PHP sees HTTPS (``is_ssl()``): HTTP Basic, or the
key and secret as ``consumer_key``/``consumer_secret`` query parameters; when that found no user
it goes on to ``perform_oauth_authentication`` whatever the scheme, so OAuth 1.0a one-legged
(the signature in the query, the secret never sent) is accepted over https:// as over http://;
``check_oauth_signature`` builds its base string with ``is_ssl() ? 'https' : 'http'``, so
behind a proxy that ends TLS without telling PHP the signature must be for http://. The schemes:

    basic    Authorization: Basic (https:// only)
    query    ?consumer_key=…&consumer_secret=… (https:// only; only when EXCHANGE_WOO_AUTH=query
             asks for it: the secret lands in the shop's access log and every proxy's)
    oauth1   OAuth 1.0a, HMAC-SHA256, signed for the URL's scheme; over https:// also signed as
             http:// (what the shop computes when PHP does not see the HTTPS a proxy ended)
    auto     over http:// oauth1 only (the others would send the secret in clear); over https://
             basic, then oauth1 (signed for https://, then for http://); never the query form

A host that drops the ``Authorization`` header (CGI/FastCGI) needs no query form: OAuth 1.0a
travels in the query without the secret.

The signature comes from oauthlib (RFC 5849's base string and parameter normalisation, kept by
the maintainers of requests-oauthlib), not from our own code: the normalisation is where a
signature goes wrong, and WooCommerce follows the RFC there (``check_oauth_signature``).

What worked is remembered per URL and key, in this process's memory only (a restart finds it
again with at most two extra requests, none of them carrying the secret in the URL); a 401 that
says the shop saw no key sends the target through the other schemes again.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
from typing import Literal

import httpx
from oauthlib.oauth1 import SIGNATURE_HMAC_SHA256, SIGNATURE_TYPE_QUERY, Client

# oauthlib writes every signature's base string and parameters (the consumer key) at DEBUG:
# never wanted, whatever level the service logs at.
logging.getLogger("oauthlib").setLevel(logging.WARNING)

AuthSetting = Literal["auto", "basic", "query", "oauth1"]
# "oauth1-http": OAuth 1.0a signed for http:// while the URL is https:// (see above).
Scheme = Literal["basic", "query", "oauth1", "oauth1-http"]

# The 401 codes WooCommerce answers after it found and judged the key (its secret, its
# signature, its permissions): another scheme would carry the same key to the same verdict.
KEY_JUDGED = frozenset(
    {"woocommerce_rest_authentication_error", "woocommerce_rest_authentication_missing_parameter"}
)

_worked: dict[tuple[str, str], Scheme] = {}
_worked_lock = threading.Lock()


def candidates(url: str, setting: AuthSetting) -> tuple[Scheme, ...]:
    https = url.lower().startswith("https://")
    if setting == "oauth1" or (setting == "auto" and not https):
        return ("oauth1", "oauth1-http") if https else ("oauth1",)
    if setting == "auto":
        # Never "query" here: the secret in a URL is written to the shop's access log.
        return ("basic", "oauth1", "oauth1-http")
    return (setting,)


def _slot(url: str, key: str) -> tuple[str, str]:
    # The key's digest, not the key: the table must not be a second copy of a credential.
    return url, hashlib.sha256(key.encode()).hexdigest()[:16]


def ordered(url: str, key: str, setting: AuthSetting) -> list[Scheme]:
    """The schemes to try, the one that worked last for this URL and key first."""
    schemes = list(candidates(url, setting))
    with _worked_lock:
        known = _worked.get(_slot(url, key))
    if known in schemes:
        schemes.remove(known)
        schemes.insert(0, known)
    return schemes


def remember(url: str, key: str, scheme: Scheme) -> None:
    with _worked_lock:
        _worked[_slot(url, key)] = scheme


def forget(url: str, key: str) -> None:
    with _worked_lock:
        _worked.pop(_slot(url, key), None)


def sign(
    scheme: Scheme,
    request_url: httpx.URL,
    method: str,
    key: str,
    secret: str,
) -> tuple[httpx.URL, dict[str, str]]:
    """The URL and headers that carry the key by ``scheme``."""
    if scheme == "basic":
        token = base64.b64encode(f"{key}:{secret}".encode()).decode()
        return request_url, {"Authorization": f"Basic {token}"}
    if scheme == "query":
        return request_url.copy_merge_params({"consumer_key": key, "consumer_secret": secret}), {}
    signed_for = request_url.copy_with(scheme="http") if scheme == "oauth1-http" else request_url
    client = Client(
        key,
        client_secret=secret,
        signature_method=SIGNATURE_HMAC_SHA256,
        signature_type=SIGNATURE_TYPE_QUERY,
    )
    # The JSON body is not signed: WooCommerce signs $_GET and $_POST, and $_POST is empty for
    # a JSON body.
    signed, _, _ = client.sign(str(signed_for), method)  # type: ignore[arg-type]
    url = httpx.URL(signed)
    return (url.copy_with(scheme=request_url.scheme) if scheme == "oauth1-http" else url), {}


def describe(scheme: Scheme) -> str:
    return {
        "basic": "HTTP Basic",
        "query": "the key in the query (consumer_key)",
        "oauth1": "OAuth 1.0a",
        "oauth1-http": "OAuth 1.0a signed for http:// (PHP does not see the proxy's HTTPS)",
    }[scheme]
