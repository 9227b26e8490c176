"""Fixtures of the ``exchange check`` and ``exchange config`` tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from checktools import TOKEN

from exchange.dev.sitesim import SiteSimulator


@pytest.fixture(autouse=True)
def _no_outside_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # The checks read Settings built by the test only: an EXCHANGE_* of the developer's shell
    # must not make a test pass or fail.
    for name in list(os.environ):
        if name.startswith("EXCHANGE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token=TOKEN) as simulator:
        yield simulator


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL where nothing listens: the port was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
