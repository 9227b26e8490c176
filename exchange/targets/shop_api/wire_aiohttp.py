"""The client's aiohttp wire, the default (``client`` says why): aiohttp called directly, its
errors given the names and the "may it have been sent" meaning httpx gives the same failures.

It reaches into aiohttp's private parts in two places, ``ResponseHandler`` (subclassed by
``_HangingUpHandler``) and ``TCPConnector._factory``; pyproject pins aiohttp below 4, and
tests/targets/shop_api/test_aiohttp_private.py fails by name when either moves.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import socket
import ssl
from typing import Any

import aiohttp
import httpx
import yarl
from aiohttp.client_proto import ResponseHandler

from exchange.targets.shop_api.request import Progress, Response, SiteResult, Wire
from exchange.targets.wire import TLS_ERROR, TransportFailure
from exchange.targets.wire import caused_by as _caused_by
from exchange.targets.wire import describe as _describe

# The client's logger: the debug line of each request is written where httpx's wire writes it.
log = logging.getLogger("exchange.targets.shop_api.client")


def _why_unreachable(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused: nothing listens there, or a firewall refuses"
    if isinstance(error, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return (error.strerror or str(error) or type(error).__name__).splitlines()[0]


# aiohttp's error -> the name httpx gives the same failure (what the history and the
# classification know), and whether the site may have received the request: the first
# three happen before anything is sent, everything else may have reached the site.
_AIOHTTP_ERRORS: tuple[tuple[type[BaseException], str, bool], ...] = (
    (aiohttp.ConnectionTimeoutError, "ConnectTimeout", False),  # (a pool wait: PoolTimeout)
    (aiohttp.ClientConnectorError, "ConnectError", False),  # refused, DNS, TLS handshake
    (aiohttp.InvalidURL, "UnsupportedProtocol", False),
    (TimeoutError, "ReadTimeout", True),  # aiohttp.SocketTimeoutError: no answer in time
    (aiohttp.ClientConnectionResetError, "WriteError", True),
    (aiohttp.ServerDisconnectedError, "RemoteProtocolError", True),
    (aiohttp.ClientResponseError, "RemoteProtocolError", True),  # a malformed answer
    # the body cut off: by the peer closing early, or by a socket error (see _failure)
    (aiohttp.ClientPayloadError, "RemoteProtocolError", True),
    (aiohttp.ClientConnectionError, "ReadError", True),  # a reset, another socket error
    (aiohttp.ClientError, "TransportError", True),
)
_AIOHTTP_CAUGHT = (aiohttp.ClientError, TimeoutError)
_CHUNK = 16 * 1024
_ONE_WRITE = 256 * 1024  # bytes of a request body sent with its headers (see _body)


def _failure(exc: BaseException) -> TransportFailure:
    name, maybe_sent = next(
        (n, sent) for kinds, n, sent in _AIOHTTP_ERRORS if isinstance(exc, kinds)
    )
    if not maybe_sent and _caused_by(exc, ssl.SSLError):
        name = TLS_ERROR
    elif isinstance(exc, aiohttp.ClientPayloadError) and _caused_by(exc, OSError):
        name = "ReadError"  # a reset mid-body: httpx's name for a failed socket read
    if name == "ConnectError" and isinstance(exc, aiohttp.ClientConnectorError):
        # aiohttp's own text ("Cannot connect to host 127.0.0.1:9 ssl:default [...]")
        # names TLS for a plain http URL; say what an operator needs instead.
        why = _why_unreachable(exc.os_error)
        detail = f"the site is unreachable: no connection to {exc.host}:{exc.port} ({why})"
        return TransportFailure(name, detail[:300], maybe_sent=False)
    return TransportFailure(name, _describe(exc), maybe_sent=maybe_sent)


class AiohttpWire(Wire):
    """aiohttp directly (after httpx-aiohttp's transport, which maps a reset after sending
    or a refused connection to ConnectTimeout, "not sent", and has no write timeout). One
    connection pool of ``concurrency``, the given TLS context, no redirects, no cookies,
    bodies read up to the cap, errors as ``_AIOHTTP_ERRORS``. One deadline of ``timeout``
    bounds the whole request: the pool's wait, the connect, the write, the answer and
    every byte of its body (a timeout per read let a body trickled a byte at a time take
    minutes, and a stop wait as long). Cut off waiting for a free connection (PoolTimeout)
    or before its headers went out (ConnectTimeout), a request was not sent; after, its
    result is unknown (WriteTimeout while its body was still going out, else
    ReadTimeout). A connection cut off with bytes unsent is dropped, not flushed."""

    name = "aiohttp"

    def __init__(
        self, base_url: str, timeout: float, concurrency: int, tls: ssl.SSLContext | bool
    ) -> None:
        self._base = base_url.rstrip("/")
        self._limit = concurrency
        self._tls = httpx.create_ssl_context(verify=tls)
        self._timeout = timeout
        # No timeout of aiohttp's own (two timers at one deadline race); request()'s
        # deadline bounds everything.
        self._client_timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=None, sock_read=None
        )
        self._session: aiohttp.ClientSession | None = None  # made in the running loop
        self._slots = asyncio.Semaphore(concurrency)  # see request()
        self._urls: dict[str, Any] = {}

    def _url(self, path: str) -> Any:
        url = self._urls.get(path)
        if url is None:  # parsed once: see wire_httpx.HttpxWire._url
            url = self._urls[path] = yarl.URL(self._base + path)
        return url

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, ssl=self._tls)
            # aiohttp makes each connection's protocol with this (private) factory
            loop = asyncio.get_running_loop()
            connector._factory = functools.partial(_hanging_up, loop=loop)
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                request_class=_MarkingRequest,
            )
        return self._session

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        session = self._open()
        progress = Progress()
        try:
            async with asyncio.timeout(self._timeout):
                # A slot is held from before the request until its connection is released:
                # the connector (limit=concurrency too) never queues, so a wait for a free
                # connection is told apart from a slow connect, as httpx's pool tells it.
                progress.queued = self._slots.locked()
                await self._slots.acquire()
                progress.queued = False
                _PROGRESS.set(progress)  # _MarkingRequest marks it sent
                try:
                    data = _body(content, progress)
                    if data is not content:  # streamed: its length said, never chunked
                        headers = {**headers, "Content-Length": str(len(content or b""))}
                    try:
                        response = await session.request(
                            method,
                            self._url(path),
                            headers=headers,
                            data=data,
                            allow_redirects=False,
                            timeout=self._client_timeout,
                        )
                    except _AIOHTTP_CAUGHT as exc:
                        return _failure(exc)
                    progress.answered = True
                    try:
                        body, body_error = await _read_capped_aiohttp(response, cap)
                    finally:
                        response.release()  # an unread rest: aiohttp closes the connection
                finally:
                    self._slots.release()
        except TimeoutError:
            return progress.cut_off(self._timeout)
        if log.isEnabledFor(logging.DEBUG):  # the line httpx writes for each request
            log.debug('HTTP Request: %s %s "%s"', method, self._url(path), response.status)
        return Response(response.status, body, response.headers.get("Retry-After"), body_error)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class _HangingUpHandler(ResponseHandler):
    """aiohttp's connection, closed at once even with bytes still unsent. aiohttp closes a
    connection whose request failed or was cancelled (a write that stalled: WriteTimeout)
    with asyncio's ``close()``, which waits to flush the unsent rest first: to a site that
    stopped reading, forever, and the socket stays open. ``abort()`` drops it (as httpx
    does)."""

    def close(self) -> None:
        transport = self.transport
        if transport is not None and transport.get_write_buffer_size():
            transport.abort()
        super().close()


def _hanging_up(loop: asyncio.AbstractEventLoop) -> ResponseHandler:
    return _HangingUpHandler(loop)


def _body(content: bytes | None, progress: Progress) -> Any:
    """The request body as aiohttp takes it. One up to ``_ONE_WRITE`` (a batch of a few
    hundred items) goes out with the headers in one write, which the socket takes whole
    or buffers without blocking the loop; a site that stops reading it ends as a
    ReadTimeout, "maybe sent" like a WriteTimeout. (Streaming a batch of 100 items, ~20 KB,
    in 16 KB chunks cost the worker ~6 us a message, measured with bench/run.py.) A
    larger one is streamed (bytes would block the loop, aiohttp warns) and marks the
    request written once its last chunk is handed to the socket, so that a site that
    stops reading is told apart (WriteTimeout) from one that does not answer
    (ReadTimeout)."""
    if not content or len(content) <= _ONE_WRITE:
        return content
    progress.written = False

    async def chunks() -> Any:
        for start in range(0, len(content), _CHUNK):
            yield content[start : start + _CHUNK]
        progress.written = True

    return aiohttp.payload.AsyncIterablePayload(chunks(), content_type=None)


# The request going out in this task: _MarkingRequest marks it sent. (aiohttp's trace
# hook for the same moment cost ~3 % of the worker's CPU with single requests: a trace
# makes aiohttp await a signal at every step of every request.)
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "exchange_request_progress", default=None
)


class _MarkingRequest(aiohttp.ClientRequest):
    """aiohttp's request, which marks the request's ``Progress`` sent as it starts
    writing its headers to the connection it got (what aiohttp's ``on_request_headers_sent``
    trace says, at the same moment: ``send`` writes the headers first): from then on, a
    request cut off by its deadline may have reached the site."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        progress = _PROGRESS.get()
        if progress is not None:
            progress.sent = True
        return await super().send(conn)


async def _read_capped_aiohttp(
    response: aiohttp.ClientResponse, cap: int
) -> tuple[bytes, str | None]:
    chunks: list[bytes] = []
    size = 0
    content = response.content
    try:
        if content.is_eof():  # the whole body came with the headers (a small answer):
            return content.read_nowait()[:cap], None  # taken as it is, no wait
        async for chunk in content.iter_chunked(_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size >= cap:
                break
    except _AIOHTTP_CAUGHT as exc:
        failure = _failure(exc)
        return b"".join(chunks)[:cap], f"{failure.error_class}: {failure.detail}"
    return b"".join(chunks)[:cap], None
