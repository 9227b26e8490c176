"""The site client (contract 5): one POST per message, or per chunk of messages through the
batch API (contract 5b).

Library exceptions become ``TransportFailure`` here, at the boundary, and nothing else leaves
this module. Bodies are read with a cap. Redirects are not followed: a 3xx is an answer to
classify, not a detour.

The wire is aiohttp, called directly (``AiohttpWire``), chosen by measurement: on the 2-core
bench machine against bench/fastsite.py with 8 requests in flight (``python -m bench
--sections ceiling``), as a share of the best client in the same run (aiohttp on uvloop,
12,550 requests/s), httpx with its own transport reached 0.09, httpx over httpx-aiohttp's
transport 0.29, httpx over this module's own aiohttp transport 0.42 in an earlier run, and
aiohttp called directly with this module's checks 0.75: httpx's request/response layer cost as
much CPU as aiohttp itself. httpx is still the wire when a transport is injected (the tests'
mock transports and respx) or the environment names a proxy for the site's scheme
(``proxy_configured``: httpx honours HTTP(S)_PROXY, ALL_PROXY and NO_PROXY, aiohttp would not);
``SiteClient.wire`` says which runs. aiohttp's errors get the names and the "may it have been
sent" meaning that httpx gives the same failures, so the history and the classification do not
depend on the wire: tests/faults/test_site_wires.py runs one fault catalogue on both wires
against the site simulator, and tests/faults/test_site_faults.py runs a worker on aiohttp's.
"""

from __future__ import annotations

import functools
import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import httpx

from exchange.secrets import SECRET_MASK, clean_token, mask_secrets, secret_forms
from exchange.targets.base import OutgoingMessage as OutgoingMessage
from exchange.targets.shop_api.request import Response as Response
from exchange.targets.shop_api.request import SiteResult as SiteResult
from exchange.targets.shop_api.request import Wire
from exchange.targets.shop_api.wire_httpx import HttpxWire
from exchange.targets.wire import TLS_ERROR as TLS_ERROR  # re-exported: the checks name it
from exchange.targets.wire import TransportFailure as TransportFailure

try:  # a dependency; without it httpx's own transport is used
    from exchange.targets.shop_api.wire_aiohttp import AiohttpWire

    HAVE_AIOHTTP = True
except ImportError:  # pragma: no cover
    HAVE_AIOHTTP = False

BODY_CAP = 64 * 1024  # of one answer; a batch answer may take BODY_CAP per item
BATCH_PATH = "/api/v1/updates:batch"
# Not in contract 5: the site simulator's withholding switch (exchange/dev/sitemodel.py, a
# test device) answers here what buyers see of an update it withheld.
WITHHELD_PATH = "/api/v1/withheld"
USER_AGENT = "exchange/0.1"


# A str as JSON text, as json.dumps(..., ensure_ascii=False) writes it (the same C function).
_json_text = json.encoder.encode_basestring


def body(message: OutgoingMessage) -> bytes:
    """The contract's request body (section 5) for one message, nothing more: the text
    ``json.dumps`` writes for these fields, built without its per-call machinery (a batch
    writes one per message)."""
    created = wire_time(message.created_at)
    # The payload is spliced in as its canonical text so that decimals stay exact.
    return (
        f'{{"message_id": {_json_text(message.message_id)}, "kind": {_json_text(message.kind)}, '
        f'"aggregate": {_json_text(message.aggregate)}, "version": {int(message.version)}, '
        f'"payload": {message.payload}, "created_at": "{created}"}}'
    ).encode()


@functools.lru_cache(maxsize=1024)  # the messages of one intake share their created_at
def wire_time(value: datetime) -> str:
    """ISO 8601 in UTC with a four-digit year, e.g. ``2026-08-23T07:20:00Z``. (strftime's %Y
    writes year 1 as "1" on Linux, which no site reads as a time.) A naive value is UTC."""
    t = value.astimezone(UTC) if value.tzinfo is not None else value
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


