"""The attacker's catalogue, anonymous requests to 1C's exchange (issue 21, item 6): anyone
can reach ``/1c_exchange.php``, hundreds of requests a second, with text of their choosing.
Without a session nothing is written to the database (no log row that grows without end and
shows the attacker's text to operators) but the summary of refused sign-ins (contract 15: a
row a minute per way in, nothing of what was tried); the refusals are counted in memory and
logged at most once a minute."""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import Engine, select
from web_helpers import USER, web_settings

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import metadata, sign_in_refusals
from exchange.web.onec import Refusals
from exchange.web.server import ONEC, build_app
from exchange.web.throttle import GUESS_LIMITS

PATH = "/1c_exchange.php"


def everything(engine: Engine) -> dict[str, list[Any]]:
    with transaction(engine, read_only=True) as connection:
        return {
            table.name: sorted(map(repr, connection.execute(select(table)).all()))
            for table in metadata.sorted_tables
        }


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


ATTACKS: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("GET", "type=catalog&mode=checkauth", basic(USER, "guess-1234"), None),
    ("GET", "type=catalog&mode=checkauth", {}, None),
    ("GET", "type=catalog&mode=init", {}, None),
    ("POST", "type=catalog&mode=file&filename=offers.xml", {}, b"<x/>" * 100),
    ("GET", "type=catalog&mode=import&filename=offers.xml", {}, None),
    ("GET", "type=catalog&mode=complete", {"Cookie": "EXCHANGE_1C_SESSION=forged.value"}, None),
    ("GET", "type=<script>alert(1)</script>&mode=init", {}, None),
    ("GET", "type=sale&mode=query", {}, None),
]


def test_a_flood_of_anonymous_requests_changes_nothing_in_the_database_and_is_counted(
    db_url: str, engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = web_settings(db_url, tmp_path / "1c")
    app = build_app(bootstrap.web_config(settings), engine)  # its cookie key is stored now
    # Wrong passwords are slowed (test_onec_wire_and_guesses); here the flood's own promises.
    app[ONEC].guesses.throttle.limits = replace(GUESS_LIMITS, delay=0.0, delay_max=0.0)
    before = everything(engine)
    rounds = 30

    async def flood() -> list[str]:
        answers = []
        async with TestClient(TestServer(app)) as client:
            for _ in range(rounds):
                for method, query, headers, body in ATTACKS:
                    response = await client.request(
                        method, f"{PATH}?{query}", headers=headers, data=body
                    )
                    answers.append(await response.text())
        return answers

    with caplog.at_level(logging.WARNING, logger="exchange.web.onec"):
        answers = asyncio.run(flood())
    assert all(answer.startswith("failure\n") for answer in answers), answers[:3]
    after = everything(engine)
    # Contract 15: refused sign-ins are a summary row a minute per way in (the first of the
    # flood at once, the rest at the minute or, here, at the stop), never what was tried;
    # nothing else. Only the wrong password is a sign-in; the other attacks have no secret.
    summaries = after.pop("sign_in_refusals")
    before.pop("sign_in_refusals")
    assert after == before
    assert len(summaries) == 2 and not any("guess-1234" in row for row in summaries)
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(select(sign_in_refusals.c.door, sign_in_refusals.c.count))
        assert sorted(rows.all()) == [("1c", 1), ("1c", rounds - 1)]
    assert app[ONEC].refused.count == rounds * len(ATTACKS)
    lines = [r for r in caplog.records if "refused without a session" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert "guess-1234" not in caplog.text


def test_refusals_are_logged_once_a_period_with_how_many_came_since(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = Refusals(log_every=3600.0)
    with caplog.at_level(logging.WARNING, logger="exchange.web.onec"):
        for _ in range(5):
            refused.add("wrong user or password (HTTP Basic)")
        refused.log_every = 0.0  # the period has passed
        refused.add("not authorized")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "5 request(s) refused" in messages[1]  # 4 unlogged and this one
    assert "(6 since serve started)" in messages[1]
    assert refused.count == 6 and refused.last_reason == "not authorized"
