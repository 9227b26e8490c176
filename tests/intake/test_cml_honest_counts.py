"""Issue 34 item 11: what 1C is told about a package counts honestly. An offer without prices
is said (nothing to send), and the prices of an offer without an article are not counted among
the prices staged for the shop: they are quarantined, and counted among the not-sent."""

from __future__ import annotations

import io

from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.intake.commerceml.mapping import Mapper
from exchange.intake.commerceml.parse import parse
from exchange.intake.commerceml.publish import _not_sent
from exchange.words import onec_words

RETAIL = CmlType("t-retail", "Розничная")
WHOLESALE = CmlType("t-whole", "Оптовая")


def _mapped(*offers: CmlOffer) -> Mapper:
    mapper = Mapper(
        price_types={"Розничная": "retail", "Оптовая": "wholesale"},
        sku_mode="article",
        known_types={},
        articles={},
        out=lambda _aggregate, _payload, _name: None,
    )
    parse(io.BytesIO(offers_xml(Package(types=[RETAIL, WHOLESALE], offers=offers))), mapper)
    return mapper


def test_1c_is_told_the_offers_without_prices_and_the_prices_without_an_article() -> None:
    mapper = _mapped(
        CmlOffer("P1", [CmlPrice("t-retail", "10"), CmlPrice("t-whole", "9")], article="A-1"),
        CmlOffer("P2", [CmlPrice("t-retail", "20"), CmlPrice("t-whole", "19")]),  # no article
        CmlOffer("P3", with_prices=False),
    )
    said = mapper.counts.summary()
    assert said.startswith("2 prices staged from 3 offers"), said
    assert "1 offers without prices: nothing to send" in said
    assert "1 offers without an article: their 2 prices not sent (quarantined)" in said
    assert 2 == _not_sent(mapper.counts)
    russian = onec_words(said)
    assert russian.startswith("Принято цен: 2 (предложений: 3)"), russian
    assert "предложений без цен: 1 (отправлять нечего)" in russian
    assert "предложений без артикула: 1, их цены не отправлены: 2 (в карантине)" in russian
