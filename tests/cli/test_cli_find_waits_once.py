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


def test_the_wait_is_counted_from_now_to_its_due_time_not_the_figure_written_when_it_began() -> (
    None
):
    """Words item 3: Ozon's hold wrote «уйдёт через 3600 с» when the wait began; ``find`` an
    hour later said the same. The figure is counted from the due time (``next_try_at``) and
    the current clock: 1235 s left (said in minutes: 20 min 35 s), and 0 once it is due."""
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    row = _row(HELD.replace("60 s", "3600 s"))
    row["next_try_at"] = (now + timedelta(seconds=1234.2)).isoformat()
    ru = _found_facts(row, "UTC", "ru", now)
    assert "уйдёт через 20 мин 35 с" in ru and "3600" not in ru, ru
    en = _found_facts(row, "UTC", "en", now)
    assert "goes in 1235 s" in en, en  # English shows the detail as recorded
    row["next_try_at"] = (now - timedelta(seconds=5)).isoformat()
    assert "уйдёт через 0 с" in _found_facts(row, "UTC", "ru", now)


def test_a_wait_for_a_persons_decision_reads_as_such_never_as_a_wait_for_the_marketplace() -> None:
    """Review wait34: a price waiting for a person's decision on its SKU's main price,
    quarantined by a rule of two price types (``find``'s ``awaiting_person``), read «ждёт
    площадку» / "waiting for the marketplace" in ``exchange find`` and ``history``."""
    from exchange.cli.reading import _state_shown

    row = {**_row("waits for a person's decision on price version 2"), "awaiting_person": True}
    assert _state_shown(row, "ru") == "ждёт решения оператора по основной цене"
    en = _state_shown(row, "en")
    assert en == "waiting for an operator's decision on the main price", en


def test_every_channels_countdown_is_counted_from_now_not_from_the_last_look() -> None:
    """Seller review 35: Yandex Market's budget («отправим через 58 с»), its read-back, Ozon's
    open circle and a price waiting for its companion said the figure written at the last look;
    ``find`` (its clock injected) counts each from now to the due time."""
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    for said, en in (
        (
            "held: Yandex Market's budget of 20 offers a minute is spent; sent in 58 s, not "
            "charged",
            "sent in 13 s",
        ),
        ("HTTP 200: Yandex Market accepted offer 'SKU-1'; read back in 1.5 s", "read back in 13 s"),
    ):
        row = _row(said)
        row["next_try_at"] = (now + timedelta(seconds=12.4)).isoformat()
        english = _found_facts(row, "UTC", "en", now)
        assert en in english, english
        russian = _found_facts(row, "UTC", "ru", now)
        assert "через 13 с" in russian and "58" not in russian, russian


def test_a_wait_whose_words_say_no_figure_says_when_it_looks_again() -> None:
    """Words 38 item 2: a wait said again writes no history row (``_same_wait``), only the
    delivery's next look moves; ``find`` gave no «looks again in N s» for a wait whose words
    carry no figure (Yandex's quarantine holding the price before it), where ``--json`` has
    it. It says the next look, counted from now to the delivery's ``next_try_at``; a retry's
    next attempt likewise; words with a figure of their own keep only theirs."""
    from datetime import UTC, datetime, timedelta

    from exchange.targets.yandex_market.answers import behind_words

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    row = _row(behind_words("SKU-1", "1000", "value=300 (verdicts: PRICE_CHANGE)"))
    row["next_try_at"] = (now + timedelta(seconds=41.2)).isoformat()
    en = _found_facts(row, "UTC", "en", now)
    assert en.endswith("looks again in 42 s"), en
    ru = _found_facts(row, "UTC", "ru", now)
    assert ru.endswith("следующая проверка через 42 с"), ru
    retry = {**_row("HTTP 503"), "awaiting": False, "next_try_at": row["next_try_at"]}
    assert _found_facts(retry, "UTC", "en", now).endswith("tried again in 42 s")
    held = {**_row(HELD), "next_try_at": row["next_try_at"]}
    said = _found_facts(held, "UTC", "en", now)
    assert "goes in 42 s" in said and "again in" not in said, said


def test_the_kept_wait_row_does_not_claim_to_be_the_last_look() -> None:
    """Words 38 item 2: the one history row ``_same_wait`` keeps said «at the last look» with
    its first look's time while later looks happened. The words say «when looked up», true of
    the row's own time and of the delivery's last look alike; words stored before still
    read in Russian."""
    from exchange.targets.yandex_market.answers import behind_words
    from exchange.words import error_words

    for said in (
        behind_words("SKU-1", "1000", "value=300 (verdicts: PRICE_CHANGE)"),
        behind_words("SKU-1", "1000", "value=300 (verdicts: PRICE_CHANGE)", shown="300"),
    ):
        assert "last look" not in said and said.startswith("When looked up, "), said
        ru = error_words(said, "ru")
        assert ru.startswith("При проверке ") and "последней проверке" not in ru, ru
        old = error_words(said.replace("When looked up, ", "At the last look, "), "ru")
        assert old == ru, old
