"""The site client (contract 5): one POST per message, or per chunk of messages through the
batch API (contract 5b).

Library exceptions become ``TransportFailure`` here, at the boundary, and nothing else leaves
this module. Bodies are read with a cap. Redirects are not followed: a 3xx is an answer to
classify, not a detour.

The wire is aiohttp, called directly (``_AiohttpWire``), chosen by measurement: on the 2-core
bench machine against bench/fastsite.py with 8 requests in flight (``python -m bench
--sections ceiling``), as a share of the best client in the same run (aiohttp on uvloop,
12,550 requests/s), httpx with its own transport reached 0.09, httpx over httpx-aiohttp's
transport 0.29, httpx over this module's own aiohttp transport 0.42 in an earlier run, and
aiohttp called directly with this module's checks 0.75: httpx's request/response layer cost as
much CPU as aiohttp itself. httpx is still the wire when a transport is injected (the tests'
mock transports and respx) or a proxy is set in the environment (httpx honours HTTP(S)_PROXY);
aiohttp's errors get the names and the "may it have been sent" meaning that httpx gives the
same failures, so the history and the classification do not depend on the wire.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import ssl
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import httpx

from exchange.settings import SECRET_MASK, clean_token, mask_secrets, secret_forms

try:  # both are dependencies; without them httpx's own transport is used
    import aiohttp
    import yarl

    HAVE_AIOHTTP = True
except ImportError:  # pragma: no cover
    HAVE_AIOHTTP = False

log = logging.getLogger(__name__)

BODY_CAP = 64 * 1024  # of one answer; a batch answer may take BODY_CAP per item
BATCH_PATH = "/api/v1/updates:batch"
USER_AGENT = "exchange/0.1"
TLS_ERROR = "TLSError"  # error_class of a failed TLS handshake (e.g. an untrusted certificate)


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """The contract's request body, nothing more."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    payload: str  # canonical JSON text
    created_at: datetime

    def body(self) -> bytes:
        created = self.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        head = json.dumps(
            {
                "message_id": self.message_id,
                "kind": self.kind,
                "aggregate": self.aggregate,
                "version": self.version,
            },
            ensure_ascii=False,
        )[:-1]
        # The payload is spliced in as its canonical text so that decimals stay exact.
        tail = f', "payload": {self.payload}, "created_at": "{created}"}}'
        return (head + tail).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None
    body_error: str | None = None  # the body could not be read (cut off, bad encoding)


@dataclass(frozen=True, slots=True)
class TransportFailure:
    error_class: str
    detail: str
    maybe_sent: bool  # the site may have received it: the result is unknown


SiteResult = Response | TransportFailure


