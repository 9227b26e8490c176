"""The ceiling: how fast one Python process can POST the contract's bodies to a site.

    python bench/ceiling.py --client httpx --url http://127.0.0.1:PORT --messages 20000 \
        --concurrency 8 [--token T] [--tag run1]

Each request is a price update as the service sends it (``client.body(message)``, the same
headers, a distinct ``Idempotency-Key``); ``--concurrency`` requests are in flight at once over
as many keep-alive connections, the best case for a client. The bodies are built before the
clock starts. Prints one JSON line: client, messages, seconds, rate, the process's CPU seconds
while the clock ran (``cpu_s``, this process alone, not the site's), statuses.

Clients: ``httpx`` (its default transport), ``httpx-aiohttp`` (httpx over httpx-aiohttp's
``AiohttpTransport``), ``aiohttp`` (``aiohttp.ClientSession``) and ``siteclient`` (the service's
own ``exchange.targets.shop_api.client.SiteClient``: aiohttp directly, with its capped body
read, error mapping and timeouts). Each on asyncio's default event loop, or on uvloop's with the
suffix ``+uvloop`` (``aiohttp+uvloop``): ``exchange run`` uses uvloop, so the ceiling must try it
too.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from exchange.domain.identity import message_id
from exchange.targets.base import OutgoingMessage
from exchange.targets.shop_api.client import USER_AGENT, Response, SiteClient
from exchange.targets.shop_api.client import body as request_body

BASE_CLIENTS = ("httpx", "httpx-aiohttp", "aiohttp", "siteclient")
CLIENTS = BASE_CLIENTS + tuple(f"{c}+uvloop" for c in BASE_CLIENTS)
TIMEOUT = 30.0
Send = Callable[[OutgoingMessage, bytes], Awaitable[int]]


def messages(count: int, tag: str) -> list[tuple[OutgoingMessage, bytes]]:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for n in range(count):
        sku = f"CEIL-{tag}-{n:07d}"
        payload = json.dumps(
            {"currency": "RUB", "price": f"{n % 1000}.00", "price_type": "retail", "sku": sku},
            separators=(",", ":"),
        )
        message = OutgoingMessage(message_id("price", sku, 1), "price", sku, 1, payload, created)
        out.append((message, request_body(message)))
    return out


async def drive(
    send: Send, items: list[tuple[OutgoingMessage, bytes]], concurrency: int
) -> tuple[float, float, collections.Counter[int]]:
    """(wall seconds, this process's CPU seconds, statuses) of sending every item."""
    statuses: collections.Counter[int] = collections.Counter()
    iterator = iter(items)

    async def lane() -> None:
        for message, body in iterator:  # the lanes share one iterator: no item twice
            statuses[await send(message, body)] += 1

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return time.perf_counter() - started, time.process_time() - cpu, statuses


def headers(token: str | None) -> dict[str, str]:
    out = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
    if token:
        out["Authorization"] = f"Bearer {token}"
    return out


async def run(
    client: str, url: str, items: list[tuple[OutgoingMessage, bytes]], concurrency: int, token: str
) -> tuple[float, float, collections.Counter[int]]:
    if client in ("httpx", "httpx-aiohttp"):
        import httpx

        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        transport: httpx.AsyncBaseTransport | None = None
        if client == "httpx-aiohttp":
            from httpx_aiohttp import AiohttpTransport

            transport = AiohttpTransport(limits=limits)
        async with httpx.AsyncClient(
            base_url=url,
            headers=headers(token),
            timeout=httpx.Timeout(TIMEOUT),
            limits=limits,
            transport=transport,
        ) as http:

            async def send_httpx(message: OutgoingMessage, body: bytes) -> int:
                response = await http.post(
                    "/api/v1/updates",
                    content=body,
                    headers={"Idempotency-Key": message.message_id},
                )
                return response.status_code

            return await drive(send_httpx, items, concurrency)
    if client == "aiohttp":
        import aiohttp

        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(
            base_url=url,
            headers=headers(token),
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as session:

            async def send_aiohttp(message: OutgoingMessage, body: bytes) -> int:
                async with session.post(
                    "/api/v1/updates", data=body, headers={"Idempotency-Key": message.message_id}
                ) as response:
                    await response.read()
                    return response.status

            return await drive(send_aiohttp, items, concurrency)
    if client == "siteclient":
        site = SiteClient(url, token, timeout=TIMEOUT, concurrency=concurrency)
        try:

            async def send_siteclient(message: OutgoingMessage, body: bytes) -> int:
                result = await site.send(message)
                return result.status if isinstance(result, Response) else -1

            return await drive(send_siteclient, items, concurrency)
        finally:
            await site.aclose()
    raise SystemExit(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--token", default="bench-token")
    parser.add_argument("--tag", default="c")
    args = parser.parse_args()
    items = messages(args.messages, f"{args.client}-{args.tag}")
    client, _, loop = args.client.partition("+")
    coroutine = run(client, args.url, items, args.concurrency, args.token)
    if loop == "uvloop":
        import uvloop

        seconds, cpu, statuses = uvloop.run(coroutine)
    else:
        seconds, cpu, statuses = asyncio.run(coroutine)
    print(
        json.dumps(
            {
                "client": args.client,
                "messages": args.messages,
                "concurrency": args.concurrency,
                "seconds": seconds,
                "rate": args.messages / seconds,
                "cpu_s": cpu,
                "statuses": {str(k): v for k, v in sorted(statuses.items())},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
