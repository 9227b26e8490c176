"""The client's httpx wire: an injected transport (the tests' mock transports and respx), or
httpx's own when the environment names a proxy for the site's scheme (``client`` chooses)."""

from __future__ import annotations

import asyncio
import ssl

import httpx

from exchange.targets.shop_api.request import Progress, Response, SiteResult, Wire
from exchange.targets.wire import describe as _describe
from exchange.targets.wire import httpx_failure


class HttpxWire(Wire):
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
        progress = Progress(sent=self._injected)
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
