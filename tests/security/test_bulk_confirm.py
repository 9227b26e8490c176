"""A bulk confirmation acts on what its preview showed, never beyond (issue 21 item 8,
contract 11): the confirmation carries the previewed ids, signed for the session; when the
filters select others by then, the preview is shown again with the difference and nothing is
done; a form widened by hand is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from reporttools import parse_html
from sqlalchemy import Engine
from web_helpers import running, web_settings
from workbench_helpers import (
    add_operator,
    close_all,
    confirm_fields,
    message_id_of,
    post,
    quarantine_some,
    signed_in,
    state_of,
)

from exchange.db.engine import make_engine
from exchange.dev.sitesim import Faults, SiteSimulator


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as simulator:
        yield simulator


@pytest.fixture
def bench(db_url: str, tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    engine = make_engine(db_url)
    add_operator(engine, "olga", "operator")
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        yield base, engine
    close_all()
    engine.dispose()


def test_a_bulk_cancel_leaves_an_entry_that_came_after_its_preview(
    bench: tuple[str, Engine], db_url: str, site: SiteSimulator
) -> None:
    base, engine = bench
    quarantine_some(db_url, site, "SKU-A", "SKU-B")
    client = signed_in(base, "olga")
    preview = post(client, "/action/preview", {"action": "cancel", "reason": "http-422"})
    assert preview.status_code == 200 and "Будут сняты с отправки навсегда: 2" in preview.text
    shown = confirm_fields(preview.text)

    quarantine_some(db_url, site, "SKU-C")  # the same reason, never shown to the operator
    late = message_id_of(engine, "SKU-C")

    again = client.post("/action/confirm", data={**shown, "note": ["wrong prices"]})
    assert again.status_code == 409, again.text
    # named, on the page, as what came since the preview (its <wbr> break points add nothing)
    assert late in parse_html(again.content).all_text
    for sku in ("SKU-A", "SKU-B", "SKU-C"):
        assert state_of(engine, sku) == "quarantined", sku

    # The page shown again is a new preview: confirming it acts on what it shows.
    done = client.post(
        "/action/confirm", data={**confirm_fields(again.text), "note": ["wrong prices"]}
    )
    assert done.status_code == 200, done.text
    for sku in ("SKU-A", "SKU-B", "SKU-C"):
        assert state_of(engine, sku) == "cancelled", sku


def test_a_bulk_confirmation_widened_by_hand_is_refused(
    bench: tuple[str, Engine], db_url: str, site: SiteSimulator
) -> None:
    base, engine = bench
    quarantine_some(db_url, site, "SKU-A")
    client = signed_in(base, "olga")
    preview = post(client, "/action/preview", {"action": "retry", "reason": "http-422"})
    shown = confirm_fields(preview.text)
    quarantine_some(db_url, site, "SKU-B")
    widened = {**shown, "previewed": [*shown["previewed"], message_id_of(engine, "SKU-B")]}
    answer = client.post("/action/confirm", data={**widened, "note": ["all of them"]})
    assert answer.status_code == 400
    assert state_of(engine, "SKU-A") == "quarantined"
    assert state_of(engine, "SKU-B") == "quarantined"
