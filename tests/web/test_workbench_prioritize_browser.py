"""«Отправить первым» on the workbench's message page (issue 23 item 4, contract 6 and 11), in
a real browser: an operator puts a waiting price first with a note; it is the next message a
worker claims (the same ``ops.prioritize`` as ``exchange prioritize``), and its history names
the operator and the note. The note is required; a viewer has no button and its POST is
refused."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import new_page, sign_in
from sqlalchemy import Engine, select
from workbench_helpers import add_operator, message_id_of

from exchange.db.engine import transaction
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, stage
from exchange.intake import staging_table as intake
from exchange.queue import lease

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

NOTE = "цена на сайте в десять раз ниже"


def claim_one(engine: Engine, db_url: str) -> str:
    settings = fast_settings(db_url)
    with transaction(engine) as connection:
        batch = lease.claim(
            connection,
            worker="w1",
            now=datetime.now(UTC),
            limit=1,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )
    return str(batch.messages[0].aggregate)


def rank_of(engine: Engine, message_id: str) -> Any:
    with transaction(engine, read_only=True) as connection:
        return connection.execute(
            select(messages.c.claim_rank).where(messages.c.message_id == message_id)
        ).scalar_one()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_operator_puts_a_waiting_price_first_with_a_note_and_a_viewer_cannot(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    add_operator(db, "victor", "viewer")
    stage(db, [price_row(f"SKU-{n:03d}", 1) for n in range(30)])
    intake.take(db, None, fast_settings(db_url).kinds, datetime.now(UTC))
    mid = message_id_of(db, "SKU-025")
    rank_before = rank_of(db, mid)

    viewer = new_page(browser)
    sign_in(viewer, base, "victor")
    viewer.goto(f"{base}/message/{mid}")
    assert viewer.locator("#prioritize").count() == 0
    csrf = viewer.locator("header form input[name=csrf]").get_attribute("value")
    refused = viewer.request.post(
        f"{base}/action/prioritize", form={"csrf": csrf, "message_id": mid, "note": "mine"}
    )
    assert refused.status == 403

    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/message/{mid}")
    assert "Отправить первым" == page.locator("#prioritize").inner_text()
    csrf = page.locator("#prioritize-form input[name=csrf]").get_attribute("value")
    # Without a note nothing changes (the browser's `required` aside, the server refuses).
    bare = page.request.post(
        f"{base}/action/prioritize", form={"csrf": csrf, "message_id": mid, "note": "  "}
    )
    assert bare.status == 400 and "Нужно примечание" in bare.text()
    # Without the CSRF token neither.
    assert (
        page.request.post(
            f"{base}/action/prioritize", form={"message_id": mid, "note": NOTE}
        ).status
        == 403
    )
    assert rank_before == rank_of(db, mid)

    page.fill("#prioritize-note", NOTE)
    page.click("#prioritize")
    page.wait_for_url(f"{base}/message/{mid}?done=prioritize")
    assert "поставлено первым" in page.locator("#done").inner_text()  # a done action says so
    last = page.locator("table.history tbody tr").last
    assert "поставлено первым по решению оператора" in last.inner_text()
    assert "olga" == last.locator("td.operator").inner_text()
    assert NOTE in last.inner_text()
    assert "новое" == page.locator("#state").inner_text()  # its place changed, not its state
    assert "SKU-025" == claim_one(db, db_url), "the next message a worker claims"

    # Claimed (in progress) it is no longer waiting: no button, and a POST says why in Russian.
    page.goto(f"{base}/message/{mid}")
    assert page.locator("#prioritize").count() == 0
    late = page.request.post(
        f"{base}/action/prioritize", form={"csrf": csrf, "message_id": mid, "note": NOTE}
    )
    assert late.status == 400
    assert "первым можно поставить только сообщение, которое ждёт отправки" in late.text()
    assert "«отправляется»" in late.text()
