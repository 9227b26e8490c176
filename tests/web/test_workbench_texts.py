"""The service's own texts reach a Russian page in Russian (issue 24 item 4, the fresh review):
a message's last error (stored in English for the log and the command line, said in Russian
when shown), a failed 1C exchange quoted on the dashboard, the brokers' refusals; «Что сделать»
names the page's buttons, never a command; the dashboard never says there is no work while
1C's rows wait; counts are spelt as the issue spells them; a bad sort is said as a bad sort;
and a new message's empty facts are said with their meaning."""

from __future__ import annotations

import html
import random
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select
from workbench_helpers import add_operator, close_all, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import (
    fast_settings,
    one_channel_messages,
    price_row,
    raw_row,
    run_worker,
    stage,
)
from exchange.dev.woosim import WooSimulator
from exchange.domain.policy import Policy
from exchange.domain.reasons import Reason
from exchange.intake.sources.common import Received, refused_records
from exchange.intake.sources.common import take as take_from_broker
from exchange.intake.staging_table import take
from exchange.report.words import next_check
from exchange.words import messages_counted, page_steps, word

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

# What a page must not show as the service's own words: the English stored texts, and a
# command of the command line where a page has buttons.
COMMAND = re.compile(r"\bexchange (?:history|run|quarantine)\b|\((?:retry|cancel)\)|\brun\b")


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def bench(serve: Callable[..., Any], db: Engine) -> str:
    base: str = serve()
    add_operator(db, "olga", "operator")
    return base


@pytest.fixture
def woo() -> Iterator[WooSimulator]:
    simulator = WooSimulator(key="ck_k", secret="cs_s")
    simulator.start()
    yield simulator
    simulator.stop()