class SiteClient:
    """The site's API as the service needs it: ``send``, ``send_batch``, ``health``.

    Two wires underneath, one behaviour: aiohttp directly (the default: the fastest client
    measured, see the module docstring), or httpx with an injected transport (the tests' mock
    transports and respx), or httpx's own transport when a proxy is set in the environment
    (httpx honours HTTP(S)_PROXY; the aiohttp wire would not). Both give the same
    ``Response`` and the same ``TransportFailure`` classes with the same ``maybe_sent``.
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
        self._wire: _Wire
        if transport is None and HAVE_AIOHTTP and not urllib.request.getproxies():
            self._wire = _AiohttpWire(base_url, timeout, concurrency, tls)
        else:
            self._wire = _HttpxWire(base_url, timeout, concurrency, tls, transport)

    async def send(self, message: OutgoingMessage) -> SiteResult:
        headers = {**self._headers, "Idempotency-Key": message.message_id}
        return self._scrub(
            await self._wire.request("POST", "/api/v1/updates", message.body(), headers, BODY_CAP)
        )

    async def send_batch(self, messages: Sequence[OutgoingMessage]) -> SiteResult:
        """One request for several messages, at most one per aggregate (contract 5b)."""
        if not messages or len({(m.kind, m.aggregate) for m in messages}) != len(messages):
            raise ValueError("a batch holds at least one message and at most one per aggregate")
        # The single bodies as they are, so that payloads are not parsed or re-serialised.
        content = b'{"items": [' + b", ".join(m.body() for m in messages) + b"]}"
        cap = BODY_CAP * len(messages)
        return self._scrub(
            await self._wire.request("POST", BATCH_PATH, content, self._headers, cap)
        )

    async def health(self) -> SiteResult:
        return self._scrub(
            await self._wire.request("GET", "/api/v1/health", None, self._headers, BODY_CAP)
        )

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


class _Wire:
    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


class _HttpxWire(_Wire):
    """httpx: an injected transport (tests, respx), or httpx's own (a proxy is configured)."""

    def __init__(
        self,
        base_url: str,
        timeout: float,
        concurrency: int,
        tls: ssl.SSLContext | bool,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout),
            limits=limits,
            follow_redirects=False,
            transport=transport,
            verify=tls,
        )
        self._urls: dict[str, httpx.URL] = {}

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        try:
            async with self._client.stream(
                method, self._url(path), content=content, headers=headers
            ) as response:
                body, body_error = await _read_capped(response, cap)
                return Response(
                    response.status_code, body, response.headers.get("Retry-After"), body_error
                )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # A refused certificate is a connection error too, named so that it is recognised.
            error_class = TLS_ERROR if _caused_by_tls(exc) else type(exc).__name__
            return TransportFailure(error_class, _describe(exc), maybe_sent=False)
        except httpx.TransportError as exc:  # read/write timeouts, resets, protocol errors
            return TransportFailure(type(exc).__name__, _describe(exc), maybe_sent=True)

    def _url(self, path: str) -> httpx.URL:
        """The absolute URL of a path under base_url, parsed once (parsing and merging it on
        every request took ~5 % of the worker's CPU with single requests)."""
        url = self._urls.get(path)
        if url is None:
            # base_url always ends in "/" (httpx); the same merge as httpx's for a path
            url = self._urls[path] = httpx.URL(str(self._client.base_url).rstrip("/") + path)
        return url

    async def aclose(self) -> None:
        await self._client.aclose()


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, str | None]:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= cap:
                break
    except httpx.TransportError as exc:
        return b"".join(chunks)[:cap], f"{type(exc).__name__}: {_describe(exc)}"
    except httpx.DecodingError as exc:
        return b"", f"DecodingError: {exc}"
    return b"".join(chunks)[:cap], None


def _caused_by_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):  # the chain httpx -> httpcore -> ssl is short; a loop is never endless
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# -- aiohttp -----------------------------------------------------------------------------------

