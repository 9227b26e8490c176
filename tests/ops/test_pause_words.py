"""Every pause says what it is and whom to ask, in the target's own words, and the same words
everywhere (issue 34 item 4): ``status``'s causes, the notice, ``run --until-idle``'s last line
and docs/runbook.ru.md all say ``ops.attention.pause_words``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert

from exchange.cli.serving import _left_line
from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.domain.notify import Decision, Stop
from exchange.domain.pause import PauseCause, pause_cause
from exchange.domain.policy import KindPolicies
from exchange.domain.verdicts import Classification, Verdict
from exchange.ops import notify
from exchange.ops.attention import PAUSE_WORDS, attention, pause_words
from exchange.ops.status import status
from exchange.report.notice import compose

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.ru.md"
RUNBOOK_EN = RUNBOOK.with_name("runbook.md")  # its English translation
KINDS = KindPolicies.of({})


def _pause(status_code: int | None, error_class: str | None = None) -> Classification:
    return Classification(Verdict.PAUSE, "answer", http_status=status_code, error_class=error_class)


@pytest.mark.parametrize(
    ("target", "answer", "write_refused", "cause"),
    [
        ("api", _pause(401), False, PauseCause.TOKEN),
        ("api", _pause(403), False, PauseCause.TOKEN),
        ("woocommerce", _pause(401, "KeyRefused"), False, PauseCause.WOO_KEY),
        ("woocommerce", _pause(401, "KeyRefused"), True, PauseCause.READ_ONLY_KEY),
        # Yandex Market's read-only Api-Key: its own cabinet's words (review 32 finding 5).
        ("yandex-market", _pause(403, "MarketplaceKeyRefused"), True, PauseCause.YM_READ_ONLY_KEY),
        # Ozon's key without the prices role: Ozon's own words (review 32b finding 5).
        ("ozon", _pause(403, "MarketplaceKeyRefused"), True, PauseCause.OZON_READ_ONLY_KEY),
        # Ozon's 400 code 3 of a Client-Id it cannot read: the setting, not the key (review 32c).
        ("ozon", _pause(400, "OzonClientIdRefused"), False, PauseCause.OZON_CLIENT_ID),
        # Ozon's "Offer not signed" and a key bound to other IPs: no new key mends them (review
        # ozon, item 4: both said "create a new key").
        ("ozon", _pause(403, "OzonOfferNotSigned"), False, PauseCause.OZON_OFFER),
        ("ozon", _pause(403, "OzonKeyIpRestricted"), False, PauseCause.OZON_KEY_IP),
        # A refused marketplace key: that marketplace's own words, never both.
        ("ozon", _pause(404, "MarketplaceKeyRefused"), False, PauseCause.OZON_KEY),
        ("yandex-market", _pause(401, "MarketplaceKeyRefused"), False, PauseCause.YM_KEY),
        ("woocommerce", _pause(None, "TLSError"), False, PauseCause.TLS),
        ("woocommerce", _pause(404), False, PauseCause.API_NOT_FOUND),
        # Plain permalinks and no ?rest_route= either: the page is a 200, or rest_no_route 404.
        ("woocommerce", _pause(200, "NoRestApi"), False, PauseCause.WOO_NO_REST_API),
        ("woocommerce", _pause(404, "NoRestApi"), False, PauseCause.WOO_NO_REST_API),
        # OAuth "Invalid signature" for a URL that is not the shop's home: not the key.
        ("woocommerce", _pause(401, "AddressRefused"), False, PauseCause.WOO_ADDRESS),
        ("woocommerce", _pause(None, "SettingMissing"), False, PauseCause.WOO_KEY_MISSING),
        ("bitrix", _pause(None, "SettingMissing"), False, PauseCause.BITRIX_LOGIN_MISSING),
        ("bitrix", _pause(None, "BitrixAuth"), False, PauseCause.BITRIX_LOGIN),
        ("bitrix", _pause(None, "BitrixConfiguration"), False, PauseCause.OTHER),
        ("rabbitmq", _pause(None, "AccessRefused"), False, PauseCause.BROKER),
        ("bitrix", _pause(None, "KnownPricesUnread"), False, PauseCause.KNOWN_PRICES),
        # Wildberries' own (review32 item 5): never WooCommerce's or Bitrix's advice.
        ("wildberries", _pause(401, "TokenRefused"), False, PauseCause.WB_TOKEN),
        ("wildberries", _pause(None, "TokenRefused"), False, PauseCause.WB_TOKEN),
        ("wildberries", _pause(None, "ReadOnlyToken"), False, PauseCause.WB_READ_ONLY_TOKEN),
        ("wildberries", _pause(401, "ReadOnlyToken"), False, PauseCause.WB_READ_ONLY_TOKEN),
        ("wildberries", _pause(200), True, PauseCause.WB_READ_ONLY_TOKEN),
    ],
)
def test_each_pause_is_named_by_what_a_person_mends(
    target: str, answer: Classification, write_refused: bool, cause: PauseCause
) -> None:
    assert cause == pause_cause(target, answer, write_refused=write_refused)


@pytest.mark.parametrize(
    ("cause", "own", "other"),
    [
        (PauseCause.OZON_KEY, ("Ozon", "ozon_api_key_file"), ("Яндекс", "Yandex", "ym_api_key")),
        (PauseCause.YM_KEY, ("ym_api_key_file",), ("Ozon", "ozon_api_key")),
    ],
)
def test_a_refused_marketplace_key_names_that_marketplace_alone(
    cause: PauseCause, own: tuple[str, ...], other: tuple[str, ...]
) -> None:
    """The key Ozon refused is Ozon's: its words name Ozon's cabinet and key file, never
    Yandex Market's (and the other way round); «маркетплейс» names neither."""
    for lang in ("ru", "en"):
        said = pause_words(cause.value, "ANSWER", lang)
        assert all(word in said for word in own), said
        assert not any(word in said for word in other), said
        assert "маркетплейс" not in said and "marketplace" not in said, said
    assert "Яндекс Маркет" in pause_words(PauseCause.YM_KEY.value, "…", "ru")
    assert "Yandex Market" in pause_words(PauseCause.YM_KEY.value, "…", "en")