def element(page: str, ident: str) -> str:
    """The text of the element with id ``ident`` (tags dropped, entities read)."""
    found = re.search(rf'<(\w+)[^>]*\bid="{ident}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no #{ident} in the page"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(2))).strip()


def the_message(engine: Engine, **where: Any) -> dict[str, Any]:
    with transaction(engine, read_only=True) as connection:
        query = select(messages)
        for column, value in where.items():
            query = query.where(messages.c[column] == value)
        return dict(connection.execute(query).mappings().one())


def test_an_unmapped_price_type_is_said_in_russian_and_what_to_do_names_the_setting_and_button(
    bench: str, db: Engine, db_url: str, woo: WooSimulator
) -> None:
    settings = fast_settings(
        db_url,
        None,
        target="woocommerce",
        woo_url=woo.url,
        woo_key="ck_k",
        woo_secret="cs_s",
        woo_price_fields={"retail": "regular_price"},
    )
    row = price_row("SKU-7", 1, "5.00", aggregate="SKU-7/wholesale")
    row["payload"] = row["payload"].replace('"retail"', '"wholesale"')
    stage(db, [row])
    run_worker(bootstrap.worker(settings, db, rng=random.Random(3)))
    stored = the_message(db, aggregate="SKU-7/wholesale")
    assert stored["reason"] == "unmapped-price-type"
    # The record keeps the English text: the log and `exchange history` say it so.
    assert "is not mapped by EXCHANGE_WOO_PRICE_FIELDS" in stored["last_error"]

    page = signed_in(bench, "olga").get(f"/message/{stored['message_id']}").text
    error = element(page, "last-error")
    assert error == "вид цены 'wholesale' не сопоставлен в EXCHANGE_WOO_PRICE_FIELDS", error
    assert "is not mapped" not in page
    step = element(page, "next-step")
    assert step == next_check("unmapped-price-type", "ru", steps=page_steps("ru"))
    assert "EXCHANGE_WOO_PRICE_FIELDS" in step and "EXCHANGE_BITRIX_PRICE_TYPES" in step
    assert f"«{word('retry', 'ru')}»" in step, step
    assert not COMMAND.search(step), step


def test_no_next_step_on_a_page_names_a_command() -> None:
    for code in [r.value for r in Reason] + ["http-422", "something-new"]:
        for lang in ("ru", "en"):
            said = next_check(code, lang, steps=page_steps(lang))
            assert not COMMAND.search(said), (code, lang, said)
            assert not re.search(r"\b(?:retry|cancel)\b", said), (code, lang, said)
    # The report keeps its command-line words (its reader has the command beside them), in
    # Russian: «перезапустите exchange run», no bare «(retry)».
    report = next_check("unmapped-price-type", "ru")
    assert "exchange run" in report and "(retry)" not in report


def test_a_payload_that_is_not_json_is_said_in_russian_on_its_message_page(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    stage(db, [raw_row("price", "SKU-8/retail", 1, '{sku: "SKU-8"}')])
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    stored = the_message(db, rejected=True)
    assert stored["last_error"].startswith("payload is not valid JSON: ")

    page = signed_in(bench, "olga").get(f"/message/{stored['message_id']}").text
    error = element(page, "last-error")
    assert error == (
        "данные (payload) — некорректный JSON: ожидалось имя ключа в двойных кавычках: "
        "строка 1, позиция 2 (символ № 1)"
    ), error
    assert "not valid JSON" not in page and "Expecting" not in page
    # The history's row says it the same way.
    assert "не принято (invalid-contract): данные (payload) — некорректный JSON" in html.unescape(
        page
    )


def test_the_brokers_refusals_are_said_in_russian_on_the_exchanges_page(
    bench: str, db: Engine
) -> None:
    # What each source records (intake.sources.common.take), as RabbitMQ and Redis hand them.
    kinds = {"price": Policy.LATEST_WINS}
    unknown_field = b'{"intents": [{"kind": "price", "aggregate": "A/retail", "a": 1}]}'
    refused = take_from_broker(
        db,
        None,
        kinds,
        [Received("m-1", unknown_field, "rabbitmq queue prices, message_id m-1")],
        source="rabbitmq",
        max_items=10,
        max_bytes=2**24,
    ).refused
    refused += take_from_broker(
        db,
        None,
        kinds,
        [Received("s-1", b'{"a": 1, "a": 2}', "redis stream prices, entry 1-0")],
        source="redis",
        max_items=10,
        max_bytes=2**24,
    ).refused
    assert refused == 2
    with transaction(db, read_only=True) as connection:
        stored = {r["message_id"]: r["last_error"] for r in refused_records(connection, 10)}
    assert stored["rabbitmq-m-1-0"].endswith("unknown fields: a"), stored
    assert stored["redis-s-1"].endswith("the body names key 'a' twice in one object"), stored

    page = html.unescape(signed_in(bench, "olga").get("/exchanges").text)
    assert (
        "RabbitMQ, очередь prices, message_id m-1, запись intents[0]: неизвестные поля: a" in page
    )
    assert (
        "Redis, поток prices, запись 1-0: в теле сообщения ключ 'a' встречается в одном объекте "
        "дважды"
    ) in page
    assert "unknown fields" not in page and "twice" not in page


def test_a_broker_source_not_consuming_is_said_in_russian() -> None:
    """Contract 15: the cause ``source`` (a worker's source does not consume) in the page's
    words, the source's own reason said in Russian too."""
    from exchange.ops.attention import Cause
    from exchange.web.workbench.pages import cause_words

    for reason, russian in (
        (
            "the broker cancelled the consumer (the queue was deleted or moved)",
            "брокер отменил подписку (очередь удалили или перенесли)",
        ),
        ("the queue 'prices' does not exist", "очереди 'prices' нет"),
    ):
        cause = Cause("source", "source", {"worker": "w-1", "reason": reason, "since": "10:00"})
        said = cause_words(cause, "ru")
        assert (
            f"сообщения из брокера не принимаются (обработчик w-1, с 10:00): {russian}; "
            "обработчик пробует снова сам"
        ) == said


def test_the_dashboard_quotes_a_failed_1c_exchange_in_russian(bench: str, db: Engine) -> None:
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail="the file is empty",
            )
        )
    page = signed_in(bench, "olga").get("/").text
    needs = element(page, "needs")
    assert (
        "последний обмен с 1С завершился ошибкой (offers.xml: файл пуст), успешных с тех пор "
        "не было"
    ) in needs, needs
    assert "the file is empty" not in page


