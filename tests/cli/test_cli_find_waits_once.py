"""``exchange find`` says why a delayed price waits once (sellerwords item 2): Ozon's hold
already reads «ждёт: за этот час…» ("held: …"), and the row never says «ждёт: ждёт: …»; a
retry's detail still follows «ждёт: »."""

from __future__ import annotations

from exchange.cli.reading import _found_facts


def _row(last_error: str) -> dict[str, object]:
    return {
        "state": "delayed",
        "awaiting": True,
        "kind": "price",
        "aggregate": "SKU-1",
        "version": 1,
        "reason": None,
        "source_ref": None,
        "updated_at": "2026-01-01T00:00:00+00:00",
        "last_error": last_error,
    }


HELD = (
    "held: 10 price updates of this product sent within the hour (Ozon's limit); goes in 60 s, "
    "not charged"
)


def test_ozons_hold_says_it_waits_once_in_russian_and_english() -> None:
    ru = _found_facts(_row(HELD), "UTC", "ru")
    assert "ждёт: за этот час уже отправлено 10" in ru and "ждёт: ждёт" not in ru, ru
    en = _found_facts(_row(HELD), "UTC", "en")
    assert "held: 10 price updates" in en and "waits: held" not in en, en


def test_a_retrys_detail_still_follows_the_word_waits() -> None:
    ru = _found_facts(_row("HTTP 503"), "UTC", "ru")
    assert "ждёт: HTTP 503" in ru, ru
