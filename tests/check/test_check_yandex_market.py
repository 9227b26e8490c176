"""``exchange check`` for a yandex-market channel (contract 14): the key accepted, a sample of the
latest SKUs resolved to the cabinet's offers, the limits in words; write rights are left to the
first delivery (said not verified, in words, never OK; a channel paused for a read-only key
fails). Against the Yandex Market simulator over HTTP, nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert

from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.dev.simclock import SimClock
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.ops import check
from exchange.ops.check import Status, check_target
from exchange.settings import load_settings

KEY = "ym-check-key-1"


class ToSimulator(httpx.AsyncBaseTransport):
    """Yandex's production address, answered by the simulator."""

    def __init__(self, url: str) -> None:
        self.url = httpx.URL(url)
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(
            scheme=self.url.scheme, host=self.url.host, port=self.url.port
        )
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    simulator = YmSimulator(
        KEY, 1001, clock=SimClock(0, start=1_790_000_000.0), switches=YmSwitches(apply_delay=0)
    )
    simulator.start()
    yield simulator
    simulator.stop()


def ym_check(
    ym: YmSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sample: list[str],
    key: str,
    **more: Any,
) -> list[tuple[Status, str, str]]:
    monkeypatch.setattr(check, "price_skus", lambda settings: sample)
    path = tmp_path / "ym-key"
    path.write_text(key, encoding="utf-8")
    settings = load_settings(
        target="yandex-market", ym_business_id="1001", ym_api_key_file=str(path), **more
    )
    return [(r.status, r.what, r.detail) for r in check_target(settings, ToSimulator(ym.url))]


def test_the_key_a_sample_of_skus_and_the_limits_pass_and_nothing_is_written(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (key, rights, sample, limits) = ym_check(ym, tmp_path, monkeypatch, ["SKU-1", " SKU-2 "], KEY)
    assert [Status.OK] * 3 == [key[0], sample[0], limits[0]]
    assert (Status.SKIP, check.YM_RIGHTS_UNKNOWN) == (rights[0], rights[2])
    assert "2 of 2 SKUs are offers" == sample[2]
    assert "10000 offers a minute" in limits[2] and "4 requests at once" in limits[2]
    assert 0 == ym.requests["offer-prices/updates"], "nothing written"


def test_skus_the_cabinet_lacks_are_named_and_none_found_fails(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (_, _, some, _) = ym_check(ym, tmp_path, monkeypatch, ["SKU-1", "NOSUCH-1"], KEY)
    assert Status.OK == some[0] and "'NOSUCH-1'" in some[2]
    (_, _, none, _) = ym_check(ym, tmp_path, monkeypatch, ["NOSUCH-1", "NOSUCH-2"], KEY)
    assert Status.FAIL == none[0] and "sku_source" in none[2]


def test_no_prices_yet_skips_the_sample(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (_, _, sample, _) = ym_check(ym, tmp_path, monkeypatch, [], KEY)
    assert Status.SKIP == sample[0]


def test_a_refused_key_fails_and_is_never_shown(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = ym_check(ym, tmp_path, monkeypatch, ["SKU-1"], "wrong-key-123")
    assert [Status.FAIL, Status.SKIP] == [r[0] for r in results]
    assert "Api-Key" in results[0][2]
    assert all("wrong-key-123" not in r[2] for r in results)


def test_a_channel_paused_for_a_read_only_key_fails_the_rights_line(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Engine, db_url: str
) -> None:
    """Review 32b finding 10b: a channel whose worker paused for a read-only key (research
    §3.2: 403 to a write, reads accepted) is never OK; a later worker of the channel that ran
    without the pause supersedes it (it is said not verified again)."""
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w1/yandex-market",
                channel="yandex-market",
                started_at=now - timedelta(minutes=5),
                heartbeat_at=now - timedelta(minutes=1),
                stopped_at=now - timedelta(minutes=1),
                breaker_state="closed",
                paused_reason="Yandex Market: HTTP 403: Token does not have any of the scopes",
                paused_at=now - timedelta(minutes=2),
                pause_cause="ym-read-only-key",
            )
        )
    results = ym_check(ym, tmp_path, monkeypatch, ["SKU-1"], KEY, database_url=db_url)
    key, rights = results[0], results[1]
    assert Status.OK == key[0]
    assert Status.FAIL == rights[0] and "Token does not have any of the scopes" in rights[2]
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w2/yandex-market",
                channel="yandex-market",
                started_at=now - timedelta(seconds=30),
                heartbeat_at=now - timedelta(seconds=10),
                stopped_at=now - timedelta(seconds=10),
                breaker_state="closed",
            )
        )
    results = ym_check(ym, tmp_path, monkeypatch, ["SKU-1"], KEY, database_url=db_url)
    assert Status.SKIP == results[1][0]


def test_cabinet_price_fields_the_channel_does_not_map_are_warned_of(
    ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Research §3.6.2: an update without ``discountBase`` or ``minimumForBestseller`` erases
    them. Offers whose cabinet price carries them while ``ym_price_types`` maps no price type
    to them are named (a warning: the check still passes), so the seller learns it before the
    first delivery erases the cabinet's discount (review ymfix, finding 4)."""
    from decimal import Decimal

    ym.update(
        [
            {
                "offerId": "SKU-1",
                "price": {
                    "value": Decimal(1000),
                    "currencyId": "RUR",
                    "discountBase": Decimal(1290),
                    "minimumForBestseller": Decimal(900),
                },
            },
            {"offerId": "SKU-2", "price": {"value": Decimal(500), "currencyId": "RUR"}},
        ]
    )
    results = ym_check(ym, tmp_path, monkeypatch, ["SKU-1", "SKU-2"], KEY)
    (warned,) = [
        r for r in results if r[1] == "Yandex Market: price fields the channel does not send"
    ]
    assert Status.OK == warned[0] and warned[2].startswith("warning: ")
    assert "discountBase on 1 of 2 sampled offers ('SKU-1')" in warned[2]
    assert "minimumForBestseller on 1 of 2" in warned[2]
    mapped = ym_check(
        ym,
        tmp_path,
        monkeypatch,
        ["SKU-1", "SKU-2"],
        KEY,
        ym_price_types={"retail": "value", "old": "discountBase", "min": "minimumForBestseller"},
    )
    assert all("does not send" not in r[1] for r in mapped)
    assert 0 == ym.requests["offer-prices/updates"], "nothing written by the check"
