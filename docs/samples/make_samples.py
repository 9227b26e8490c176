"""Render the sample reports in docs/samples/ from synthetic data (no database needed).

    .venv/bin/python docs/samples/make_samples.py [FOLDER]

The data is made up but shaped like a real quarantine: prices the site refused, a posting
that kept failing, rows 1C wrote broken, a gap, a price superseded after quarantine, and a
payload field (``inn``) masked as ``EXCHANGE_REPORT_MASK_FIELDS=["inn"]`` would.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from exchange.domain.identity import message_id
from exchange.report.collect import export
from exchange.report.mask import Redactor
from exchange.report.model import FORMATS, DayActivity, Entry, HistoryEvent, Report

HERE = Path(__file__).resolve().parent
NOW = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
MASK = Redactor(mask_fields=["inn"])


def at(hours_ago: float) -> datetime:
    return NOW - timedelta(hours=hours_ago)


def price(sku: str, value: str) -> str:
    return json.dumps(
        {"sku": sku, "price": value, "currency": "RUB", "price_type": "retail"}, ensure_ascii=False
    )


def sent_and_refused(taken: float, status: int, detail: str) -> tuple[HistoryEvent, ...]:
    return (
        HistoryEvent(at(taken), "taken", None, "new", "shop-exchange-1"),
        HistoryEvent(
            at(taken - 0.02),
            "quarantined",
            "in_progress",
            "quarantined",
            "shop-exchange-1",
            1,
            leased_at=at(taken - 0.01),
            http_status=status,
            detail=detail,
        ),
    )


def entry(
    kind: str,
    aggregate: str,
    version: int,
    reason: str,
    payload: str,
    *,
    taken: float,
    source_ref: str | None,
    history: tuple[HistoryEvent, ...] = (),
    last_status: int | None = None,
    last_error: str | None = None,
    attempts: int = 0,
    rejected: int | None = None,
    superseded: bool = False,
) -> Entry:
    shown, hidden = MASK.payload(payload)
    attempted = [e.at for e in history if e.attempt is not None]
    return Entry(
        message_id=f"rejected-{rejected}" if rejected else message_id(kind, aggregate, version),
        kind=kind,
        aggregate=aggregate,
        version=version,
        reason=reason,
        attempts=attempts,
        last_status=last_status,
        last_error=MASK.optional(last_error, hidden),
        source_ref=source_ref,
        first_seen=at(taken),
        quarantined_at=history[-1].at if history else at(taken),
        rejected_row=rejected is not None,
        staging_id=rejected,
        payload=shown,
        last_attempt=max(attempted, default=None),
        superseded_after_quarantine=superseded,
        history=history,
    )


def retries(taken: float, attempts: int) -> tuple[HistoryEvent, ...]:
    events = [HistoryEvent(at(taken), "taken", None, "new", "shop-exchange-1")]
    for n in range(1, attempts + 1):
        t = taken - n * 0.2
        last = n == attempts
        events.append(
            HistoryEvent(
                at(t - 0.01),
                "quarantined" if last else "retry-scheduled",
                "in_progress",
                "quarantined" if last else "delayed",
                "shop-exchange-2",
                n,
                leased_at=at(t),
                http_status=503,
                delay_s=None if last else round(2.0**n, 1),
                detail=(
                    "503 Service Unavailable (attempt 5 of 5)"
                    if last
                    else "503 Service Unavailable"
                ),
            )
        )
    return tuple(events)


def sample() -> Report:
    entries = [
        entry(
            "price",
            "SKU-17",
            184,
            "http-422",
            price("SKU-17", "840.00"),
            taken=50,
            source_ref="Установка цен номенклатуры 000184",
            history=sent_and_refused(50, 422, '422 {"error": "price below purchase price"}'),
            last_status=422,
            last_error='422 {"error": "price below purchase price"}',
            attempts=1,
            superseded=True,
        ),
        entry(
            "price",
            "SKU-204",
            3,
            "http-422",
            price("SKU-204", "1290.50"),
            taken=20,
            source_ref="Установка цен номенклатуры 000191",
            history=sent_and_refused(20, 422, '422 {"error": "unknown sku SKU-204"}'),
            last_status=422,
            last_error='422 {"error": "unknown sku SKU-204"}',
            attempts=1,
        ),
        entry(
            "financial_posting",
            "РТУ-000512",
            1,
            "retry-limit",
            json.dumps(
                {"document": "РТУ-000512", "line": 1, "amount": "15400.00", "inn": "7701234567"},
                ensure_ascii=False,
            ),
            taken=30,
            source_ref="Реализация товаров и услуг РТУ-000512 от 28.11.2026",
            history=retries(30, 5),
            last_status=503,
            last_error="503 Service Unavailable (attempt 5 of 5)",
            attempts=5,
        ),
        entry(
            "financial_posting",
            "РТУ-000530",
            4,
            "sequence-gap",
            json.dumps({"document": "РТУ-000530", "line": 4, "amount": "310.00"}),
            taken=12,
            source_ref="Реализация товаров и услуг РТУ-000530",
            history=(
                HistoryEvent(at(12), "taken", None, "new", "shop-exchange-1"),
                HistoryEvent(
                    at(11.8),
                    "sequence-gap",
                    "new",
                    "quarantined",
                    "shop-exchange-1",
                    detail="version 3 never arrived within 600 s",
                ),
            ),
            last_error="version 3 never arrived within 600 s",
        ),
        entry(
            "price",
            "SKU-BAD",
            7,
            "invalid-contract",
            '{"sku": "SKU-BAD", "price": "1 200,00", "currency": "руб"',
            taken=6,
            source_ref="Установка цен номенклатуры 000777",
            history=(
                HistoryEvent(
                    at(6),
                    "rejected",
                    None,
                    "quarantined",
                    "shop-exchange-1",
                    detail="payload is not valid JSON: Expecting ',' delimiter: line 1 column 62 (char 61)",
                ),
            ),
            last_error="payload is not valid JSON: Expecting ',' delimiter: line 1 column 62 (char 61)",
            rejected=40211,
        ),
        entry(
            "stock_level",
            "SKU-3",
            1,
            "unknown-kind",
            '{"qty": 5, "warehouse": "Основной склад"}',
            taken=2,
            source_ref="Остатки товаров 000001",
            history=(
                HistoryEvent(
                    at(2),
                    "rejected",
                    None,
                    "quarantined",
                    "shop-exchange-1",
                    detail="unknown kind 'stock_level'",
                ),
            ),
            last_error="unknown kind 'stock_level'",
            rejected=40250,
        ),
    ]
    rng = random.Random(14)
    days = tuple(
        DayActivity(
            (NOW - timedelta(days=13 - i)).date(),
            delivered=rng.randint(900, 2600) if i != 9 else 310,
            failed=rng.randint(5, 60) if i != 9 else 420,
        )
        for i in range(14)
    )
    entries.sort(key=lambda e: e.quarantined_at)
    return Report(generated_at=NOW, entries=tuple(entries), activity=days)


def main(folder: Path = HERE) -> None:
    report = sample()
    for fmt in FORMATS:
        path = folder / f"quarantine-sample.{fmt}"
        export(report, fmt, "ru", path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
