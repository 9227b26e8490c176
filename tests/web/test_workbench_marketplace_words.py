"""The workbench speaks of a marketplace as a marketplace (mpwords items 1 and 3; contract 14,
research/marketplaces.md §1.3 and §3.4): a price an Ozon channel waits for (its hour, an outcome
read later: ``awaiting-outcome``, not charged) reads «ждёт площадку», never «отложено (повтор)»,
and is counted apart on the dashboard; a retry-limit on an Ozon channel sends the operator to
the marketplace's cabinet, never to a "site team"; a site's channel keeps the site's advice."""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime

from sqlalchemy import Engine, insert, select
from workbench_helpers import signed_in

from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import one_channel_messages, price_row
from exchange.domain.states import Event
from tests.support.second_channel import pk_of, second_channel, taken

messages = one_channel_messages()
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def _on_ozon(db: Engine) -> dict[str, str]:
    """SKU-1 quarantined for its retry limit and SKU-2 waiting for Ozon (its last attempt ended
    awaiting the channel) on ``second``, an Ozon channel: their message ids by SKU."""
    taken(
        db,
        [
            price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail"),
            price_row("SKU-2", 1, "20.00", aggregate="SKU-2/retail"),
        ],
        NOW,
    )
    second = second_channel(
        db,
        {"SKU-1/retail": ("quarantined", "retry-limit"), "SKU-2/retail": ("delayed", None)},
        NOW,
        target="ozon",
    )
    with transaction(db) as connection:
        pk = pk_of(connection, "SKU-2/retail")
        for event in (Event.RETRY_SCHEDULED, Event.AWAITING_OUTCOME):  # the wait came last
            connection.execute(
                insert(history).values(
                    message_pk=pk,
                    channel_id=second,
                    at=NOW,
                    event=event.value,
                    from_state="in_progress",
                    to_state="delayed",
                )
            )
        rows = connection.execute(select(messages.c.aggregate, messages.c.message_id)).all()
    return {aggregate.split("/")[0]: message_id for aggregate, message_id in rows}


def test_a_wait_for_ozon_reads_as_a_wait_and_a_retry_limit_sends_to_its_cabinet(
    olga: str, db: Engine
) -> None:
    ids = _on_ozon(db)
    client = signed_in(olga, "olga")
    page = html.unescape(client.get(f"/message/{ids['SKU-2']}").text)
    on_ozon = page.split('id="on-second"')[1].split("</tr>")[0]
    assert "ждёт площадку" in on_ozon and "повтор" not in on_ozon, on_ozon
    dashboard = html.unescape(client.get("/").text)
    counted = dashboard.split('id="delayed-awaiting"')[1].split("</tr>")[0]
    assert "из них ждут площадку (не повтор)" in counted and ">1</td>" in counted, counted
    quarantine = html.unescape(client.get("/quarantine").text)
    advice = quarantine.split('class="facts"')[1].split("</dl>")[0]
    assert "кабинете площадки" in advice and "командой сайта" not in advice, advice
    assert "исчерпаны попытки (retry-limit)" in advice, advice


def test_a_price_waiting_for_1cs_other_price_type_is_no_wait_for_the_marketplace(
    olga: str, db: Engine
) -> None:
    """Review mpadvice item 2: an Ozon price that alone breaks Ozon's rule waits for 1C to
    send the other price type (``AWAITING_1C``, then ``invalid-for-channel``): the wait is on
    1C, not on the marketplace, so ``status`` and the dashboard count it as a wait for 1C,
    never under «ждут площадку»."""
    from exchange.domain.policy import KindPolicies
    from exchange.domain.prices import AWAITING_1C
    from exchange.ops.status import status

    ids = _on_ozon(db)
    with transaction(db) as connection:
        connection.execute(
            history.update()
            .where(history.c.event == Event.AWAITING_OUTCOME.value)
            .values(error_class=AWAITING_1C)
        )
        figures = status(connection, NOW, KindPolicies.of({}))
    assert (figures.awaiting_channel, figures.awaiting_1c) == (0, 1), figures
    client = signed_in(olga, "olga")
    dashboard = html.unescape(client.get("/").text)
    assert 'id="delayed-awaiting"' not in dashboard
    counted = dashboard.split('id="delayed-awaiting-1c"')[1].split("</tr>")[0]
    assert "ждут 1С: другой вид цены" in counted and ">1</td>" in counted, counted
    # the delivery's own state says the same wait, never «ждёт площадку»
    page = html.unescape(client.get(f"/message/{ids['SKU-2']}").text)
    on_ozon = page.split('id="on-second"')[1].split("</tr>")[0]
    assert "ждёт 1С: другой вид цены" in on_ozon and "площадку" not in on_ozon, on_ozon


