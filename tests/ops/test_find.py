"""``find`` finds what people know (issue 24, item 5; contract 6 ``exchange find``): the
beginning of a SKU or an aggregate, of any word of the 1C document (``offers.xml``, ``1C
exchange``), of a product name where the source gave one; ``%`` and ``_`` are what they are;
a price says its price; the prefix search reads an index on both databases; a product's name
comes in through the staging table and the JSON intake and is never sent to a shop."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, text

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import aggregates, messages
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.commerceml.publish import save_catalogue
from exchange.intake.intents import intent_row
from exchange.intake.staging_table import take
from exchange.ops.find import _like_prefix, count_found, find, matching
from exchange.targets.base import OutgoingMessage

REF = "1C exchange offers.xml 2026-11-30T10:00:00"


def _staged(engine: Engine) -> None:
    stage(
        engine,
        [
            price_row("SKU-0042", 1, "840.00", aggregate="SKU-0042/retail", source_ref=REF),
            price_row(
                "SKU-0043", 1, "99.50", aggregate="SKU-0043/retail", name="Кофе молотый 250 г"
            ),
            price_row("SKUX1", 1, aggregate="SKUX1/retail", name="Чай"),
            price_row("SKU_1", 1, aggregate="SKU_1/retail"),
        ],
    )
    take(engine, None, dict(DEFAULT_KINDS), datetime.now(UTC))


def _found(engine: Engine, term: str) -> set[str]:
    with transaction(engine, read_only=True) as connection:
        return {row["aggregate"] for row in find(connection, term)}


def test_find_by_the_beginning_of_a_sku_aggregate_document_word_or_name(engine: Engine) -> None:
    _staged(engine)
    assert _found(engine, "SKU-004") == {"SKU-0042/retail", "SKU-0043/retail"}  # a SKU's start
    assert _found(engine, "SKU-0042/re") == {"SKU-0042/retail"}  # an aggregate's start
    assert _found(engine, "offers.xml") == {"SKU-0042/retail"}  # a word of the 1C document
    assert _found(engine, "1C exchange") == {"SKU-0042/retail"}  # its beginning
    assert _found(engine, "xchange") == set()  # the middle of a word is not a beginning
    assert _found(engine, "кофе") == {"SKU-0043/retail"}  # a name, as people type it
    assert _found(engine, "молот") == {"SKU-0043/retail"}  # any word of a name
    assert _found(engine, "Установка цен") == {  # price_row's own document, by its start
        "SKU-0043/retail",
        "SKUX1/retail",
        "SKU_1/retail",
    }
    assert _found(engine, "") == set()


def test_percent_and_underscore_are_themselves_never_wildcards(engine: Engine) -> None:
    _staged(engine)
    assert _found(engine, "SKU_") == {"SKU_1/retail"}  # not SKU-0042 nor SKUX1
    assert _found(engine, "SKU%") == set()
    assert _like_prefix("a%b_c\\") == "a\\%b\\_c\\\\%"


def test_a_price_says_its_price_currency_name_and_date(engine: Engine) -> None:
    _staged(engine)
    with transaction(engine, read_only=True) as connection:
        (row,) = find(connection, "SKU-0043")
        assert count_found(connection, "SKU-004") == 2
    assert (row["price"], row["currency"], row["name"]) == ("99.50", "RUB", "Кофе молотый 250 г")
    assert row["created_at"]


def test_a_sku_aggregate_or_message_id_is_found_by_its_beginning_whatever_its_case(
    engine: Engine,
) -> None:
    """``ART-0`` and ``art-0`` find the same, and so do ``АРТ`` and ``арт`` (neither database
    folds Cyrillic case by itself); so does a rejected row's aggregate, kept beside no
    aggregate row."""
    stage(
        engine,
        [
            price_row("ART-0001", 1, aggregate="ART-0001/retail"),
            price_row("АРТ-7", 1, aggregate="АРТ-7/retail"),
            price_row("Кофе-1", 1, aggregate="Кофе-1/retail"),
            {**price_row("БРАК-1", 1, aggregate="БРАК-1/retail"), "payload": "not json"},
        ],
    )
    take(engine, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    for term in ("ART-0", "art-0", "Art-0001/RE", "price.art-0001"):
        assert _found(engine, term) == {"ART-0001/retail"}, term
    for term in ("АРТ", "арт", "Арт-7/Ret"):
        assert _found(engine, term) == {"АРТ-7/retail"}, term
    assert _found(engine, "КОФЕ-") == {"Кофе-1/retail"}
    assert _found(engine, "брак") == {"БРАК-1/retail"}  # the rejected row's record
    assert _found(engine, "art-1") == set()


def test_the_prefix_search_reads_an_index_not_the_table(engine: Engine) -> None:
    """A prefix on aggregate, SKU, document and message_id is a range of an index (migrations
    0016, 0017: the folded keys of aggregate, SKU and message_id); the plan names the index on
    both databases."""
    with transaction(engine, read_only=True) as connection:
        postgres = is_postgres(connection)
        if postgres:
            connection.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table
        query = select(messages.c.id).where(matching("SKU-0042/re", postgres))
        sql = str(query.compile(connection, compile_kwargs={"literal_binds": True}))
        explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
        plan = " ".join(str(r) for r in connection.execute(text(explain + sql)))
    for index in (
        "ix_messages_aggregate_key",
        "ix_messages_message_id_key",
        "ix_aggregates_sku_key",
        "ix_messages_source_ref_prefix",
        "ix_messages_name_prefix",
    ):
        assert index in plan, (index, plan)


def test_a_products_name_is_kept_beside_the_message_and_never_sent(engine: Engine) -> None:
    _staged(engine)
    with transaction(engine, read_only=True) as connection:
        name, payload = connection.execute(
            select(messages.c.name, messages.c.payload).where(
                messages.c.aggregate == "SKU-0043/retail"
            )
        ).one()
    assert name == "Кофе молотый 250 г"
    assert "Кофе" not in payload  # the payload is what a shop gets: the name is not in it
    # What every target builds its request from (api, bitrix, woocommerce, rabbitmq): no name.
    assert "name" not in {f.name for f in dataclasses.fields(OutgoingMessage)}


def test_the_json_intake_takes_an_optional_name_and_refuses_a_wrong_one() -> None:
    intent: dict[str, Any] = {
        "kind": "price",
        "aggregate": "SKU-1/retail",
        "aggregate_version": 1,
        "payload": {"sku": "SKU-1", "price": "1.00", "price_type": "retail"},
    }
    row = intent_row({**intent, "name": "  Кофе\tмолотый  "})
    assert isinstance(row, dict) and row["name"] == "Кофе молотый"
    row = intent_row(intent)
    assert isinstance(row, dict) and row["name"] is None
    assert intent_row({**intent, "name": 5}) == "name must be a string of at most 500 characters"
    assert intent_row({**intent, "name": "x" * 501}) == (
        "name must be a string of at most 500 characters"
    )
    assert json.loads(json.dumps(row))  # staged as it is


def test_a_word_in_guillemets_or_after_punctuation_is_a_word_of_the_name(engine: Engine) -> None:
    """«Мастер» in «Дрель ударная «Мастер» 800 Вт» is a word like «ударная»: found by
    ``мастер``, ``«мастер`` or ``Мастер»`` (punctuation parts words, in the name and at the
    ends of the term); so is a word after a bracket or a comma, and the name's first word
    after a «; the middle of a word still is not a beginning."""
    stage(
        engine,
        [
            price_row(
                "DRILL-1", 1, aggregate="DRILL-1/retail", name="Дрель ударная «Мастер» 800 Вт"
            ),
            price_row(
                "MILL-1", 1, aggregate="MILL-1/retail", name="«Бодрость» кофе (молотый),250 г"
            ),
            price_row("SET-1", 1, aggregate="SET-1/retail", source_ref="Документ «Переоценка» №7"),
        ],
    )
    take(engine, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    for term in ("мастер", "«мастер", "Мастер»", "«Мастер»", "ударная", "800", "Вт"):
        assert _found(engine, term) == {"DRILL-1/retail"}, term
    for term in ("бодрость", "Бодр", "молотый", "(молотый)", "250", "кофе"):
        assert _found(engine, term) == {"MILL-1/retail"}, term
    assert _found(engine, "переоценка") == {"SET-1/retail"}  # a word of the 1C document
    assert _found(engine, "астер") == set()
    assert _found(engine, "ударная «Мастер»") == {"DRILL-1/retail"}  # words as the name has them


GUID = "bd72d910-55bc-11d9-848a-00112f43529a"


def _catalogued(engine: Engine) -> None:
    """SKUs that are 1C ids (``EXCHANGE_1C_SKU=id``): a product and an offer of one of its
    characteristics, the product's article in the catalogue as a catalogue file left it."""
    with transaction(engine) as connection:
        save_catalogue(connection, {}, {GUID: "Б-130001", "other-guid": "Б-999"})
    stage(
        engine,
        [
            price_row(GUID, 1, aggregate=f"{GUID}/retail", name="Женские ботфорты"),
            price_row(f"{GUID}#90c55447", 1, aggregate=f"{GUID}#90c55447/retail"),
            price_row("bd72d913-55bc", 1, aggregate="bd72d913-55bc/retail"),
        ],
    )
    take(engine, None, dict(DEFAULT_KINDS), datetime.now(UTC))


