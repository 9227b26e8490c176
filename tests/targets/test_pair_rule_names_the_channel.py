"""Review words34 item 1: the words of a price quarantined or waiting by a rule of two price
types (Ozon's ``old_price`` below ``price``, Yandex Market's discount under 5 %: receipt
``PAIR_RULE``) name the channel as the seller knows it (contract 13: «канал ozon (Ozon)»,
"channel ozon (Ozon)" where EXCHANGE_CHANNELS names it; the marketplace, «Ozon», «Яндекс
Маркет», where one channel of EXCHANGE_TARGET is all there is, as the busy words do:
``words.channel_subject``), never the target's code ("a rule of ozon", "live on ozon",
"yandex-market refused its item"), in English and in Russian (``words.error_words``: the
history, ``find``, the workbench)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from exchange import app
from exchange.domain.prices import KnownPrice
from exchange.domain.verdicts import Classification, Verdict
from exchange.settings import load_settings
from exchange.targets.base import OutgoingMessage
from exchange.targets.marketplace import items
from exchange.targets.ozon.target import OzonTarget
from exchange.targets.yandex_market.target import YandexMarketTarget
from exchange.words import error_words

RULE = "min_price 120 is not below price 100: Ozon refuses it"
CODES = re.compile(r"\b(?:ozon|yandex-market)\b(?! \()")  # a code, not «channel ozon (Ozon)»


def _said(name: str | None, marketplace: str) -> str:
    return f"channel {name} ({marketplace})" if name else marketplace


def _ozon(name: str | None) -> items.Channel:
    return items.Channel(
        "ozon",
        {"retail": "price", "old": "old_price"},
        "ozon_price_types",
        {},
        dependent={"old_price": Decimal(0)},
        called=_said(name, "Ozon"),
    )


def _ym(name: str | None) -> items.Channel:
    return items.Channel(
        "yandex-market",
        {"retail": "value", "base": "discountBase"},
        "ym_price_types",
        {},
        dependent={"discountBase": None},
        called=_said(name, "Yandex Market"),
    )


class _Carried:
    """An item that carried a price and its dependent one as new (``items.Carrying``)."""

    def __init__(self) -> None:
        self.carried = [_message("m-price"), _message("m-old")]
        self.fields_of = {"m-price": "price", "m-old": "old_price"}


class _CarriedYm(_Carried):
    def __init__(self) -> None:
        super().__init__()
        self.fields_of = {"m-price": "value", "m-old": "discountBase"}


def _message(message_id: str) -> OutgoingMessage:
    return OutgoingMessage(message_id, "price", "SKU-1", 1, "{}", datetime(2026, 12, 6, tzinfo=UTC))


def _details(channel: items.Channel) -> list[str]:
    """Every detail of the pair rule's words, as the items write them."""
    dependent = next(iter(channel.dependent))
    main = "price" if channel.target == "ozon" else "value"
    carried = _Carried() if channel.target == "ozon" else _CarriedYm()
    refused = Classification(Verdict.TERMINAL, "Ozon: discount_too_big: too big")
    split = items.spread_rule(carried, channel, refused, [dependent])
    quarantined = KnownPrice("SKU-1", "retail", Decimal(1000), "RUB", 1, None, "m-9", 2)
    return [
        split["m-price"].detail,
        RULE + items.pair_words(channel, {main}, Decimal(1000)),
        RULE + items.pair_words(channel, {main}, None),
        items._waits_for_person(quarantined, channel, 60.0).detail,
        items._waits_for_1c(channel, RULE, 540.0, 60.0, None).detail,
    ]


@pytest.mark.parametrize(
    ("channel", "english", "russian"),
    [
        (_ozon("shop-oz"), "channel shop-oz (Ozon)", "канал shop-oz (Ozon)"),
        (_ozon(None), "Ozon", "Ozon"),
        (_ym("ym-main"), "channel ym-main (Yandex Market)", "канал ym-main (Яндекс Маркет)"),
        (_ym(None), "Yandex Market", "Яндекс Маркет"),
    ],
    ids=["ozon-named", "ozon-alone", "ym-named", "ym-alone"],
)
def test_the_pair_rules_words_name_the_channel_and_its_marketplace_never_the_code(
    channel: items.Channel, english: str, russian: str
) -> None:
    for detail in _details(channel):
        assert english in detail, detail
        assert not CODES.search(detail), detail
        said = error_words(detail, "ru")
        assert russian in said, said
        assert not CODES.search(said), said
        assert said != detail


def test_a_pair_rules_detail_written_before_names_the_marketplace_in_russian() -> None:
    """The history keeps the details written before (with the target's code): they read
    Russian still, the code said as the marketplace's name."""
    written = [
        "alone beside the other known prices of its SKU it breaks a rule of ozon (min_price 120 "
        "is not below price 100: Ozon refuses it); 1C may send the other price type in its next "
        "package: looked at again in 60 s, quarantined if it still breaks the rule 540 s from "
        "now, not charged",
        "yandex-market refused its item by a rule of discountBase (HTTP 400: bad): only "
        "discountBase is quarantined; this price goes again without it in 1 s, not charged",
        "waits for a person's decision on price version 2 of its SKU (price type 'retail', "
        "message_id m-9), quarantined by a rule of two price types: beside the price 1000 ozon "
        "holds it would show a pair 1C never stated; retrying m-9 sends both together, "
        "cancelling it lets this price go beside price 1000; looked at again in 60 s, not "
        "charged",
        "Ozon: x; a new old_price from 1C waits for a person's decision on this price: "
        "retrying it sends both together, cancelling it leaves price 1000 live on ozon",
    ]
    for detail in written:
        said = error_words(detail, "ru")
        assert said != detail and not CODES.search(said), said
        assert "Ozon" in said or "Яндекс Маркет" in said, said


def test_a_channel_of_exchange_channels_gives_its_name_to_the_marketplace_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The targets EXCHANGE_CHANNELS builds know their channel's name (``Channel.said``); the
    one target of EXCHANGE_TARGET none (its words name the marketplace)."""
    key = tmp_path / "key"
    key.write_text("k\n", encoding="utf-8")
    channels = {
        "oz-shop": {
            "target": "ozon",
            "ozon_api_url": "http://127.0.0.1:9",
            "ozon_client_id": "836741",
            "ozon_api_key_file": str(key),
        },
        "ym-shop": {
            "target": "yandex-market",
            "ym_api_url": "http://127.0.0.1:9",
            "ym_business_id": 1,
            "ym_api_key_file": str(key),
        },
    }
    monkeypatch.setenv("EXCHANGE_CHANNELS", json.dumps(channels))
    settings = load_settings()
    made = {c.name: app.target(c.settings) for c in settings.channels_in_force()}
    assert isinstance(made["oz-shop"], OzonTarget)
    assert isinstance(made["ym-shop"], YandexMarketTarget)
    assert made["oz-shop"].channel.said == "channel oz-shop (Ozon)"
    assert made["ym-shop"].channel.said == "channel ym-shop (Yandex Market)"
    monkeypatch.delenv("EXCHANGE_CHANNELS")
    alone = app.target(
        load_settings(target="ozon", ozon_client_id="836741", ozon_api_key_file=str(key))
    )
    assert isinstance(alone, OzonTarget) and alone.channel.said == "Ozon"
