"""What every target's HTTP means (contracts 5 and 10), written once: the table of statuses, the
reading of transport failures (an untrusted certificate among them), and the httpx client that
honours ``EXCHANGE_SITE_CA_BUNDLE`` and the proxy variables.

    2xx                          DELIVERED
    400 404 410 413 422          TERMINAL (quarantine http-<code>)
    401 403                      PAUSE (nobody is charged; delivery waits for the site)
    408 425 429 500 502 503 504  TEMPORARY (Retry-After honoured)
    anything else                UNKNOWN (quarantine unknown-response: never guessed temporary)
    connection errors, timeouts  TEMPORARY (result unknown when the request may have arrived)
    a certificate not trusted    PAUSE, naming the certificate error (a configuration verdict)
    https:// to a plain-http port  PAUSE, saying the port speaks HTTP (not a certificate)

A target's own differences are its parameters, said where it calls: the shop API reads a 409
first (``stale`` or "still processing"); Bitrix reads 401/403 after ``checkauth`` as a lost
session (exchange/targets/bitrix/target.py).
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from exchange.domain.pause import TLS_ERROR as TLS_ERROR
from exchange.domain.verdicts import Classification, Verdict
from exchange.secrets import SECRET_MASK, mask_pieces, mask_secrets, secret_forms
from exchange.targets.base import Pacer

# TLS_ERROR: the error_class of a failed TLS handshake (e.g. an untrusted certificate), named
# where pauses are told apart (domain/pause.py).

TERMINAL_STATUSES = frozenset({400, 404, 410, 413, 422})
PAUSE_STATUSES = frozenset({401, 403})
TEMPORARY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class StatusTable:
    """Contract 5's table of statuses; a target that reads one differently says so here."""

    terminal: frozenset[int] = TERMINAL_STATUSES
    pause: frozenset[int] = PAUSE_STATUSES
    temporary: frozenset[int] = TEMPORARY_STATUSES

    def verdict(self, status: int) -> Verdict:
        if 200 <= status < 300:
            return Verdict.DELIVERED
        if status in self.terminal:
            return Verdict.TERMINAL
        if status in self.pause:
            return Verdict.PAUSE
        if status in self.temporary:
            return Verdict.TEMPORARY
        return Verdict.UNKNOWN


STATUSES = StatusTable()


@dataclass(frozen=True, slots=True)
class TransportFailure:
    error_class: str
    detail: str
    maybe_sent: bool  # the site may have received it: the result is unknown


