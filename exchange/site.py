"""The site client (contract 5): one POST per message, httpx underneath.

The transport is injected (tests pass ``httpx.MockTransport`` or use respx); library exceptions
become ``TransportFailure`` here, at the boundary, and nothing else leaves this module. Bodies
are read with a cap. Redirects are not followed: a 3xx is an answer to classify, not a detour.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

BODY_CAP = 64 * 1024
USER_AGENT = "exchange/0.1"


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
    ) -> None:
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
        )

    async def send(self, message: OutgoingMessage) -> SiteResult:
        return await self._request(
            "POST",
            "/api/v1/updates",
            content=message.body(),
            headers={"Idempotency-Key": message.message_id},
        )

    async def health(self) -> SiteResult:
        return await self._request("GET", "/api/v1/health")

    async def _request(self, method: str, path: str, **kwargs: Any) -> SiteResult:
        try:
            async with self._client.stream(method, path, **kwargs) as response:
                body, body_error = await _read_capped(response)
                return Response(
                    response.status_code, body, response.headers.get("Retry-After"), body_error
                )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            return TransportFailure(type(exc).__name__, _describe(exc), maybe_sent=False)
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


async def _read_capped(response: httpx.Response) -> tuple[bytes, str | None]:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= BODY_CAP:
                break
    except httpx.TransportError as exc:
        return b"".join(chunks)[:BODY_CAP], f"{type(exc).__name__}: {_describe(exc)}"
    except httpx.DecodingError as exc:
        return b"", f"DecodingError: {exc}"
    return b"".join(chunks)[:BODY_CAP], None


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
