"""A marketplace is no site (contract 14; research/marketplaces.md §1-§3: each answers through
its own API and has a seller's cabinet, no "site team"): a reason, its advice and ``verify``'s
column on a marketplace's channel say the marketplace, by the one rule
``words.on_marketplace`` that the busy words use too (``channel_subject``); a site's channel
keeps the site's words (mpwords item 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from exchange.cli import verifying
from exchange.ops.verify import Verification
from exchange.report.model import Entry, Report
from exchange.report.words import entry_next_check, next_check, summary_next_check
from exchange.targets.base import HeldPrice
from exchange.words import channel_subject, error_words, name, on_marketplace

MARKETPLACES = ("ozon", "wildberries", "yandex-market")


@pytest.mark.parametrize("target", MARKETPLACES)
def test_a_marketplaces_unknown_response_and_refusal_name_the_marketplace(target: str) -> None:
    assert name("reason", "unknown-response", "ru", target) == (
        "непонятный ответ площадки (unknown-response)"
    )
    assert name("reason", "http-400", "ru", target) == "площадка отклонила (http-400)"
    # the site's own words stay the site's
    assert name("reason", "unknown-response", "ru", "woocommerce") == (
        "непонятный ответ сайта (unknown-response)"
    )
    assert name("reason", "http-422", "ru") == "сайт отклонил (http-422)"


@pytest.mark.parametrize("target", MARKETPLACES)
def test_a_marketplaces_unknown_sku_reason_names_its_catalogue_never_a_shop(target: str) -> None:
    """Review wbcat finding 2: ``status`` and ``quarantine list`` (``name``) said «нет такого
    товара в магазине» on a Wildberries channel: a marketplace has no shop."""
    said = name("reason", "unknown-sku", "ru", target)
    assert said == "нет товара в каталоге площадки (unknown-sku)", said
    assert "магазин" not in said
    assert name("reason", "unknown-sku", "en", target) == (
        "not in the marketplace's catalogue (unknown-sku)"
    )
    # a shop's channel keeps the shop's words
    assert name("reason", "unknown-sku", "ru", "woocommerce") == (
        "нет такого товара в магазине (unknown-sku)"
    )


@pytest.mark.parametrize("target", MARKETPLACES)
@pytest.mark.parametrize("reason", ["retry-limit", "unknown-response", "http-400"])
def test_a_marketplaces_advice_sends_to_its_cabinet_never_to_a_site_team(
    target: str, reason: str
) -> None:
    said = next_check(reason, "ru", target=target)
    assert "сайт" not in said.lower(), said
    assert "кабинете площадки" in said, said
    site = next_check(reason, "ru", target="woocommerce")
    assert "сайт" in site.lower(), site  # a site's advice unchanged


@pytest.mark.parametrize(
    ("target", "term"),
    [("ozon", "offer_id"), ("wildberries", "vendor code"), ("yandex-market", "offerId")],
)
def test_a_marketplaces_unknown_sku_speaks_of_its_catalogue_never_of_a_shop(
    target: str, term: str
) -> None:
    """Words item 4: on a marketplace's channel ``unknown-sku`` is an offer missing from the
    marketplace's catalogue (its card to create, or the article or ``sku_source`` to correct),
    never a shop's product."""
    for lang in ("en", "ru"):
        said = next_check("unknown-sku", lang, target=target)
        assert "shop" not in said and "магазин" not in said.lower(), said
        assert term in said and "sku_source" in said, said
    ru = next_check("unknown-sku", "ru", target=target)
    assert "карточк" in ru or "предложени" in ru, ru
    assert "магазин" in next_check("unknown-sku", "ru", target="woocommerce").lower()


def test_one_rule_for_the_marketplace_words() -> None:
    for target in MARKETPLACES:
        assert on_marketplace(target)
        assert channel_subject("x", target, "ru", named=False) is not None
    for target in ("woocommerce", "bitrix", "api", "rabbitmq", None):
        assert not on_marketplace(target)
        assert channel_subject("x", target, "ru", named=False) is None