def httpx_failure(exc: httpx.TransportError) -> TransportFailure:
    """An httpx transport error as the service names it: nothing was sent for a connection
    that failed (a refused certificate among them, named ``TLSError``); anything later (read
    and write timeouts, resets, protocol errors) may have reached the site."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        error_class = TLS_ERROR if caused_by(exc, ssl.SSLError) else type(exc).__name__
        return TransportFailure(error_class, describe(exc), maybe_sent=False)
    return TransportFailure(type(exc).__name__, describe(exc), maybe_sent=True)


def transport_verdict(
    failure: TransportFailure, *, step: str = "", result_unknown: bool | None = None
) -> Classification:
    """A transport failure's classification. ``result_unknown``: the target's own reading of
    "may it have been applied" (Bitrix: only an ``import`` step applies anything); by default
    whether it may have been sent."""
    where = f"{step}: " if step else ""
    if failure.error_class == TLS_ERROR:
        return Classification(
            Verdict.PAUSE, f"{where}{tls_words(failure.detail)}", error_class=TLS_ERROR
        )
    unknown = failure.maybe_sent if result_unknown is None else result_unknown
    return Classification(
        Verdict.TEMPORARY,
        f"{where}{failure.error_class}: {failure.detail}",
        error_class=failure.error_class,
        result_unknown=unknown,
    )


# OpenSSL's words when the other side answers a ClientHello with plain HTTP ("HTTP/1.1 400 …"
# read as a TLS record): WRONG_VERSION_NUMBER before OpenSSL 3.2, RECORD_LAYER_FAILURE or
# PACKET_LENGTH_TOO_LONG after; HTTP_REQUEST is the reverse (a TLS server's words for HTTP).
_PLAIN_HTTP_PORT = re.compile(
    r"WRONG_VERSION_NUMBER|RECORD_LAYER_FAILURE|PACKET_LENGTH_TOO_LONG|wrong version number|"
    r"record layer failure|packet length too long"
)


def tls_words(detail: str) -> str:
    """What a failed TLS handshake means to the person who set the URL: a port that speaks
    plain HTTP (https:// to an http port: no certificate was even sent), or a certificate
    the service does not trust."""
    if _PLAIN_HTTP_PORT.search(detail):
        return (
            f"TLS: the address speaks plain HTTP, not TLS ({detail}): the URL says https:// "
            "but that port serves http://; use the shop's HTTPS port, or http:// where the "
            "service allows it (this machine only). Not a certificate problem"
        )
    return (
        f"TLS: the site's certificate is not trusted ({detail}); if a company CA signed it, "
        "set EXCHANGE_SITE_CA_BUNDLE to that CA's PEM file"
    )


def http_client(
    *,
    timeout: float,
    verify: ssl.SSLContext | None,
    transport: httpx.AsyncBaseTransport | None,
    headers: dict[str, str],
    base_url: str = "",
) -> httpx.AsyncClient:
    """The httpx client of a target: the certificate verified against ``verify``
    (settings.site_tls, from EXCHANGE_SITE_CA_BUNDLE; None: the default CAs, never off), the
    proxy variables honoured (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, as the shop API's httpx wire),
    redirects never followed (a 3xx is an answer to read)."""
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=timeout,
        transport=transport,
        verify=verify if verify is not None else True,
        follow_redirects=False,
        headers=headers,
        trust_env=True,
    )


async def paced_request(
    client: httpx.AsyncClient,
    pacer: Pacer,
    method: str,
    url: str | httpx.URL,
    *,
    ready: Callable[[], Awaitable[None]] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """One request of a target at the site's pace (contract 5c, targets/base.py ``Pacer``): its
    turn first, then the pace told what came back, the status and ``Retry-After`` as the site
    sent them (a 429 with a hosting limiter's HTML page is still a 429), or no answer.
    ``ready``: what must hold once the turn came, right before the request goes (Bitrix renews
    its exchange lock there: a hold may outlast it); what it raises ends the turn unsent. Raises
    what ``client.request`` raises."""
    sent_at = await pacer.turn()
    try:
        if ready is not None:
            await ready()
        response = await client.request(method, url, **kwargs)
    except BaseException:
        pacer.done(sent_at, None, None)
        raise
    pacer.done(sent_at, response.status_code, response.headers.get("Retry-After"))
    return response


# -- the key a site repeats ----------------------------------------------------------------------
#
# A marketplace (or a proxy, a WAF before it) may quote the request's key back in an error's text
# ("Api-Key=… is invalid"). Every word a target reads from an answer (a detail, a log line, a
# receipt, a read-back's reason) comes from the response, so the key is masked there, once, in
# every spelling ``secret_forms`` knows: what leaves the target's wire never holds it, and after
# the key file is rotated the history holds no old key the outputs no longer know to mask. The
# shop API's client does the same for its token (shop_api/client.py ``_scrub``).

# Headers that describe the bytes as they came, not as they are after masking.
_BODY_HEADERS = ("content-encoding", "content-length", "transfer-encoding")


@functools.lru_cache(maxsize=8)
def _key_forms(key: str) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    forms = tuple(secret_forms(key))
    return forms, tuple(form.encode("utf-8") for form in forms)


def _masked(text: str, forms: tuple[str, ...], key: str) -> str:
    """The key masked whole in any spelling (``mask_secrets``), then any piece of it left
    (``mask_pieces``: a part quoted, or the key run on into the next word)."""
    whole = any(form in text for form in forms)  # a substring search: cheap on a long body
    return mask_pieces(mask_secrets(text, forms) if whole else text, key)


def key_masked(response: httpx.Response, key: str | None) -> httpx.Response:
    """``response`` with ``key`` (the credential the request carried) masked in its body and
    its headers; the same response when it does not hold the key. Read once the body is read
    (a target's requests are never streamed)."""
    if not key:
        return response
    forms, byte_forms = _key_forms(key)
    content = response.content
    raw = response.headers.multi_items()
    headers = [(name, _masked(value, forms, key)) for name, value in raw]
    try:
        text: str | None = content.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        said = _masked(text, forms, key)
        in_body = said != text
        content = said.encode("utf-8") if in_body else content
    else:  # not UTF-8: the key's bytes replaced as they are
        in_body = any(form in content for form in byte_forms)
        for form in byte_forms:
            content = content.replace(form, SECRET_MASK.encode())
    if not in_body and headers == raw:
        return response
    return httpx.Response(
        response.status_code,
        headers=[(name, value) for name, value in headers if name.lower() not in _BODY_HEADERS],
        content=content,
        request=response.request,
        extensions=dict(response.extensions),
    )


def key_masked_failure(failure: TransportFailure, key: str | None) -> TransportFailure:
    """A transport failure with ``key`` masked in its words (a library may quote a header)."""
    if not key:
        return failure
    detail = _masked(failure.detail, _key_forms(key)[0], key)
    return failure if detail == failure.detail else replace(failure, detail=detail)


def caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):  # the chain httpx -> httpcore -> ssl is short; a loop is never endless
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