def test_a_price_waiting_for_a_persons_decision_on_the_main_price_is_no_wait_for_the_marketplace(
    olga: str, db: Engine
) -> None:
    """Review wait34: an Ozon old price that waits for a person's decision on its SKU's main
    price, quarantined by a rule of two price types (``AWAITING_PERSON``), was counted under
    «ждут площадку» and said «ждёт площадку» on the message page and in its «Переход»: the
    wait is on an operator, counted apart, never as a wait for the marketplace nor for 1C."""
    from rich.console import Console

    from exchange.domain.policy import KindPolicies
    from exchange.domain.prices import AWAITING_PERSON
    from exchange.ops.status import status, tables

    ids = _on_ozon(db)
    with transaction(db) as connection:
        connection.execute(
            history.update()
            .where(history.c.event == Event.AWAITING_OUTCOME.value)
            .values(error_class=AWAITING_PERSON)
        )
        figures = status(connection, NOW, KindPolicies.of({}))
    waits = (figures.awaiting_channel, figures.awaiting_1c, figures.awaiting_person)
    assert waits == (0, 0, 1), figures
    # ``exchange status`` says the same row as the dashboard, never «ждут площадку»
    out = io.StringIO()
    console = Console(file=out, width=200)
    for table in tables(figures, lang="ru"):
        console.print(table)
    said = out.getvalue()
    assert "из них ждут решения оператора по основной цене в карантине" in said, said
    assert "ждут площадку" not in said, said
    client = signed_in(olga, "olga")
    dashboard = html.unescape(client.get("/").text)
    assert 'id="delayed-awaiting"' not in dashboard
    assert 'id="delayed-awaiting-1c"' not in dashboard
    counted = dashboard.split('id="delayed-awaiting-person"')[1].split("</tr>")[0]
    assert "из них ждут решения оператора по основной цене в карантине" in counted, counted
    assert ">1</td>" in counted, counted
    page = html.unescape(client.get(f"/message/{ids['SKU-2']}").text)
    on_ozon = page.split('id="on-second"')[1].split("</tr>")[0]
    said = "ждёт решения оператора по основной цене"
    assert said in on_ozon and "площадку" not in on_ozon, on_ozon
    table = page.split('class="history"', 1)[1].split("</table>", 1)[0]
    assert f"отправляется → {said}" in " ".join(table.split()), table
    assert "→ ждёт площадку" not in table, table
    english = html.unescape(client.get(f"/message/{ids['SKU-2']}?lang=en").text)
    assert "→ waiting for an operator's decision on the main price" in english, english


def test_the_history_says_a_wait_for_ozon_as_exchange_history_does(olga: str, db: Engine) -> None:
    """Review 33: the message page's history said «отложено (повтор)» for a transition into a
    wait for the marketplace (Ozon's hourly limit: ``awaiting-outcome``, not charged), while
    its state line and ``exchange history`` say «ждёт площадку». Its «Переход» column says
    each transition in ``exchange history``'s words (``report.words.history_words``, read
    along the story by ``waits.awaiting_in_biography``); a retry stays a retry."""
    from exchange.ops.status import biography
    from exchange.ops.waits import awaiting_in_biography
    from exchange.report.words import history_words

    ids = _on_ozon(db)
    with transaction(db, read_only=True) as connection:
        story = biography(connection, ids["SKU-2"])["history"]
    expected = [
        "{} → {}".format(*history_words(e["event"], e["from"], e["to"], "ru", waits)[1:])
        for e, waits in zip(story, awaiting_in_biography(story), strict=True)
        if e["from"] is not None  # intake's own first event: no state before
    ]
    # the retry, then the wait for Ozon
    assert expected == ["отправляется → отложено (повтор)", "отправляется → ждёт площадку"]
    client = signed_in(olga, "olga")
    page = html.unescape(client.get(f"/message/{ids['SKU-2']}").text)
    table = page.split('class="history"', 1)[1].split("</table>", 1)[0]
    shown = [
        " ".join(cell.split("</td>", 1)[0].split(">", 1)[1].split())
        for cell in table.split('data-label="Переход"')[1:]
    ]
    assert shown[1:] == expected, shown
    english = html.unescape(client.get(f"/message/{ids['SKU-2']}?lang=en").text)
    assert "→ waiting for the marketplace" in english, english


def test_the_header_and_the_quarantine_filter_speak_of_no_site_for_a_marketplace(
    olga: str, db: Engine
) -> None:
    """Review 33: a seller whose channels are a site and Ozon read «Обмен с сайтом» over every
    page, and the quarantine's reason filter offered Ozon's quarantined prices as «нет такого
    товара в магазине» and «непонятный ответ сайта». The header names neither (its channels
    may be a site and marketplaces alike); the filter names each reason in its channels' words
    (``words.reason_target``, as ``status`` and the dashboard do), the export's filter too."""
    taken(
        db,
        [
            price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail"),
            price_row("SKU-2", 1, "20.00", aggregate="SKU-2/retail"),
        ],
        NOW,
    )
    second_channel(
        db,
        {
            "SKU-1/retail": ("quarantined", "unknown-sku"),
            "SKU-2/retail": ("quarantined", "unknown-response"),
        },
        NOW,
        target="ozon",
    )
    client = signed_in(olga, "olga")
    for path in ("/quarantine", "/export"):
        page = html.unescape(client.get(path).text)
        brand = page.split('class="brand">', 1)[1].split("<", 1)[0]
        assert brand == "Обмен с 1С", brand
        assert "сайтом" not in page.split("</header>", 1)[0], path
        offered = page.split('name="reason"', 1)[1].split("</select>", 1)[0]
        assert "нет товара в каталоге площадки (unknown-sku)" in offered, offered
        assert "непонятный ответ площадки (unknown-response)" in offered, offered
        assert "магазин" not in offered and "сайт" not in offered, offered
    english = html.unescape(client.get("/quarantine?lang=en").text)
    assert english.split('class="brand">', 1)[1].split("<", 1)[0] == "Exchange with 1C"
    assert "Site exchange" not in english