@pytest.mark.parametrize("marketplace", [True, False])
def test_verify_names_the_marketplace_in_its_column(
    marketplace: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EXCHANGE_LANG", "ru")
    differing = HeldPrice("m-1", "SKU-1", "price", Decimal("100"), Decimal("90"))
    verifying._print(Verification("ozon", [differing], []), False, marketplace=marketplace)
    printed = capsys.readouterr().out
    if marketplace:
        assert "На площадке" in printed and "В магазине" not in printed, printed
    else:
        assert "В магазине" in printed, printed


@pytest.mark.parametrize("target", ["ozon", "woocommerce"])
def test_the_quarantine_reports_advice_follows_the_entrys_channel(target: str) -> None:
    """The report's «Что сделать» (its rows and its summary by reason) for a retry limit on an
    Ozon channel sends to the cabinet; on a site's channel, to the site team as before."""
    at = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    entry = Entry(
        message_id="m-1",
        kind="price",
        aggregate="SKU-1",
        version=1,
        reason="retry-limit",
        attempts=5,
        last_status=500,
        last_error="HTTP 500",
        source_ref=None,
        first_seen=at,
        quarantined_at=at,
        rejected_row=False,
        staging_id=None,
        payload="{}",
        channel="shop",
        target=target,
    )
    said = entry_next_check(entry, "ru")
    summary = summary_next_check(Report(generated_at=at, entries=(entry,)), "retry-limit", "ru")
    for advice in (said, summary):
        if target == "ozon":
            assert "кабинете площадки" in advice and "сайт" not in advice.lower(), advice
        else:
            assert "командой сайта" in advice, advice


@pytest.mark.parametrize("target", MARKETPLACES)
@pytest.mark.parametrize("reason", ["unmapped-price-type", "not-for-this-shop"])
def test_a_marketplaces_price_type_advice_names_the_channels_own_mapping(
    target: str, reason: str
) -> None:
    """Review mpadvice item 1: with EXCHANGE_CHANNELS the shop's settings
    (EXCHANGE_WOO_PRICE_FIELDS, EXCHANGE_BITRIX_PRICE_TYPES) are refused at start, so a
    marketplace's channel's advice names its own mapping (ozon_price_types, wb_price_types,
    ym_price_types; ``false`` in TOML), in every place that says it (one rule:
    ``advice_words``)."""
    for lang in ("en", "ru"):
        said = next_check(reason, lang, target=target)
        assert "EXCHANGE_WOO_PRICE_FIELDS" not in said, said
        assert "EXCHANGE_BITRIX_PRICE_TYPES" not in said, said
        for mapping in ("ozon_price_types", "wb_price_types", "ym_price_types"):
            assert mapping in said, said
        assert "false" in said, said
    ru = next_check(reason, "ru", target=target)
    assert "магазин" not in ru.lower(), ru
    # a shop's channel keeps the shop's settings
    assert "EXCHANGE_WOO_PRICE_FIELDS" in next_check(reason, "ru", target="woocommerce")
    assert "EXCHANGE_WOO_PRICE_FIELDS" in next_check(reason, "ru")


def test_the_workbench_says_one_advice_once_for_three_marketplaces() -> None:
    """Review mpadvice item 1: the quarantine page printed the same paragraph once per
    marketplace's channel; a reason with one advice on several channels is said once."""
    from exchange.web.workbench.core import reasons_on

    targets = {"ozon": "ozon", "wildberries": "wildberries", "yandex-market": "yandex-market"}
    rows = [{"reason": "unmapped-price-type", "channel": channel} for channel in targets]
    rows.append({"reason": "unmapped-price-type", "channel": "site"})
    said = reasons_on(rows, {**targets, "site": "woocommerce"})
    assert len(said) == 2, said  # the marketplaces' advice once, the site's once
    assert {on_marketplace(target) for _, target, _newer in said} == {True, False}


def _entry(message_id: str, reason: str, target: str, last_error: str, status: int = 200) -> Entry:
    at = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    return Entry(
        message_id=message_id,
        kind="price",
        aggregate="SKU-1/retail",
        version=1,
        reason=reason,
        attempts=1,
        last_status=status,
        last_error=last_error,
        source_ref=None,
        first_seen=at,
        quarantined_at=at,
        rejected_row=False,
        staging_id=None,
        payload="{}",
        channel=target,
        target=target,
    )


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_a_summary_row_over_several_marketplaces_gives_each_kinds_advice(lang: str) -> None:
    """Review 33 item 1: the exported report's summary row of ``unknown-sku`` over an Ozon
    and a Yandex Market channel said Ozon's advice alone (offer_id, Ozon's cabinet): the
    seller of the Yandex offer was sent to the wrong catalogue. Each kind's advice is said,
    after the kind it is for; one advice shared by every channel stays one."""
    at = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    entries = (
        _entry("m-1", "unknown-sku", "ozon", "Ozon: NOT_FOUND: no product"),
        _entry("m-2", "unknown-sku", "yandex-market", "no such offer"),
        _entry("m-3", "unknown-sku", "ozon", "Ozon: NOT_FOUND: no product"),
    )
    said = summary_next_check(Report(generated_at=at, entries=entries), "unknown-sku", lang)
    ozon = next_check("unknown-sku", lang, target="ozon")
    assert "offer_id" in said and "offerId" in said, said
    lines = said.split("\n")
    assert len(lines) == 2, said
    market = "Яндекс Маркет" if lang == "ru" else "Yandex Market"
    assert lines[0].startswith("Ozon: ") and lines[1].startswith(f"{market}: "), said
    assert said.count("exchange quarantine retry --reason unknown-sku") == 2, said
    # one advice for all (a retry limit on two marketplaces): said once, as before
    both = (
        _entry("m-4", "retry-limit", "ozon", "x"),
        _entry("m-5", "retry-limit", "wildberries", "x"),
    )
    one = summary_next_check(Report(generated_at=at, entries=both), "retry-limit", lang)
    assert "\n" not in one and not one.startswith("Ozon"), one
    assert ozon != next_check("unknown-sku", lang, target="yandex-market")


@pytest.mark.parametrize("target", [*MARKETPLACES, "woocommerce"])
def test_not_for_this_shop_is_said_without_a_shop(target: str) -> None:
    """Review 33 item 2: ``not-for-this-shop`` on a marketplace's channel read «не для этого
    магазина» (a marketplace has no shop): its words name the channel, on every channel (the
    code stays: it is the contract)."""
    assert name("reason", "not-for-this-shop", "ru", target) == (
        "не для этого канала (not-for-this-shop)"
    )
    assert name("reason", "not-for-this-shop", "en", target) == (
        "not for this channel (not-for-this-shop)"
    )
    assert "магазин" not in name("event", "not-for-this-shop", "ru")


@pytest.mark.parametrize(
    ("target", "status", "error", "russian"),
    [
        (
            "ozon",
            200,
            "Ozon: NOT_FOUND: no product with this offer_id in the seller's account",
            "HTTP 200: Ozon: NOT_FOUND: в кабинете продавца нет товара с этим offer_id",
        ),
        (
            "wildberries",
            200,
            "Wildberries' catalogue has no good with vendor code 'A-1'",
            "HTTP 200: в каталоге Wildberries нет товара с артикулом продавца 'A-1'",
        ),
    ],
)
def test_the_reports_cause_is_russian_never_as_recorded_english(
    target: str, status: int, error: str, russian: str
) -> None:
    """Review 33 item 3: the exported report's «Что сделать» said «Причина: (как записано)
    HTTP 200: Ozon: NOT_FOUND: no product …» under a Russian report: the cause was looked up
    with its HTTP status before it and matched nothing. The cause is the error's Russian after
    its status, as the column «Последний HTTP-статус или ошибка» says it."""
    entry = _entry("m-1", "unknown-sku", target, error, status)
    said = entry_next_check(entry, "ru")
    assert f"Причина: {russian}" in said, said
    assert "как записано" not in said, said


def test_whole_units_are_said_as_a_russian_reader_says_them() -> None:
    """Review 33 item 3: «канал принимает только целые единицы» is English's "whole units"
    word for word; a Russian reader reads a sum without kopecks."""
    said = error_words(
        "price 1000.5: the channel takes whole units; never rounded silently (set rounding to "
        "half-up or down to round it)",
        "ru",
    )
    assert "целые единицы" not in said and "без копеек" in said, said


def test_the_notice_of_a_reason_over_several_marketplaces_gives_each_kinds_advice() -> None:
    """Review 33 item 1, the notice's side (``report.notice``, the same report words): its
    «Что сделать» of ``unknown-sku`` quarantined on an Ozon and a Yandex Market channel said
    Ozon's advice alone; it says each kind's, each on a line of its own."""
    from exchange.domain.notify import Decision, Situation
    from exchange.ops.notify import Snapshot
    from exchange.report.notice import compose

    snapshot = Snapshot(
        situation=Situation(quarantined=2),
        quarantine_by_reason={
            "unknown-sku": {"count": 2, "oldest_message_id": "m-1", "oldest_age_s": 60.0}
        },
        reason_targets={"unknown-sku": {"ozon", "yandex-market"}},
    )
    decision = Decision(send=True, gained=True)
    _, text = compose(snapshot, decision, lang="ru", database="db", workbench_url=None, every=60)
    assert "offer_id" in text and "offerId" in text, text
    lines = text.splitlines()
    assert any(line.startswith("  Что сделать: Ozon: ") for line in lines), text
    assert any(line.startswith("    Яндекс Маркет: ") for line in lines), text


def test_a_retry_limit_on_a_marketplace_never_says_it_may_have_taken_a_price_it_refused() -> None:
    """rev32p (Wildberries): a sale lock that outlasted every try (WB refused the price by
    name: "Item was added to the Sale due to high inventory") was advised «Площадка раз за
    разом не подтверждала… могла всё же принять цену». The advice says both cases: a refusal
    by name took nothing, an answer that never came may have taken the price."""
    said = next_check("retry-limit", "ru", target="wildberries")
    assert "не подтверждала" not in said, said
    assert "ничего не приняла" in said and "могла всё же принять" in said, said
