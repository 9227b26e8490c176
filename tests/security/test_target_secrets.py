"""The WooCommerce key and secret and the Bitrix password never appear in what the service
says: classifications (which reach history and reports), log lines, ``Settings.secrets()``
names them for every mask (contract 10: "the key never in a log")."""

from __future__ import annotations

import asyncio
import logging

import pytest
from conformance import price

from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.woosim import WooSimulator
from exchange.settings import load_settings
from exchange.targets.bitrix.target import BitrixTarget
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget

KEY, SECRET, PASSWORD = "ck_0123456789abcdef", "cs_fedcba9876543210", "Пароль-секрет-42"


def test_settings_name_the_targets_secrets_for_every_mask() -> None:
    settings = load_settings(
        target="woocommerce", woo_key=KEY, woo_secret=SECRET, bitrix_password=PASSWORD
    )
    assert {KEY, SECRET, PASSWORD} <= set(settings.secrets())


def test_refused_and_failing_answers_never_carry_the_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    woo, bitrix = WooSimulator(KEY, "cs_other"), BitrixSimulator("exchange", "other")
    woo.start()
    bitrix.start()

    async def scenario() -> list[str]:
        targets = [
            WooCommerceTarget(
                woo.url,
                lambda: (KEY, SECRET),
                MemorySkuIds(),
                price_fields={"retail": "regular_price"},
                timeout=2.0,
            ),
            BitrixTarget(
                bitrix.url + PATH,
                "exchange",
                lambda: PASSWORD,
                catalog_id="c",
                price_types={"retail": "Розничная"},
                max_import_steps=3,
                timeout=2.0,
            ),
        ]
        texts = []
        for target in targets:
            answers = await target.send([price("SKU-1", 1)])
            texts += [repr(a) for a in answers] + [repr(await target.health())]
            await target.aclose()
        return texts

    try:
        texts = asyncio.run(scenario())
    finally:
        woo.stop()
        bitrix.stop()
    everything = "\n".join(texts) + caplog.text
    for secret in (SECRET, PASSWORD):
        assert secret not in everything
    # OAuth 1.0a over plain HTTP (WooCommerce's only scheme there) carries the consumer key in
    # the request's query by design, so httpx's own line of the URL holds it (the service's
    # log handler masks it, RedactSecrets); no answer and no other line may.
    assert KEY not in "\n".join(texts)
    others = [
        r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))
    ]
    assert KEY not in "\n".join(others)
    assert "pause" in everything
