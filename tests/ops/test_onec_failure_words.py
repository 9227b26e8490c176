"""``exchange status``'s «требует внимания: последний обмен с 1С завершился ошибкой (…)» says
the failure in Russian under a Russian locale, in the words the «Обмены 1С» page and 1C read
(``words.onec_words``), never the English the exchange's row records (contract 15)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlalchemy import Engine, insert

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, cml_packages
from exchange.intake.commerceml.publish import _formed_before
from exchange.ops.attention import Cause, onec_failing, say


def test_a_package_refused_as_older_is_said_in_russian_in_the_status_cause(engine: Engine) -> None:
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(cml_packages).values(
                digest="f" * 64,
                version=6,
                source_ref="1C exchange offers.xml",
                intents=1,
                staged_at=now,
                formed_at="2017-07-12T11:00:00",
                exchange="node-b",
            )
        )
        refused = _formed_before(connection, "2017-07-12T10:00:00", "node-a")
        assert refused is not None and refused.outcome == "failure"
        connection.execute(
            insert(cml_exchanges).values(
                exchange="node-a",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail=refused.detail,
            )
        )
        failing = onec_failing(connection)
    assert failing is not None
    cause = Cause("exchange-1c-failed", "onec", failing)

    russian = say(cause, "ru")

    assert "пакет сформирован 2017-07-12 10:00:00" in russian, russian
    assert "выгрузите текущие цены из 1С заново" in russian, russian
    assert not re.search(r"[A-Za-z]{3,}", russian.replace("offers.xml", "")), russian
    assert refused.detail in say(cause, "en")  # English stays English
