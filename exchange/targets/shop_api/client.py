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
mock transports and respx) or the environment names a proxy for the site's scheme
(``proxy_configured``: httpx honours HTTP(S)_PROXY, ALL_PROXY and NO_PROXY, aiohttp would not);
``SiteClient.wire`` says which runs. aiohttp's errors get the names and the "may it have been
sent" meaning that httpx gives the same failures, so the history and the classification do not
depend on the wire: tests/faults/test_site_wires.py runs one fault catalogue on both wires
against the site simulator, and tests/faults/test_site_faults.py runs a worker on aiohttp's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import httpx

try:  # both are dependencies; without them httpx's own transport is used
    import aiohttp
    import yarl
    from aiohttp.client_proto import ResponseHandler

    HAVE_AIOHTTP = True
except ImportError:  # pragma: no cover
    HAVE_AIOHTTP = False

from exchange.secrets import SECRET_MASK, clean_token, mask_secrets, secret_forms
from exchange.targets.base import OutgoingMessage
from exchange.targets.wire import TLS_ERROR as TLS_ERROR  # re-exported: the checks name it
from exchange.targets.wire import TransportFailure as TransportFailure
from exchange.targets.wire import caused_by as _caused_by
from exchange.targets.wire import describe as _describe
from exchange.targets.wire import httpx_failure

log = logging.getLogger(__name__)

BODY_CAP = 64 * 1024  # of one answer; a batch answer may take BODY_CAP per item
BATCH_PATH = "/api/v1/updates:batch"
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


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None
    body_error: str | None = None  # the body could not be read (cut off, bad encoding)


SiteResult = Response | TransportFailure


class _Progress:
    """How far one request got, for the failure of a request its deadline cut off: waiting for
    a free connection or before its headers went out, nothing can have reached the site;
    after, the result is unknown (a write still going: WriteTimeout; else ReadTimeout)."""

    __slots__ = ("answered", "queued", "sent", "written")

    def __init__(self, sent: bool = False) -> None:
        self.queued = False
        self.sent = sent
        self.written = True  # False while a streamed body is still going out
        self.answered = False

    def cut_off(self, timeout: float) -> TransportFailure:
        if self.queued:
            return TransportFailure(
                "PoolTimeout",
                f"no free connection within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT)",
                maybe_sent=False,
            )
        if not self.sent:
            return TransportFailure(
                "ConnectTimeout",
                f"no connection to the site within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT)",
                maybe_sent=False,
            )
        if not self.written:
            return TransportFailure(
                "WriteTimeout",
                f"the request could not be sent whole within {timeout:g} s "
                "(EXCHANGE_HTTP_TIMEOUT): the site stopped reading it",
                maybe_sent=True,
            )
        what = "the answer's body was not complete" if self.answered else "no answer"
        return TransportFailure(
            "ReadTimeout",
            f"{what} within {timeout:g} s (EXCHANGE_HTTP_TIMEOUT bounds the whole request)",
            maybe_sent=True,
        )


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
        self._wire: _Wire
        if transport is None and HAVE_AIOHTTP and not proxy_configured(base_url):
            self._wire = _AiohttpWire(base_url, timeout, concurrency, tls)
        else:
            self._wire = _HttpxWire(base_url, timeout, concurrency, tls, transport)

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


class _Wire:
    name = ""

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


class _HttpxWire(_Wire):
    """httpx: an injected transport (tests, respx), or httpx's own (a proxy is configured)."""

    name = "httpx"

    def __init__(
        self,
        base_url: str,
        timeout: float,
        concurrency: int,
        tls: ssl.SSLContext | bool,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._timeout = timeout
        # An injected transport (tests, respx) says nothing of its progress: a request it held
        # past the deadline may have been sent.
        self._injected = transport is not None
        self._client = httpx.AsyncClient(
            base_url=base_url,
            # No timeout per phase: one deadline bounds the whole request (see request()).
            timeout=httpx.Timeout(None),
            limits=limits,
            follow_redirects=False,
            transport=transport,
            verify=tls,
        )
        self._urls: dict[str, httpx.URL] = {}

    async def request(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str], cap: int
    ) -> SiteResult:
        progress = _Progress(sent=self._injected)
        # httpcore traces nothing while a request waits for a free connection in its pool: a
        # request cut off before its first trace event was waiting for one (PoolTimeout).
        progress.queued = not self._injected

        async def trace(event: str, info: object) -> None:
            progress.queued = False
            if "send_request_body.started" in event:
                progress.written = False
            elif "send_request_body.complete" in event:
                progress.written = True
            if "send_request_headers" in event:
                progress.sent = True
            elif "receive_response_headers.complete" in event:
                progress.answered = True

        try:
            # The whole exchange, body included, within the timeout: a body trickled a byte
            # at a time is cut off here, not after one timeout per read.
            async with asyncio.timeout(self._timeout):
                async with self._client.stream(
                    method,
                    self._url(path),
                    content=content,
                    headers=headers,
                    extensions={"trace": trace},
                ) as response:
                    progress.answered = True
                    body, body_error = await _read_capped(response, cap)
                    return Response(
                        response.status_code, body, response.headers.get("Retry-After"), body_error
                    )
        except TimeoutError:
            return progress.cut_off(self._timeout)
        except httpx.TransportError as exc:  # one reading for every target (targets/wire.py)
            return httpx_failure(exc)

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


def _why_unreachable(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused: nothing listens there, or a firewall refuses"
    if isinstance(error, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return (error.strerror or str(error) or type(error).__name__).splitlines()[0]


# -- aiohttp -----------------------------------------------------------------------------------

if HAVE_AIOHTTP:
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

    class _AiohttpWire(_Wire):
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
            if url is None:  # parsed once: see _HttpxWire._url
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
            progress = _Progress()
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

    def _body(content: bytes | None, progress: _Progress) -> Any:
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
    _PROGRESS: contextvars.ContextVar[_Progress | None] = contextvars.ContextVar(
        "exchange_request_progress", default=None
    )

    class _MarkingRequest(aiohttp.ClientRequest):
        """aiohttp's request, which marks the request's ``_Progress`` sent as it starts
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