if HAVE_AIOHTTP:
    # aiohttp's error -> the name httpx gives the same failure (what the history and the
    # classification know), and whether the site may have received the request: the first
    # three happen before anything is sent, everything else may have reached the site.
    _AIOHTTP_ERRORS: tuple[tuple[type[BaseException], str, bool], ...] = (
        (aiohttp.ConnectionTimeoutError, "ConnectTimeout", False),  # connect, or the pool's wait
        (aiohttp.ClientConnectorError, "ConnectError", False),  # refused, DNS, TLS handshake
        (aiohttp.InvalidURL, "UnsupportedProtocol", False),
        (TimeoutError, "ReadTimeout", True),  # aiohttp.SocketTimeoutError: no answer in time
        (aiohttp.ClientConnectionResetError, "WriteError", True),
        (aiohttp.ServerDisconnectedError, "RemoteProtocolError", True),
        (aiohttp.ClientResponseError, "RemoteProtocolError", True),  # a malformed answer
        (aiohttp.ClientPayloadError, "ReadError", True),  # the body cut off
        (aiohttp.ClientConnectionError, "ReadError", True),  # a reset, another socket error
        (aiohttp.ClientError, "TransportError", True),
    )
    _AIOHTTP_CAUGHT = (aiohttp.ClientError, TimeoutError)
    _CHUNK = 16 * 1024

    def _failure(exc: BaseException) -> TransportFailure:
        name, maybe_sent = next(
            (n, sent) for kinds, n, sent in _AIOHTTP_ERRORS if isinstance(exc, kinds)
        )
        if not maybe_sent and _caused_by_tls(exc):
            name = TLS_ERROR
        return TransportFailure(name, _describe(exc), maybe_sent=maybe_sent)

    class _AiohttpWire(_Wire):
        """aiohttp directly (after httpx-aiohttp's transport, which maps a reset after sending
        or a refused connection to ConnectTimeout, "not sent", and has no write timeout). One
        connection pool of ``concurrency``, the given TLS context, no redirects, no cookies,
        bodies read up to the cap, errors as ``_AIOHTTP_ERRORS``. Timeouts as httpx's
        ``Timeout(timeout)``: the pool's wait and the connect, then each read, each at most
        ``timeout``; a write that stalls is bounded too: no answer within three times the
        timeout is a WriteTimeout."""

        def __init__(
            self, base_url: str, timeout: float, concurrency: int, tls: ssl.SSLContext | bool
        ) -> None:
            self._base = base_url.rstrip("/")
            self._limit = concurrency
            self._tls = httpx.create_ssl_context(verify=tls)
            self._timeout = timeout
            self._client_timeout = aiohttp.ClientTimeout(
                connect=timeout, sock_connect=timeout, sock_read=timeout
            )
            self._session: aiohttp.ClientSession | None = None  # made in the running loop
            self._urls: dict[str, Any] = {}

        def _url(self, path: str) -> Any:
            url = self._urls.get(path)
            if url is None:  # parsed once: see _HttpxWire._url
                url = self._urls[path] = yarl.URL(self._base + path)
            return url

        def _open(self) -> aiohttp.ClientSession:
            if self._session is None:
                connector = aiohttp.TCPConnector(limit=self._limit, ssl=self._tls)
                self._session = aiohttp.ClientSession(
                    connector=connector, cookie_jar=aiohttp.DummyCookieJar()
                )
            return self._session

        async def request(
            self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
        ) -> SiteResult:
            session = self._open()
            bound = asyncio.timeout(self._timeout * 3)
            try:
                async with bound:
                    response = await session.request(
                        method,
                        self._url(path),
                        headers=headers,
                        # a large body as a file: aiohttp warns that bytes would block the loop
                        data=io.BytesIO(content) if content and len(content) > _CHUNK else content,
                        allow_redirects=False,
                        timeout=self._client_timeout,
                    )
            except _AIOHTTP_CAUGHT as exc:
                if bound.expired():
                    return TransportFailure(
                        "WriteTimeout", "no answer: the request could not be sent", maybe_sent=True
                    )
                return _failure(exc)
            try:
                body, body_error = await _read_capped_aiohttp(response, cap)
            finally:
                response.release()  # an unread rest: aiohttp closes the connection
            if log.isEnabledFor(logging.DEBUG):  # the line httpx writes for each request
                log.debug('HTTP Request: %s %s "%s"', method, self._url(path), response.status)
            return Response(response.status, body, response.headers.get("Retry-After"), body_error)

        async def aclose(self) -> None:
            if self._session is not None:
                await self._session.close()

    async def _read_capped_aiohttp(
        response: aiohttp.ClientResponse, cap: int
    ) -> tuple[bytes, str | None]:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.content.iter_chunked(_CHUNK):
                chunks.append(chunk)
                size += len(chunk)
                if size >= cap:
                    break
        except _AIOHTTP_CAUGHT as exc:
            failure = _failure(exc)
            return b"".join(chunks)[:cap], f"{failure.error_class}: {failure.detail}"
        return b"".join(chunks)[:cap], None