def test_the_targets_pauses_carry_the_class_their_cause_reads() -> None:
    """The targets' own pauses name their class (not a detail a test guesses): the key or the
    login not set, the REST API not found, the address refused."""
    targets = Path(__file__).resolve().parents[2] / "exchange" / "targets"
    woo = (targets / "woocommerce" / "target.py").read_text(encoding="utf-8")
    bitrix = (targets / "bitrix" / "target.py").read_text(encoding="utf-8")
    for source in (woo, bitrix):
        said = re.search(r"is not set\",\s*error_class=SETTING_MISSING", source)
        assert said, "a missing setting is a SettingMissing pause"
    assert woo.count("error_class=NO_REST_API") == 2 and "error_class=ADDRESS_REFUSED" in woo


NEW_CAUSES = {
    PauseCause.WOO_NO_REST_API: ("EXCHANGE_WOO_URL", "/wp-json/", "?rest_route=", "WooCommerce"),
    PauseCause.WOO_ADDRESS: ("EXCHANGE_WOO_URL", "WordPress"),
    PauseCause.WOO_KEY_MISSING: ("EXCHANGE_WOO_KEY", "EXCHANGE_WOO_SECRET"),
    PauseCause.BITRIX_LOGIN_MISSING: ("EXCHANGE_BITRIX_USER", "EXCHANGE_BITRIX_PASSWORD"),
    PauseCause.KNOWN_PRICES: ("EXCHANGE_DATABASE_URL", "EXCHANGE_RETRY_MAX_DELAY"),
}


@pytest.mark.parametrize("cause", list(NEW_CAUSES))
def test_each_new_pause_says_what_it_is_and_whom_to_ask_in_both_languages(
    cause: PauseCause,
) -> None:
    ru, en = pause_words(cause.value, "ANSWER", "ru"), pause_words(cause.value, "ANSWER", "en")
    other_ru, other_en = (pause_words(PauseCause.OTHER.value, "ANSWER", x) for x in ("ru", "en"))
    assert ru != other_ru and en != other_en, "words of its own, not the generic refusal's"
    assert ru.startswith("Доставка остановлена: ") and en.startswith("Delivery paused: ")
    assert "ANSWER" in ru and "ANSWER" in en
    assert "администратор" in ru.lower() and "administrator" in en  # whom to ask
    for name in NEW_CAUSES[cause]:
        assert name in ru and name in en, name
    letters = re.sub(
        r"[A-Z_]{4,}|ANSWER|WooCommerce|WordPress|REST|API|/wp-json/|\?rest_route=|exchange run"
        r"|exchange resume",
        "",
        ru,
    )
    assert not re.search(r"[A-Za-z]{3,}", letters), ru
    assert "не принял ключ" not in ru  # neither an address refused nor a key unset is a key refused


def test_a_token_is_named_only_where_the_target_has_one() -> None:
    for cause in PauseCause:
        said = pause_words(cause.value, "…", "ru")
        tokens = (PauseCause.TOKEN, PauseCause.WB_TOKEN, PauseCause.WB_READ_ONLY_TOKEN)
        assert ("токен" in said) == (cause in tokens), said


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_runbook_says_each_pause_in_the_words_of_the_service() -> None:
    runbook = _flat(RUNBOOK.read_text(encoding="utf-8"))
    for cause in PAUSE_WORDS:
        assert _flat(pause_words(cause, "…", "ru")) in runbook, cause
    assert "предохранител" not in runbook.lower()


def test_the_english_runbook_says_each_pause_in_the_english_words_of_the_service() -> None:
    """The translation quotes what an engineer on call reads with EXCHANGE_LANG=en, word for
    word: a pause's words changed in the code and not in docs/runbook.md fail here."""
    runbook = _flat(RUNBOOK_EN.read_text(encoding="utf-8"))
    for cause in PAUSE_WORDS:
        assert _flat(pause_words(cause, "…", "en")) in runbook, cause


def test_status_the_notice_and_runs_last_line_say_the_same_words(engine: Engine) -> None:
    answer = "HTTP 401: the shop refused the key (basic)"
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="shop-1",
                started_at=now,
                heartbeat_at=now,
                breaker_state="closed",
                paused_reason=answer,
                paused_at=now,
                pause_cause="woo-key",
            )
        )
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, now, KINDS)
        found = attention(connection, None, figures, now, KINDS, 60.0)
        snapshot = notify.snapshot(connection, now, KINDS, stalled_after=60.0)
    expected_ru, expected_en = (pause_words("woo-key", answer, lang) for lang in ("ru", "en"))
    assert [c.words("ru") for c in found.causes] == [expected_ru]
    assert [c.words() for c in found.causes] == [expected_en]
    assert "WooCommerce" in expected_ru and "EXCHANGE_WOO_KEY" in expected_ru
    decision = Decision(send=True, new_stops=frozenset({Stop.TOKEN}))
    _, text = compose(snapshot, decision, lang="ru", database="db", workbench_url=None, every=60)
    assert expected_ru in text
    assert expected_en in _left_line(figures, None, "woo-key", answer)
    russian = _left_line(figures, None, "woo-key", answer, "ru")
    assert russian.startswith("осталось: ждут доставки: 0") and expected_ru in russian
