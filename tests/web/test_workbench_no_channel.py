"""Contract 1 "Nothing is dropped silently" in the workbench (contract 11, 13): a posting no
channel takes (kept with no delivery) is on the dashboard's «Требует внимания» with the words
``status`` says (one computation, ``ops.attention``), and ``find`` and its page show it
rather than nothing, or an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, update
from workbench_helpers import add_operator, close_all, signed_in

from exchange.db.engine import transaction
from exchange.db.schema import channels
from exchange.dev.testing import posting_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake import staging_table as intake


def test_a_posting_no_channel_takes_is_on_the_dashboard_found_and_its_page_opens(
    serve: Callable[..., Any], db: Engine
) -> None:
    base: str = serve()
    add_operator(db, "olga", "operator")
    try:
        with transaction(db) as connection:  # the one channel takes prices only
            connection.execute(update(channels).values(takes='["price"]'))
        stage(db, [posting_row("ACC-16", 1)])
        intake.take(db, None, DEFAULT_KINDS, SystemClock().now())
        client = signed_in(base, "olga")
        dashboard = " ".join(client.get("/").text.split())
        assert "ни один канал не принимает этот вид" in dashboard, dashboard
        found = client.get("/find", params={"q": "ACC-16"})
        assert found.status_code == 200
        assert "financial_posting.ACC-16.v1." in found.text
        mid = next(
            word
            for word in found.text.replace('"', " ").replace("/", " ").split()
            if word.startswith("financial_posting.ACC-16.v1.")
        )
        page = client.get(f"/message/{mid}")
        assert page.status_code == 200, page.text
        assert "ACC-16" in page.text
    finally:
        close_all()
