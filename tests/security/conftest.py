"""Fixtures of the security tests: a CA and site certificates made at test time, the site
simulator served over HTTPS with them, and a real ``exchange serve`` to attack."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from securitytools import SITE_TOKEN, Pki, make_pki, server_context
from web_helpers import serving

from exchange.dev.sitesim import Faults, SiteSimulator


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is required by the TLS tests", pytrace=False)
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_site(pki: Pki) -> Iterator[SiteSimulator]:
    """The site simulator over HTTPS on 127.0.0.1, with a certificate our CA signed."""
    context = server_context(pki.site_cert, pki.site_key)
    with SiteSimulator(token=SITE_TOKEN, faults=Faults(seed=1), ssl_context=context) as site:
        yield site


@pytest.fixture
def wrong_name_site(pki: Pki) -> Iterator[SiteSimulator]:
    """HTTPS on 127.0.0.1 with a certificate our CA signed for another host name."""
    context = server_context(pki.other_cert, pki.other_key)
    with SiteSimulator(token=SITE_TOKEN, faults=Faults(seed=1), ssl_context=context) as site:
        yield site


@pytest.fixture
def serve(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``serve(**settings) -> base URL``: a running ``exchange serve`` on the test's database,
    its 1C files in ``tmp_path / "1c"``."""
    with serving(db_url, tmp_path / "1c") as start:
        yield start