def test_rows_staged_before_any_worker_ran_are_work_waiting_never_no_work(
    bench: str, db: Engine
) -> None:
    client = signed_in(bench, "olga")
    idle = client.get("/").text
    assert word("no_live_worker_idle", "ru") in idle, "no work, no worker: said so"

    stage(db, [price_row(f"SKU-{n:02d}", 1) for n in range(16)])
    page = client.get("/").text
    assert element(page, "untaken") == "16"
    assert word("no_live_worker_idle", "ru") not in page
    assert "работы, ждущей доставки, нет" not in page
    # Younger than max(lease, 3 x poll) (contract 6): amber, said as waiting, not yet a cause,
    # and the «needs» section says "not yet", never a plain «Ничего не требует внимания».
    assert "работа ждёт доставки" in element(page, "pause")
    assert word("nothing_needs", "ru") not in page
    assert "Пока ничего не требует внимания" in element(page, "needs")
    assert word("backlog_none", "ru") not in element(page, "backlog")


def test_a_bad_sort_is_said_as_a_bad_sort(bench: str) -> None:
    page = signed_in(bench, "olga").get("/quarantine?sort=price").text
    assert f"{word('bad_sort', 'ru')}: price" in html.unescape(page)
    assert word("bad_filter", "ru") not in page


def test_touched_counts_are_spelt_as_the_issue_spells_them() -> None:
    said = [word("touched", "ru").format(count=messages_counted(n, "ru")) for n in (1, 2, 5, 21)]
    assert said == [
        "затронуто 1 сообщение",
        "затронуто 2 сообщения",
        "затронуто 5 сообщений",
        "затронуто 21 сообщение",
    ]


def test_a_new_message_says_it_was_never_sent_where_its_facts_are_empty(
    bench: str, db: Engine
) -> None:
    stage(db, [price_row("SKU-9", 1)])
    take(db, None, {"price": Policy.LATEST_WINS}, datetime.now(UTC))
    stored = the_message(db, aggregate="SKU-9")
    assert stored["state"] == "new" and stored["reason"] is None and stored["attempts"] == 0

    page = signed_in(bench, "olga").get(f"/message/{stored['message_id']}").text
    assert element(page, "reason") == word("not_sent_yet", "ru")
    assert element(page, "last-error") == word("not_sent_yet", "ru")
    assert "ещё не отправлялось" in word("not_sent_yet", "ru")


# -- every refusal the intake can write has Russian words ------------------------------------

# What a Russian refusal may keep as it is: the contract's field names, settings, formats and
# the brokers' names (what 1C's programmer looks for), and the values quoted from the data.
KEPT = {
    "payload",
    "kind",
    "aggregate",
    "aggregate_version",
    "schema_version",
    "source_ref",
    "name",
    "intents",
    "intent",
    "sku",
    "price",
    "price_type",
    "currency",
    "JSON",
    "UTF-8",
    "UTF-16",
    "NUL",
    "VARCHAR",
    "BIGINT",
    "EXCHANGE_KINDS",
    "EXCHANGE_SOURCE_MAX_BYTES",
    "MAXLEN",
    "XTRIM",
    "RabbitMQ",
    "Redis",
    "RUB",
    "message_id",
    "staging_intents",
    "created_at",
    "NaN",
    "list",
    "x",
    "e3",
    "uXXXX",
    "invalid-contract",
    "unknown-kind",
    "unsupported-schema",
}


def _row(**changes: Any) -> Any:
    from exchange.intake.contracts import StagingRow

    values: dict[str, Any] = {
        "id": 1,
        "kind": "price",
        "aggregate": "A/retail",
        "aggregate_version": 1,
        "payload": '{"sku": "A", "price": "1.00", "currency": "RUB", "price_type": "retail"}',
        "schema_version": "1",
        "source_ref": None,
        "created_at": datetime.now(UTC),
    }
    return StagingRow(**{**values, **changes})


