"""The aiohttp wire's capped read of an answer's body: taken from the buffer when the whole
body came with the headers, read chunk by chunk when it is still coming; the same bytes and
the same cap either way."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any
from unittest.mock import Mock

import aiohttp
import pytest
from aiohttp.streams import StreamReader

from exchange.targets.shop_api.wire_aiohttp import _read_capped_aiohttp


def _reader() -> StreamReader:
    protocol = Mock(_reading_paused=False)  # the connection: pausing and resuming do nothing
    return StreamReader(protocol, 2**16, loop=asyncio.get_running_loop())


def _response(reader: StreamReader) -> Any:
    return SimpleNamespace(content=reader)


@pytest.mark.parametrize(("size", "cap"), [(0, 10), (5, 10), (10, 10), (25, 10), (70_000, 65_536)])
def test_a_body_that_came_whole_is_read_as_one_that_comes_in_pieces(size: int, cap: int) -> None:
    body = bytes(i % 251 for i in range(size))

    async def whole() -> tuple[bytes, str | None]:
        reader = _reader()
        reader.feed_data(body)
        reader.feed_eof()
        assert reader.is_eof()  # the buffered path
        return await _read_capped_aiohttp(_response(reader), cap)

    async def in_pieces() -> tuple[bytes, str | None]:
        reader = _reader()
        loop = asyncio.get_running_loop()

        def feed(start: int) -> None:
            if start >= len(body):
                reader.feed_eof()
                return
            reader.feed_data(body[start : start + 7])
            loop.call_soon(feed, start + 7)

        loop.call_soon(feed, 0)
        return await _read_capped_aiohttp(_response(reader), cap)

    expected = (body[:cap], None)
    assert expected == asyncio.run(whole())
    assert expected == asyncio.run(in_pieces())


def test_a_body_cut_off_is_an_error_with_what_came() -> None:
    async def cut_off() -> tuple[bytes, str | None]:
        reader = _reader()
        reader.feed_data(b"partial")
        reader.set_exception(aiohttp.ClientPayloadError("Response payload is not completed"))
        return await _read_capped_aiohttp(_response(reader), 100)

    data, error = asyncio.run(cut_off())
    assert b"" == data  # aiohttp raises before handing out what it holds
    assert error is not None and error.startswith("RemoteProtocolError")
