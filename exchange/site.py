"""The site client (contract 5): one POST per message, or per chunk of messages through the
batch API (contract 5b), httpx underneath.

The transport is injected (tests pass ``httpx.MockTransport`` or use respx); library exceptions
become ``TransportFailure`` here, at the boundary, and nothing else leaves this module. Bodies
are read with a cap. Redirects are not followed: a 3xx is an answer to classify, not a detour.

By default httpx sends through aiohttp (``AiohttpTransport`` below), for speed. Measured on the
2-core bench machine against bench/fastsite.py, 8 requests in flight, as a share of aiohttp
alone in the same run: this client over httpx's own transport 0.16 (849 vs 5,462 requests/s),
over aiohttp 0.38 (4,083 vs 10,724); one worker with single requests on SQLite went from 0.08
to 0.12 of that ceiling, its CPU per message from 1.9 to 0.8 ms. httpx's API stays
(tests inject transports, respx mocks at httpx's level), and aiohttp's errors become httpx's
with the same "may it have been sent" meaning as under httpx's own transport. Without aiohttp,
or with a proxy set in the environment, httpx's own transport is used.
"""

from __future__ import annotations

import asyncio
import io
import json
import ssl
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

try:  # both are dependencies; without them httpx's own transport is used
    import aiohttp

    HAVE_AIOHTTP = True
except ImportError:  # pragma: no cover
    HAVE_AIOHTTP = False

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
        headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        tls: ssl.SSLContext | bool = verify if verify is not None else True
        if transport is None:
            transport = aiohttp_transport(limits, tls)
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=limits,  # for httpx's own transport; aiohttp_transport took them above
            follow_redirects=False,
            transport=transport,
            verify=tls,
        )
        self._urls: dict[str, httpx.URL] = {}

    async def send(self, message: OutgoingMessage) -> SiteResult:
        return await self._request(
            "POST",
            "/api/v1/updates",
            content=message.body(),
            headers={"Idempotency-Key": message.message_id},
        )

    async def send_batch(self, messages: Sequence[OutgoingMessage]) -> SiteResult:
        """One request for several messages, at most one per aggregate (contract 5b)."""
        if not messages or len({(m.kind, m.aggregate) for m in messages}) != len(messages):
            raise ValueError("a batch holds at least one message and at most one per aggregate")
        # The single bodies as they are, so that payloads are not parsed or re-serialised.
        content = b'{"items": [' + b", ".join(m.body() for m in messages) + b"]}"
        return await self._request(
            "POST", BATCH_PATH, cap=BODY_CAP * len(messages), content=content
        )

    async def health(self) -> SiteResult:
        return await self._request("GET", "/api/v1/health")

    async def _request(
        self, method: str, path: str, *, cap: int = BODY_CAP, **kwargs: Any
    ) -> SiteResult:
        try:
            async with self._client.stream(method, self._url(path), **kwargs) as response:
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

    def set_token(self, token: str | None) -> None:
        """Use another token from now on (the operator replaced the token file)."""
        if token:
            self._client.headers["Authorization"] = f"Bearer {token}"
        else:
            self._client.headers.pop("Authorization", None)

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


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# -- httpx over aiohttp ------------------------------------------------------------------------


def aiohttp_transport(
    limits: httpx.Limits, verify: ssl.SSLContext | bool
) -> httpx.AsyncBaseTransport | None:
    """The default transport: aiohttp, or None (httpx's own) without aiohttp or when a proxy is
    configured in the environment (httpx honours HTTP(S)_PROXY itself; this transport would not)."""
    if not HAVE_AIOHTTP or urllib.request.getproxies():
        return None
    return AiohttpTransport(limits, verify)


if HAVE_AIOHTTP:
    # aiohttp's error -> httpx's, by what it means for the request: the first three happen
    # before anything is sent (maybe_sent=False), everything else may have reached the site.
    _AIOHTTP_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
        (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),  # connect, or the pool's wait
        (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS handshake
        (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
        (TimeoutError, httpx.ReadTimeout),  # aiohttp.SocketTimeoutError: no answer in time
        (aiohttp.ClientConnectionResetError, httpx.WriteError),
        (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
        (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # a malformed answer
        (aiohttp.ClientPayloadError, httpx.ReadError),  # the body cut off
        (aiohttp.ClientConnectionError, httpx.ReadError),  # a reset, another socket error
        (aiohttp.ClientError, httpx.TransportError),
    )
    _AIOHTTP_CAUGHT = (aiohttp.ClientError, TimeoutError)
    _CHUNK = 16 * 1024

    def _mapped(exc: BaseException) -> httpx.TransportError:
        error = next(e for kinds, e in _AIOHTTP_ERRORS if isinstance(exc, kinds))
        return error(str(exc).strip() or type(exc).__name__)

    class AiohttpTransport(httpx.AsyncBaseTransport):
        """httpx over an aiohttp session (after httpx-aiohttp's ``AiohttpTransport``, which
        maps a reset after sending or a refused connection to ConnectTimeout, "not sent", lets
        some errors through unmapped, and has no write timeout). One connection pool of
        ``limits.max_connections``, the given TLS context, no redirects, no cookie jar (httpx
        keeps cookies), bodies streamed (the caller caps what it reads), errors as
        ``_AIOHTTP_ERRORS``. A write that stalls is bounded: no answer within the connect,
        write and read timeouts together is a WriteTimeout."""

        def __init__(self, limits: httpx.Limits, verify: ssl.SSLContext | bool) -> None:
            self._limits = limits
            self._tls = httpx.create_ssl_context(verify=verify)
            self._session: aiohttp.ClientSession | None = None  # made in the running loop

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if self._session is None:
                connector = aiohttp.TCPConnector(
                    limit=self._limits.max_connections or 0,  # 0: no limit
                    keepalive_timeout=self._limits.keepalive_expiry or 5.0,
                    ssl=self._tls,
                )
                self._session = aiohttp.ClientSession(
                    connector=connector, cookie_jar=aiohttp.DummyCookieJar()
                )
            timeouts = request.extensions.get("timeout", {})
            content = await request.aread()
            bound = asyncio.timeout(
                sum(timeouts.get(k) or 0.0 for k in ("pool", "write", "read")) or None
            )
            try:
                async with bound:
                    response = await self._session.request(
                        request.method,
                        str(request.url),
                        headers=request.headers.multi_items(),
                        # a large body as a file: aiohttp warns that bytes would block the loop
                        data=io.BytesIO(content) if len(content) > _CHUNK else (content or None),
                        allow_redirects=False,
                        auto_decompress=False,  # httpx decodes
                        timeout=aiohttp.ClientTimeout(
                            connect=timeouts.get("pool"),  # the pool's wait and the connect
                            sock_connect=timeouts.get("connect"),
                            sock_read=timeouts.get("read"),
                        ),
                    )
            except _AIOHTTP_CAUGHT as exc:
                if bound.expired():
                    raise httpx.WriteTimeout("no answer: the request could not be sent") from exc
                raise _mapped(exc) from exc
            return httpx.Response(
                response.status,
                headers=list(response.raw_headers),
                stream=_AiohttpBody(response),
                request=request,
            )

        async def aclose(self) -> None:
            if self._session is not None:
                await self._session.close()

    class _AiohttpBody(httpx.AsyncByteStream):
        def __init__(self, response: aiohttp.ClientResponse) -> None:
            self._response = response

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._response.content.iter_chunked(_CHUNK):
                    yield chunk
            except _AIOHTTP_CAUGHT as exc:
                raise _mapped(exc) from exc

        async def aclose(self) -> None:
            self._response.release()  # an unread rest: aiohttp closes the connection
