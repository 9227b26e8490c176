"""A message's page (issue 34 item 9): it leads with the product's name, the price as a price
(«1 234,50 ₽») and since when the message is in its state; an action that failed shows its
form again with why and the note the operator typed; one that was done says so."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import Engine, select
from workbench_helpers import csrf_of, signed_in

from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take
from tests.support.follow import set_delivery

NOTE = "Клиент звонил: цена на витрине старая"


def _message(engine: Engine, sku: str, **values: Any) -> str:
    """A taken price of ``sku`` (1 234,50 RUB), its columns set to ``values``; its id."""
    stage(engine, [price_row(sku, 1, "1234.50", name="Кофе молотый 250 г")])
    take(engine, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    with transaction(engine) as connection:
        if values:
            set_delivery(connection, messages.c.aggregate == sku, **values)
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.aggregate == sku)
            ).scalar_one()
        )


def _text(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', page, re.S)
    assert found, (element_id, page)
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


def _post(client: httpx.Client, path: str, back: str, data: dict[str, str]) -> httpx.Response:
    return client.post(path, data={"csrf": csrf_of(client, back), **data})


def test_the_page_leads_with_the_product_its_price_and_since_when_in_its_state(
    olga: str, db: Engine
) -> None:
    since = datetime.now(UTC) - timedelta(minutes=5)
    mid = _message(
        db,
        "SKU-1",
        state="delayed",
        updated_at=since,
        next_try_at=datetime.now(UTC) + timedelta(seconds=40),
    )
    page = signed_in(olga, "olga").get(f"/message/{mid}").text
    assert _text(page, "product") == "Кофе молотый 250 г"
    assert page.index('id="product"') < page.index('id="message-id"')  # the name first
    assert _text(page, "price") == "1\xa0234,50\xa0₽"
    in_state = _text(page, "in-state")
    assert in_state.startswith("отложено"), in_state
    assert since.strftime("%Y-%m-%d %H:%M") in in_state and "5 мин" in in_state, in_state
    assert re.search(r"через [1-4]\d с", page)  # when it goes again
    english = signed_in(olga, "olga").get(f"/message/{mid}?lang=en").text
    assert _text(english, "price") == "RUB\xa01,234.50"


def test_a_failed_put_first_keeps_the_form_and_the_note_and_a_done_one_says_so(
    olga: str, db: Engine
) -> None:
    mid = _message(db, "SKU-2")
    client = signed_in(olga, "olga")
    back = f"/message/{mid}"
    done = _post(client, "/action/prioritize", back, {"message_id": mid, "note": NOTE})
    assert done.status_code == 303 and done.headers["location"].endswith("?done=prioritize")
    page = client.get(done.headers["location"]).text
    assert _text(page, "done") == "Готово: сообщение поставлено первым в очередь."
    # delivered meanwhile: put first fails; its page again, with why and the note typed
    with transaction(db) as connection:
        set_delivery(connection, messages.c.message_id == mid, state="delivered")
    failed = _post(client, "/action/prioritize", back, {"message_id": mid, "note": NOTE})
    assert failed.status_code == 400
    assert _text(failed.text, "product") == "Кофе молотый 250 г"
    assert _text(failed.text, "action-error")
    # the form is drawn from the page the operator had; the note is kept in it
    empty = _post(client, "/action/prioritize", back, {"message_id": mid, "note": " "})
    assert empty.status_code == 400 and "Нужно примечание" in html.unescape(empty.text)


def test_a_failed_put_first_on_a_waiting_message_keeps_the_note_in_its_field(
    olga: str, db: Engine
) -> None:
    """A message leased while the operator typed: put first fails (no longer waiting), and
    the page shows it again, the note still in its field."""
    mid = _message(db, "SKU-5")
    client = signed_in(olga, "olga")
    csrf = csrf_of(client, f"/message/{mid}")
    with transaction(db) as connection:
        set_delivery(connection, messages.c.message_id == mid, state="cancelled")
    failed = client.post("/action/prioritize", data={"csrf": csrf, "message_id": mid, "note": NOTE})
    assert failed.status_code == 400 and _text(failed.text, "action-error")
    assert "Клиент звонил" in html.unescape(failed.text)  # the note, kept (shown or in a field)


def test_a_retry_confirmed_without_a_note_or_too_late_keeps_its_form_and_note(
    olga: str, db: Engine
) -> None:
    mid = _message(db, "SKU-3", state="quarantined", reason="http-422")
    client = signed_in(olga, "olga")
    preview = _post(
        client, "/action/preview", "/quarantine", {"action": "retry", "message_id": mid}
    )
    assert preview.status_code == 200
    csrf = csrf_of(client, "/quarantine")
    fields = {"csrf": csrf, "action": "retry", "message_id": mid, "back": "/quarantine"}
    no_note = client.post("/action/confirm", data={**fields, "note": " "})
    # the preview again, its form and button there, saying what is missing
    assert no_note.status_code == 400
    assert 'action="/action/confirm"' in no_note.text and 'id="confirm"' in no_note.text
    assert "Нужно примечание" in _text(no_note.text, "action-error")
    # another operator retried it meanwhile: the confirmation fails; the note is not lost
    with transaction(db) as connection:
        set_delivery(connection, messages.c.message_id == mid, state="new", reason=None)
    late = client.post("/action/confirm", data={**fields, "note": NOTE})
    assert late.status_code == 400
    assert NOTE in html.unescape(late.text)
    with transaction(db, read_only=True) as connection:
        assert not connection.execute(select(history.c.id).where(history.c.note == NOTE)).first()


def test_a_done_retry_says_so(olga: str, db: Engine) -> None:
    mid = _message(db, "SKU-4", state="quarantined", reason="http-422")
    client = signed_in(olga, "olga")
    csrf = csrf_of(client, "/quarantine")
    done = client.post(
        "/action/confirm",
        data={"csrf": csrf, "action": "retry", "message_id": mid, "note": NOTE},
    )
    assert done.status_code == 200
    assert "Готово" in done.text and mid in html.unescape(done.text).replace("<wbr>", "")


def test_a_confirmation_after_another_cancelled_it_keeps_the_form_and_says_why_in_russian(
    olga: str, db: Engine
) -> None:
    """The runbook's promise (a failed action: «форма и набранное примечание остаются»): a
    retry confirmed after the message was cancelled elsewhere says why with the state in
    Russian (never «rejected-… is cancelled»); of two messages, the one still quarantined keeps
    its confirmation form with the note in its field; one message alone its own page, the note
    kept."""
    first = _message(db, "SKU-6", state="quarantined", reason="http-422")
    second = _message(db, "SKU-7", state="quarantined", reason="http-422")
    client = signed_in(olga, "olga")
    csrf = csrf_of(client, "/quarantine")
    with transaction(db) as connection:
        set_delivery(connection, messages.c.message_id == first, state="cancelled")
    both = client.post(
        "/action/confirm",
        data={
            "csrf": csrf,
            "action": "retry",
            "message_id": [first, second],
            "note": NOTE,
            "back": "/quarantine",
        },
    )
    assert both.status_code == 400
    why = _text(both.text, "action-error")
    assert why == f"Изменять можно только сообщения в карантине: {first} — отменено", why
    assert 'action="/action/confirm"' in both.text and 'id="confirm"' in both.text
    assert f'name="message_id" value="{second}"' in both.text
    assert f'name="message_id" value="{first}"' not in both.text
    assert re.search(rf'id="note" value="{re.escape(html.escape(NOTE))}"', both.text), both.text
    # the one still quarantined is still quarantined: nothing was done
    with transaction(db, read_only=True) as connection:
        assert not connection.execute(select(history.c.id).where(history.c.note == NOTE)).first()
    alone = client.post(
        "/action/confirm",
        data={"csrf": csrf, "action": "cancel", "message_id": first, "note": NOTE},
    )
    assert alone.status_code == 400
    assert _text(alone.text, "action-error").endswith(f"{first} — отменено")
    assert " is " not in _text(alone.text, "action-error")
    assert NOTE in _text(alone.text, "kept-note")
    assert "Кофе молотый 250 г" in html.unescape(alone.text)  # its own page
