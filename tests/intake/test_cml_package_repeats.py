"""Within one 1C package, two offers that map to one aggregate (contract 15; issue 33, item 10).

Two goods sharing an ``Артикул`` under ``EXCHANGE_1C_SKU=article``, or one ``Ид`` twice: the
later offer in document order wins; the earlier, of another price, is an ``invalid-contract``
record («повтор в пакете») counted among the not-sent in the answer to 1C (and on the
exchange's page, which shows the same outcome); equal prices are a duplicate. Before, both were
staged under the package's one version and the later became a ``version-conflict`` against
the earlier: its price never reached the shop. On SQLite and PostgreSQL, read in this process
or (SQLite) through the scratch file ``serve`` uses.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import history
from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.testing import one_channel_messages
from exchange.domain.states import Event
from exchange.intake.commerceml import publish
from exchange.intake.commerceml.publish import Outcome, import_file
from exchange.intake.commerceml.reading import read_into_spool
from exchange.intake.staging_table import take
from exchange.settings import load_settings
from exchange.words import detail_words, onec_words

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

RETAIL = CmlType("t-retail", "Розничная", "руб")
KINDS = load_settings(database_url="sqlite://").kinds


def package(tmp_path: Path, *offers: CmlOffer) -> Path:
    path = tmp_path / "offers.xml"
    path.write_bytes(offers_xml(Package(types=[RETAIL], offers=list(offers))))
    return path


def offer(offer_id: str, value: str, article: str | None = None) -> CmlOffer:
    return CmlOffer(offer_id, [CmlPrice("t-retail", value)], article=article)


def imported(engine: Engine, path: Path, sku_mode: str = "article") -> Outcome:
    outcome = import_file(
        engine,
        path,
        name=path.name,
        price_types={"Розничная": "retail"},
        sku_mode=sku_mode,  # type: ignore[arg-type]
    )
    assert outcome.outcome == "staged", outcome
    return outcome


def taken(engine: Engine) -> list[tuple[str, bool, str | None, str | None, str]]:
    """Every message and record, in staging order: (aggregate, a record?, reason, the price
    carried, what it says)."""
    take(engine, None, KINDS, datetime.now(UTC))
    with transaction(engine, read_only=True) as c:
        rows = c.execute(
            select(
                messages.c.aggregate,
                messages.c.rejected,
                messages.c.reason,
                messages.c.payload,
                messages.c.last_error,
            ).order_by(messages.c.staging_id)
        ).all()
    return [
        (aggregate, bool(rejected), reason, _price(payload), error or "")
        for aggregate, rejected, reason, payload, error in rows
    ]


def _price(payload: str) -> str | None:
    import json

    return str(json.loads(payload)["price"])


def duplicates(engine: Engine) -> int:
    with transaction(engine, read_only=True) as c:
        return len(
            c.execute(select(history.c.id).where(history.c.event == Event.DUPLICATE.value)).all()
        )


def test_two_goods_sharing_an_article_the_later_offer_wins_and_the_earlier_is_not_sent(
    engine: Engine, tmp_path: Path
) -> None:
    path = package(
        tmp_path,
        offer("good-1", "100.00", article="ART-1"),
        offer("good-2", "120.00", article="ART-1"),
        offer("good-3", "50.00", article="ART-3"),
    )
    outcome = imported(engine, path)

    assert 1 == outcome.not_sent
    assert "1 prices repeated in the package not sent" in outcome.detail
    assert "повторённых в пакете: 1" in onec_words(outcome.detail)
    found = taken(engine)
    assert [("ART-1/retail", True), ("ART-1/retail", False), ("ART-3/retail", False)] == [
        (aggregate, record) for aggregate, record, *_ in found
    ]
    [(_, _, reason, earlier, said), (_, _, none, later, _), _] = found
    assert ("invalid-contract", "100.00", None, "120.00") == (reason, earlier, none, later)
    assert "повтор в пакете" in said and "'ART-1/retail'" in said
    assert "действует более позднее" in detail_words(said)  # the operator's page


def test_one_id_twice_at_an_equal_price_is_a_duplicate_and_not_counted(
    engine: Engine, tmp_path: Path
) -> None:
    path = package(tmp_path, offer("id-1", "100.0"), offer("id-1", "100.00"))
    outcome = imported(engine, path, sku_mode="id")

    assert 0 == outcome.not_sent
    found = taken(engine)
    assert [("id-1/retail", False, None)] == [(a, r, why) for a, r, why, *_ in found]
    assert 1 == duplicates(engine)


def test_three_offers_of_one_aggregate_the_last_ones_price_is_sent(
    engine: Engine, tmp_path: Path
) -> None:
    path = package(
        tmp_path,
        offer("id-1", "100.00"),
        offer("id-1", "110.00"),
        offer("id-1", "100.00"),
    )
    outcome = imported(engine, path, sku_mode="id")

    assert 1 == outcome.not_sent
    sent = [(price, reason) for _, record, reason, price, _ in taken(engine) if not record]
    assert [("100.00", None)] == sent
    assert 1 == duplicates(engine)


def test_the_scratch_file_serve_reads_into_on_sqlite_finds_the_repeats_too(
    engine: Engine, tmp_path: Path
) -> None:
    if is_postgres(engine):
        pytest.skip("PostgreSQL stages each frame as it is read: no scratch file")
    path = package(tmp_path, offer("g1", "1.00", "A"), offer("g2", "2.00", "A"))
    spool, scratch = tmp_path / "offers.spool", tmp_path / "offers.rows.db"
    read = read_into_spool(path, spool, {"Розничная": "retail"}, "article", {}, {}, {})
    publish._into_scratch(spool, scratch, lambda: True, None)
    result = publish.publish(engine, spool, "digest", path.name, read=lambda: read, scratch=scratch)

    assert publish.Published(result.version, True, 1) == result  # type: ignore[union-attr]
    assert [True, False] == [record for _, record, *_ in taken(engine)]


def test_with_staging_in_a_database_of_its_own_the_later_offer_wins_too(
    engine: Engine, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # EXCHANGE_STAGING_URL: the package, its record and its repeated aggregates are written in
    # the staging database; intake reads them there beside the rows.
    if is_postgres(engine):
        staged_in = make_engine(str(request.getfixturevalue("other_pg_url")))
    else:
        staged_in = make_engine(f"sqlite:///{tmp_path / 'staging.db'}")
        upgrade(staged_in)
    try:
        path = package(tmp_path, offer("id-1", "1.00"), offer("id-1", "2.00"))
        outcome = import_file(
            engine,
            path,
            name=path.name,
            price_types={"Розничная": "retail"},
            sku_mode="id",
            staging_engine=staged_in,
        )
        assert ("staged", 1) == (outcome.outcome, outcome.not_sent), outcome
        take(engine, staged_in, KINDS, datetime.now(UTC))
    finally:
        staged_in.dispose()
    with transaction(engine, read_only=True) as c:
        found = c.execute(
            select(messages.c.rejected, messages.c.payload).order_by(messages.c.staging_id)
        ).all()
    assert [(True, "1.00"), (False, "2.00")] == [(bool(r), _price(p)) for r, p in found]


def test_an_aggregate_the_reader_only_guessed_repeated_is_counted_from_the_rows(
    engine: Engine, tmp_path: Path
) -> None:
    # The reader keeps the hashes of the aggregates it wrote, not their text: two aggregates
    # of one hash are a guess that ``publish`` checks against the rows, never a record.
    path = package(tmp_path, offer("id-1", "1.00"), offer("id-2", "2.00"))
    spool = tmp_path / "offers.spool"
    read = read_into_spool(path, spool, {"Розничная": "retail"}, "id", {}, {}, {})
    assert set() == read.repeated
    read.repeated.add("id-2/retail")
    result = publish.publish(engine, spool, "digest", path.name, read=lambda: read)

    assert isinstance(result, publish.Published) and 0 == result.repeated
    assert [False, False] == [record for _, record, *_ in taken(engine)]
