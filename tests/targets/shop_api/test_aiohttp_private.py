"""The aiohttp wire (exchange/targets/shop_api/wire_aiohttp.py) leans on two private parts of
aiohttp: it subclasses ``aiohttp.client_proto.ResponseHandler`` (so that a connection cut off
mid-write is dropped, not flushed forever) and sets ``TCPConnector._factory`` (so that the
connector makes its connections with that subclass). pyproject pins aiohttp below 4; these tests
fail by name, with what to look at, when an aiohttp release moves either part, instead of the
wire silently losing its hang-up (issue 25 item 4)."""

from __future__ import annotations

import asyncio
import inspect
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from packaging.requirements import Requirement

from exchange.targets.shop_api import wire_aiohttp

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
MOVED = (
    "aiohttp {version} moved a private part the site client's aiohttp wire uses ({what}): "
    "read aiohttp's client_proto.py and connector.py of this release, fix "
    "exchange/targets/shop_api/wire_aiohttp.py (_HangingUpHandler, AiohttpWire._open), then "
    "move the pin in pyproject.toml"
)


def moved(what: str) -> str:
    return MOVED.format(version=aiohttp.__version__, what=what)


def aiohttp_requirements() -> Iterator[tuple[str, Requirement]]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    lists = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    for where, requirements in lists.items():
        for line in requirements:
            requirement = Requirement(line)
            if requirement.name == "aiohttp":
                yield where, requirement


def test_every_aiohttp_requirement_stays_below_the_next_major_version() -> None:
    found = dict(aiohttp_requirements())
    assert "dependencies" in found, "aiohttp is no longer a dependency of the service"
    for where, requirement in found.items():
        assert not requirement.specifier.contains("4.0.0", prereleases=True), (
            f"pyproject.toml ({where}): {requirement} lets aiohttp 4 in, whose private "
            "ResponseHandler and TCPConnector._factory the wire cannot count on; keep <4"
        )
        assert requirement.specifier.contains(version("aiohttp"), prereleases=True), (
            f"the installed aiohttp {version('aiohttp')} is outside {requirement} ({where})"
        )


def test_response_handler_is_a_protocol_class_made_from_the_loop_with_a_close() -> None:
    from aiohttp.client_proto import ResponseHandler

    assert inspect.isclass(ResponseHandler), moved("client_proto.ResponseHandler")
    assert list(inspect.signature(ResponseHandler).parameters) == ["loop"], moved(
        "ResponseHandler(loop)"
    )
    assert callable(getattr(ResponseHandler, "close", None)), moved("ResponseHandler.close")
    assert issubclass(wire_aiohttp._HangingUpHandler, ResponseHandler)


def test_the_request_class_sends_through_send_conn() -> None:
    parameters = list(inspect.signature(aiohttp.ClientRequest.send).parameters)
    assert parameters[:2] == ["self", "conn"], moved("ClientRequest.send(conn)")


def test_the_connector_makes_its_connections_with_the_factory_the_wire_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real request on loopback: the connector must call ``_factory`` for its connection,
    and the connection it uses is the wire's hanging-up handler."""
    made: list[Any] = []
    original = wire_aiohttp._hanging_up

    def counting(loop: asyncio.AbstractEventLoop) -> Any:
        protocol = original(loop)
        made.append(protocol)
        return protocol

    monkeypatch.setattr(wire_aiohttp, "_hanging_up", counting)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def scenario() -> int:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        wire = wire_aiohttp.AiohttpWire(f"http://127.0.0.1:{port}", 10.0, 2, True)
        try:
            result = await wire.request("GET", "/api/v1/health", None, {}, 1024)
        finally:
            await wire.aclose()
            server.close()
            await server.wait_closed()
        assert isinstance(result, wire_aiohttp.Response), result
        return result.status

    assert 200 == asyncio.run(scenario())
    assert made, moved("TCPConnector._factory is no longer what makes a connection")
    assert all(isinstance(p, wire_aiohttp._HangingUpHandler) for p in made)
