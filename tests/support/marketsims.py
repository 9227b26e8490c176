"""The three marketplace simulators started for a test, and the channel of each as
``EXCHANGE_CHANNELS`` names it (contract 13, 14): the set-up the marketplace tests share
(tests/integration/test_one_installation.py runs all three beside the site; the marketplaces'
own end-to-end tests start one each the same way).

Each ``*_sim`` is a context manager that starts its simulator on loopback and stops it; each
``*_channel`` writes the credential to a file under ``directory`` (a channel takes secrets as
``*_file`` only) and returns the channel's table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.simclock import SimClock
from exchange.dev.testing import fast_settings
from exchange.dev.wbsim import Switches as WbSwitches
from exchange.dev.wbsim import WbSimulator
from exchange.dev.ymsim import YmSimulator, YmSwitches, channel_settings

OZON_CLIENT_ID, OZON_KEY = "836741", "ozon-key"
YM_KEY, YM_BUSINESS = "ym-key-1234", 1001


def secret(directory: Path, name: str, value: str) -> str:
    path = directory / name
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)
    return str(path)


@contextmanager
def ozon_sim(*, time_scale: float = 1.0) -> Iterator[OzonSimulator]:
    """Ozon with every article known (``auto``) and its limits as the research gives them."""
    sim = OzonSimulator(OZON_CLIENT_ID, OZON_KEY, time_scale=time_scale)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@contextmanager
def wb_sim(
    goods: Iterable[tuple[str, int]] = (), *, processing_delay: float = 0.3
) -> Iterator[WbSimulator]:
    """A Wildberries account holding ``goods`` (vendor code, price in force); a task is
    processed ``processing_delay`` (its clock's) seconds after its upload."""
    sim = WbSimulator(switches=WbSwitches(processing_delay=processing_delay))
    for vendor_code, price in goods:
        sim.add_good(vendor_code, price=price)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@contextmanager
def ym_sim(*, scale: float = 60.0, apply_delay: float = 30.0) -> Iterator[YmSimulator]:
    """Yandex Market whose minute lasts ``60 / scale`` real seconds; an accepted price shows
    ``apply_delay`` of its seconds later (half a real second by default)."""
    sim = YmSimulator(
        YM_KEY, YM_BUSINESS, clock=SimClock(scale), switches=YmSwitches(apply_delay=apply_delay)
    )
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


def ozon_channel(
    sim: OzonSimulator, directory: Path, price_types: dict[str, Any]
) -> dict[str, Any]:
    return {
        "target": "ozon",
        "ozon_api_url": sim.url,
        "ozon_client_id": OZON_CLIENT_ID,
        "ozon_api_key_file": secret(directory, "ozon-key", OZON_KEY),
        "ozon_price_types": price_types,
    }


def wb_channel(sim: WbSimulator, directory: Path, price_types: dict[str, Any]) -> dict[str, Any]:
    return {
        "target": "wildberries",
        "wb_api_url": sim.url,
        "wb_token_file": secret(directory, "wb-token", sim.token()),
        "wb_price_types": price_types,
    }


def ym_channel(
    sim: YmSimulator, directory: Path, price_types: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The simulator's own channel settings (its budget and apply timeout in real seconds)."""
    settings = channel_settings(sim, secret(directory, "ym-key", YM_KEY))
    return {**settings, "ym_price_types": price_types, **extra}


def ym_settings(
    db_url: str, sim: YmSimulator, directory: Path, *, key: str = "ym-key-1234", **more: Any
) -> Any:
    """One Yandex Market installation (no ``EXCHANGE_CHANNELS``) against ``sim``, business
    1001, its Api-Key ``key`` written to a file under ``directory``; ``more``: other settings."""
    path = directory / "ym-key"
    path.write_text(key, encoding="utf-8")
    return fast_settings(
        db_url,
        None,
        target="yandex-market",
        ym_api_url=sim.url,
        ym_business_id="1001",
        ym_api_key_file=str(path),
        **more,
    )