class SiteClient:
    """The site's API as the service needs it: ``send``, ``send_batch``, ``health``.

    Two wires underneath, one behaviour: aiohttp directly (the default: the fastest client
    measured, see the module docstring), or httpx with an injected transport (the tests' mock
    transports and respx), or httpx's own transport when the environment names a proxy for
    the site's scheme (httpx honours HTTP(S)_PROXY; the aiohttp wire would not). Both give the
    same ``Response`` and the same ``TransportFailure`` classes with the same ``maybe_sent``.
    An injected transport brings its own pool and TLS settings: ``concurrency`` and ``verify``
    then do not apply.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float,
        concurrency: int,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        """``verify``: the TLS context that checks the site's certificate (settings.tls_context
        from EXCHANGE_SITE_CA_BUNDLE); None trusts the default CAs. Checking is never off."""
        self._headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
        self._forms: list[str] = []
        self._byte_forms: list[bytes] = []
        self.set_token(token)
        tls: ssl.SSLContext | bool = verify if verify is not None else True
        self._wire: Wire
        if transport is None and HAVE_AIOHTTP and not proxy_configured(base_url):
            self._wire = AiohttpWire(base_url, timeout, concurrency, tls)
        else:
            self._wire = HttpxWire(base_url, timeout, concurrency, tls, transport)

    @property
    def wire(self) -> str:
        """Which wire runs: ``"aiohttp"`` or ``"httpx"``."""
        return self._wire.name

    async def send(self, message: OutgoingMessage) -> SiteResult:
        headers = {**self._headers, "Idempotency-Key": message.message_id}
        return self._scrub(
            await self._wire.request("POST", "/api/v1/updates", body(message), headers, BODY_CAP)
        )

    async def send_batch(self, messages: Sequence[OutgoingMessage]) -> SiteResult:
        """One request for several messages, at most one per aggregate (contract 5b)."""
        if not messages or len({(m.kind, m.aggregate) for m in messages}) != len(messages):
            raise ValueError("a batch holds at least one message and at most one per aggregate")
        # The single bodies as they are, so that payloads are not parsed or re-serialised.
        content = b'{"items": [' + b", ".join(body(m) for m in messages) + b"]}"
        cap = BODY_CAP * len(messages)
        return self._scrub(
            await self._wire.request("POST", BATCH_PATH, content, self._headers, cap)
        )

    async def health(self) -> SiteResult:
        return self._scrub(
            await self._wire.request("GET", "/api/v1/health", None, self._headers, BODY_CAP)
        )

    async def withheld(self, message_id: str, *, release: bool = False) -> SiteResult:
        """The site simulator's test device for withheld prices (``WITHHELD_PATH``; not in
        contract 5): what buyers see of a withheld update, or (``release``) a person's
        confirmation of it."""
        path = f"{WITHHELD_PATH}/{urllib.parse.quote(message_id, safe='')}"
        if release:
            return self._scrub(
                await self._wire.request("POST", f"{path}/release", b"{}", self._headers, BODY_CAP)
            )
        return self._scrub(await self._wire.request("GET", path, None, self._headers, BODY_CAP))

    def set_token(self, token: str | None) -> None:
        """Use another token from now on (the operator replaced the token file).

        The token is checked as the settings check it (``clean_token``): one that cannot go
        into a header is a ValueError here (never holding it), not a failure of every request.
        """
        token = clean_token(token) if token else None
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
            self._forms = secret_forms(token)
            self._byte_forms = [form.encode("utf-8") for form in self._forms]
        else:
            self._headers.pop("Authorization", None)
            self._forms, self._byte_forms = [], []

    def _scrub(self, result: SiteResult) -> SiteResult:
        """The result with the token masked wherever the site or a library repeated it (an
        error's text, an echoed header in a body): nothing that leaves the client holds it, so
        neither last_error, the history, the log nor a report can."""
        if not self._forms:
            return result
        if isinstance(result, TransportFailure):
            detail = mask_secrets(result.detail, self._forms)
            return result if detail == result.detail else replace(result, detail=detail)
        body = result.body
        if any(form in body for form in self._byte_forms):
            for form in self._byte_forms:
                body = body.replace(form, SECRET_MASK.encode())
        body_error = (
            None if result.body_error is None else mask_secrets(result.body_error, self._forms)
        )
        if body is result.body and body_error == result.body_error:
            return result
        return replace(result, body=body, body_error=body_error)

    async def aclose(self) -> None:
        await self._wire.aclose()


def proxy_configured(base_url: str) -> bool:
    """Whether the environment names a proxy httpx would use for the site's scheme: the
    scheme's own variable (HTTPS_PROXY, HTTP_PROXY) or ALL_PROXY, unless NO_PROXY is "*".
    NO_PROXY alone, or a proxy for another scheme, changes nothing."""
    proxies = urllib.request.getproxies()
    scheme = urllib.parse.urlsplit(base_url).scheme.lower()
    bypass_all = "*" in (host.strip() for host in proxies.get("no", "").split(","))
    return bool(proxies.get(scheme) or proxies.get("all")) and not bypass_all
