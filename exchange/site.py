"""The site client (contract 5): one POST per message, or per chunk of messages through the
batch API (contract 5b), httpx underneath.

The transport is injected (tests pass ``httpx.MockTransport`` or use respx); library exceptions
become ``TransportFailure`` here, at the boundary, and nothing else leaves this module. Bodies
are read with a cap. Redirects are not followed: a 3xx is an answer to classify, not a detour.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

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
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            follow_redirects=False,
            transport=transport,
            verify=verify if verify is not None else True,
        )

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
            async with self._client.stream(method, path, **kwargs) as response:
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
