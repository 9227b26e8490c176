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
        ("woocommerce", _pause(None, "TLSError"), False, PauseCause.TLS),
        ("woocommerce", _pause(404), False, PauseCause.API_NOT_FOUND),
        ("bitrix", _pause(None, "BitrixAuth"), False, PauseCause.BITRIX_LOGIN),
        ("bitrix", _pause(None, "BitrixConfiguration"), False, PauseCause.OTHER),
        ("rabbitmq", _pause(None, "AccessRefused"), False, PauseCause.BROKER),
    ],
)
def test_each_pause_is_named_by_what_a_person_mends(
    target: str, answer: Classification, write_refused: bool, cause: PauseCause
) -> None:
    assert cause == pause_cause(target, answer, write_refused=write_refused)


def test_a_token_is_named_only_where_the_target_has_one() -> None:
    for cause in PauseCause:
        said = pause_words(cause.value, "…", "ru")
        assert ("токен" in said) == (cause is PauseCause.TOKEN), said


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_runbook_says_each_pause_in_the_words_of_the_service() -> None:
    runbook = _flat(RUNBOOK.read_text(encoding="utf-8"))
    for cause in PAUSE_WORDS:
        assert _flat(pause_words(cause, "…", "ru")) in runbook, cause
    assert "предохранител" not in runbook.lower()


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