def _refusals() -> list[str]:
    """What the intake's own code writes for bad rows, intents and bodies (never typed here)."""
    from exchange.domain.policy import DEFAULT_KINDS
    from exchange.intake.contracts import Rejected, validate
    from exchange.intake.intents import BodyError, intent_row
    from exchange.intake.sources.common import intents_of

    said: list[str] = []
    kinds = dict(DEFAULT_KINDS)
    for changes in (
        {"payload": "{sku: 1}"},
        {"payload": '{"sku": "A",}'},
        {"payload": '{"sku": "A"} x'},
        {"payload": '{"a": 1, "a": 2}'},
        {"payload": '{"sku": "A", "price": NaN, "price_type": "retail"}'},
        {"payload": "[1]"},
        {"payload": "[" * 70 + "]" * 70},
        {"payload": '{"sku": "A", "price": "1e3", "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": 1e3, "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": "1.0000001", "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": "-1", "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": "1 000", "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": "1.00", "currency": "rub", "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": true, "price_type": "retail"}'},
        {"payload": '{"sku": "A", "price": "1.00", "price_type": "retail", "x": 1}'},
        {"payload": '{"price": "1.00", "price_type": "retail"}'},
        {"payload": '{"sku": "B", "price": "1.00", "price_type": "retail"}'},
        {"kind": "stock"},
        {"aggregate": " "},
        {"aggregate_version": 0},
        {"aggregate_version": 2**62},
        {"schema_version": "9"},
        {"source_ref": "a\x00b"},
        {"aggregate": "x" * 201},
        # what _loose_row finds in a row whose values break the table's types
        {"defect": "payload is not valid UTF-8 text; aggregate_version 'x' is not a whole number"},
        {"defect": "created_at '0001-01-01 00:00+03:00' is not a time"},
    ):
        verdict = validate(_row(**changes), kinds)
        assert isinstance(verdict, Rejected), changes
        said.append(verdict.detail)
    for item in (
        {"kind": "price", "x": 1},
        {"kind": ""},
        {"kind": "price", "aggregate": 1},
        {"kind": "price", "aggregate": "A", "aggregate_version": "1"},
        {"kind": "price", "aggregate": "A", "aggregate_version": 1, "payload": 1},
        {"kind": "price", "aggregate": "A", "aggregate_version": 1, "payload": {}, "name": 1},
    ):
        row = intent_row(item)
        assert isinstance(row, str), item
        said.append(row)
    for body in (
        b"\xff",
        b"[" * 300 + b"]" * 300,
        b'{"a": 1, "a": 1}',
        b"x",
        b"1",
        b"[]",
        b'{"intents": 1}',
        b"[1]",
        b"[" + b"{}," * 11 + b"{}]",
    ):
        try:
            intents_of(body, 10)
        except BodyError as exc:
            said.append(str(exc))
        else:
            raise AssertionError(body)
    # what a broker source refuses before reading a body (contract 15)
    from exchange.intake.sources.common import too_large
    from exchange.intake.sources.redis_streams import TRIMMED, field_twice

    said += [too_large(17_000_000, 16_777_216), field_twice(2), TRIMMED]
    return said


def test_every_refusal_the_intake_writes_is_said_in_russian() -> None:
    from exchange.words import detail_words

    untranslated = {}
    for text in _refusals():
        russian = detail_words(text)
        words = set(re.findall(r"[A-Za-z][A-Za-z0-9_\-]*", re.sub(r"'[^']*'", "", russian)))
        if russian == text or words - KEPT:
            untranslated[text] = sorted(words - KEPT)
    assert untranslated == {}, untranslated


def test_a_1c_file_with_no_prices_to_stage_is_said_in_russian_on_the_exchanges_page(
    bench: str, db: Engine
) -> None:
    """A 1C offers file without a price, an unpacked archive and a file that is not XML are
    recorded with the outcome ``nothing`` (exchange/intake/commerceml/publish.py,
    exchange/web/onec.py): «Обмены 1С» names it in Russian, never «nothing»."""
    now = datetime.now(UTC)
    details = (
        "0 prices staged from 0 offers",
        "archive unpacked",
        "not an XML file: accepted and dropped",
    )
    with transaction(db) as connection:
        for n, detail in enumerate(details):
            connection.execute(
                insert(cml_exchanges).values(
                    exchange="s1",
                    filename=f"file{n}.xml",
                    started_at=now,
                    finished_at=now,
                    outcome="nothing",
                    detail=detail,
                )
            )
    page = signed_in(bench, "olga").get("/exchanges").text
    outcomes = re.findall(r'<td data-label="Итог">([^<]*)</td>', page)
    assert outcomes == ["загружать нечего"] * 3, outcomes
    shown = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert "nothing" not in shown
    for detail in details:
        assert detail not in shown


