"""Review words35b item 2, the dashboard's own line: the prices that wait for an operator's
decision on their SKU's main price, quarantined by a rule of two price types (``ops.waits``
"person"), are said apart in the «Осталось доставить» card, with their count and no estimate
(nothing sends them until a person decides), and left out of the count of messages the pace
delivers; a plain retry and a wait for the marketplace stay in it."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from sqlalchemy import Engine, insert
from workbench_helpers import signed_in

from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import price_row
from exchange.domain.prices import AWAITING_PERSON
from exchange.domain.states import Event
from tests.support.second_channel import on_the_one, pk_of, second_channel, taken

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
PERSON = (
    "ждут решения оператора по основной цене в карантине: {count} "
    "(срок не оценить: до решения ни одна не уйдёт)"
)


def _waits(db: Engine, person: list[str], others: list[str]) -> None:
    """Each SKU's price new on the one channel and delayed on ``second`` (an Ozon channel):
    those of ``person`` waiting for an operator's decision on their main price, the others
    for a plain retry."""
    skus = [*person, *others]
    rows = [price_row(sku, 1, "10.00", aggregate=f"{sku}/retail") for sku in skus]
    taken(db, rows, NOW)
    states = {f"{sku}/retail": ("delayed", None) for sku in skus}
    second = second_channel(db, states, NOW, target="ozon")
    with transaction(db) as connection:
        for sku in skus:
            events = [(Event.RETRY_SCHEDULED, None)]
            if sku in person:  # the wait came last
                events.append((Event.AWAITING_OUTCOME, AWAITING_PERSON))
            for event, error_class in events:
                connection.execute(
                    insert(history).values(
                        message_pk=pk_of(connection, f"{sku}/retail"),
                        channel_id=second,
                        at=NOW,
                        event=event.value,
                        from_state="in_progress",
                        to_state="delayed",
                        error_class=error_class,
                    )
                )


def _card(olga: str) -> str:
    dashboard = html.unescape(signed_in(olga, "olga").get("/").text)
    card = dashboard.split('id="backlog"', 1)[1].split("</div>", 1)[0]
    return " ".join(card.split())


def test_the_dashboard_says_the_prices_waiting_for_a_person_apart_with_their_count(
    olga: str, db: Engine
) -> None:
    _waits(db, person=["SKU-1", "SKU-2"], others=["SKU-3"])

    card = _card(olga)

    said = re.search(r'<small id="backlog-person">([^<]*)</small>', card)
    assert said is not None, card
    assert said.group(1) == PERSON.format(count=2), card  # no time: none goes before it
    # the pace's count: three new on the one channel and the plain retry, never the two
    shown = re.search(r"<b>([^<]*)</b>", card)
    assert shown is not None and shown.group(1) == "4 сообщения", card
    assert "очереди нет" not in card, card


def test_the_dashboard_says_no_person_wait_where_none_waits_for_a_person(
    olga: str, db: Engine
) -> None:
    _waits(db, person=[], others=["SKU-3"])

    card = _card(olga)

    assert 'id="backlog-person"' not in card, card
    shown = re.search(r"<b>([^<]*)</b>", card)
    assert shown is not None and shown.group(1) == "2 сообщения", card


def test_a_price_waiting_for_a_person_is_no_empty_queue(olga: str, db: Engine) -> None:
    """Nothing else to deliver: the card says the wait for a person, never «очереди нет»."""
    _waits(db, person=["SKU-1"], others=[])
    on_the_one(db, "SKU-1/retail", state="delivered")

    card = _card(olga)

    said = re.search(r'<small id="backlog-person">([^<]*)</small>', card)
    assert said is not None and said.group(1) == PERSON.format(count=1), card
    assert "очереди нет" not in card, card
