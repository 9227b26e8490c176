"""The site model's withholding switch, a test device (not a claim about any real site): a sharp
price drop is taken and withheld from buyers until released, as a marketplace's price
quarantine does (contract 13, ``withheld``)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from exchange.dev.sitemodel import SiteModel


def _body(version: int, price: str, sku: str = "S1") -> bytes:
    return json.dumps(
        {
            "message_id": f"m-{sku}-{version}",
            "kind": "price",
            "aggregate": sku,
            "version": version,
            "payload": {"sku": sku, "price": price},
            "created_at": "2026-12-05T10:00:00Z",
        }
    ).encode()


def _send(model: SiteModel, version: int, price: str, sku: str = "S1") -> tuple[int, Any]:
    result = model.single(_body(version, price, sku), f"m-{sku}-{version}")
    return result.reply.status, result.reply.json()


def test_a_sharp_drop_is_withheld_until_released_and_a_newer_price_replaces_it() -> None:
    model = SiteModel(withhold_drops=Decimal("0.5"))
    assert _send(model, 1, "100.00")[0] == 200
    assert _send(model, 2, "60.00")[0] == 200  # a drop above half: applied
    status, body = _send(model, 3, "30.00")  # to half of 60 or below: withheld
    assert status == 202 and body["withheld"] is True
    assert model.effect_counts["m-S1-3"] == 0  # buyers still see 60.00
    assert _send(model, 3, "30.00") == (status, body)  # the same key answers as the first time
    assert _send(model, 2, "60.00")[0] == 200  # v2's stored answer, replayed
    assert model.withheld_state("m-S1-3").json() == {"state": "withheld"}
    assert model.withheld_route("POST", "/api/v1/withheld/m-S1-3/release").json() == {
        "state": "live"
    }
    assert model.effect_counts["m-S1-3"] == 1
    assert model.withheld_state("m-S1-3").json() == {"state": "live"}
    assert model.release("m-S1-3").status == 409  # no longer withheld
    # withheld again, then replaced by a newer price before anyone confirmed it
    assert _send(model, 4, "10.00")[0] == 202
    assert _send(model, 5, "29.00")[0] == 200
    assert model.withheld_state("m-S1-4").json() == {"state": "replaced"}
    assert model.withheld_state("unknown").status == 404


def test_without_the_switch_nothing_is_withheld() -> None:
    model = SiteModel()
    assert _send(model, 1, "100.00")[0] == 200
    assert _send(model, 2, "1.00")[0] == 200
    assert model.withheld_route("GET", "/api/v1/withheld/m-S1-2") is not None
    assert model.withheld_state("m-S1-2").status == 404