# -- the message page and the search's rows (fresh operator review) ----------------------------


def test_a_message_that_is_not_there_is_named_on_its_page(bench: str) -> None:
    """``/message/nope`` says which message_id it has not found, as the sentence's subject
    after a colon (not a bare «с message_id» the id might seem missing from), escaped."""
    client = signed_in(bench, "olga")
    for asked, shown in (("nope", "nope"), ("<b>x", "&lt;b&gt;x")):
        response = client.get(f"/message/{asked}")
        assert response.status_code == 404
        alert = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.S)
        assert alert, response.text
        text = " ".join(re.sub(r"<[^>]+>", "", alert.group(1)).split())
        assert text == f"Нет сообщения с таким кодом: {shown}", text
        assert "<b>x" not in response.text


def test_the_message_page_title_is_not_its_history_section(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    """The page's h1 and its history's h2 say different things: the page is the message of
    a product (its name, else its SKU: issue 34 item 9), the section is how its delivery
    went."""
    stage(db, [price_row("SKU-7", 1)])
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    message_id = the_message(db, aggregate="SKU-7")["message_id"]
    page = signed_in(bench, "olga").get(f"/message/{message_id}").text
    headings = [
        html.unescape(re.sub(r"<[^>]+>", "", h)).strip()
        for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", page, re.S)
    ]
    assert len(headings) == len(set(headings)), headings
    assert headings[0] == "SKU-7", headings  # price_row gives no name: the SKU
    assert f'<p class="kicker">{word("message", "ru")}</p>' in page
    assert word("biography", "ru") in headings, headings


def test_a_found_message_says_its_empty_reason_and_error_as_its_page_does(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    """A delivered message's «Причина» and «Последняя ошибка» on /find say what its page
    says («— (не ждёт решения оператора)», «— (ошибки нет)»); a new one's say it was never
    sent; a quarantined one's say its reason and error."""
    stage(db, [price_row("SKU-5", 1), price_row("SKU-6", 1)])
    site.faults.reject.add("SKU-6")
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    stage(db, [price_row("SKU-4", 1)])
    take(db, None, {"price": Policy.LATEST_WINS}, datetime.now(UTC))
    client = signed_in(bench, "olga")
    for sku in ("SKU-5", "SKU-4", "SKU-6"):
        stored = the_message(db, aggregate=sku)
        page = client.get(f"/message/{stored['message_id']}").text
        found = client.get("/find", params={"q": sku}).text
        row = re.search(r"<tbody>(.*?)</tbody>", found, re.S)
        assert row, found
        cells = {
            label: html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for label, cell in re.findall(r'data-label="([^"]+)">(.*?)</td>', row.group(1), re.S)
        }
        assert cells["Причина"] == element(page, "reason"), (sku, cells)
        assert cells["Последняя ошибка"] == element(page, "last-error")[:300], (sku, cells)
        assert cells["Причина"], (sku, cells)
        assert cells["Последняя ошибка"], (sku, cells)
    assert cells["Причина"] == "сайт отклонил (http-422)"


def test_the_quarantine_says_how_to_act_on_all_matching_rows_where_it_cannot_yet(
    bench: str, db: Engine, db_url: str, site: SiteSimulator
) -> None:
    """«Все подходящие под отбор» is offered only once a filter is chosen; until then a line
    says so, in Russian, and is gone once the choice is there."""
    stage(db, [price_row("SKU-3", 1)])
    site.faults.reject.add("SKU-3")
    run_worker(bootstrap.worker(fast_settings(db_url, site.url), db))
    client = signed_in(bench, "olga")
    unfiltered = client.get("/quarantine").text
    assert 'id="scope-all"' not in unfiltered
    assert element(unfiltered, "scope-all-hint") == (
        "Выберите отбор, чтобы действовать на все подходящие записи"
    )
    filtered = client.get("/quarantine", params={"reason": "http-422"}).text
    assert 'id="scope-all"' in filtered
    assert 'id="scope-all-hint"' not in filtered