def test_a_1c_article_finds_its_product_when_skus_are_1c_ids(engine: Engine) -> None:
    """Issue 34 item 8: people know a product by its 1C article, the shop by its 1C id. The
    article's beginning, whatever its case, finds the product and its characteristics'
    offers; another product's article finds only its own."""
    _catalogued(engine)
    both = {f"{GUID}/retail", f"{GUID}#90c55447/retail"}
    for term in ("Б-130001", "б-1300", "б-"):
        assert _found(engine, term) >= both, term
    assert _found(engine, "б-1300") == both
    assert _found(engine, "б-999") == set()  # an article with no price: nothing
    assert _found(engine, "б-2") == set()
    with transaction(engine, read_only=True) as connection:
        assert count_found(connection, "б-130001") == 2


@pytest.mark.parametrize("analyzed_engine", ["sqlite", "postgresql"], indirect=True)
def test_the_article_search_reads_the_catalogues_index(analyzed_engine: Engine) -> None:
    """A catalogue of 20,000 articles: the article's beginning is a range of the catalogue's
    index (migration 0019), each product's SKUs a range of ``ix_aggregates_sku_key``."""
    engine = analyzed_engine
    with transaction(engine) as connection:
        save_catalogue(connection, {}, {f"guid-{i:05d}": f"АРТ-{i:05d}" for i in range(20_000)})
        connection.execute(
            insert(aggregates),
            [
                {"kind": "price", "aggregate": f"guid-{i:05d}/retail", "sku": f"guid-{i:05d}"}
                for i in range(20_000)
            ],
        )
        connection.execute(text("ANALYZE"))
    with transaction(engine, read_only=True) as connection:
        postgres = is_postgres(connection)
        if postgres:
            connection.execute(text("SET LOCAL enable_seqscan = off"))  # the empty tables
        query = select(messages.c.id).where(matching("б-1300", postgres))
        sql = str(query.compile(connection, compile_kwargs={"literal_binds": True}))
        explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
        plan = " ".join(str(r) for r in connection.execute(text(explain + sql)))
    assert "ix_cml_catalog_kind_value_key" in plan, plan
    assert "ix_aggregates_sku_key" in plan, plan
