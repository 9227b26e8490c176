"""The workbench's «Выпустить к покупателям» with several channels (issue 32): the message's
page sends the channel of the withheld row it shows, and the release acts on that channel's
delivery; withheld on two, the page asks which, and the handler refuses to guess. The site
(its withholding switch) and the Yandex Market simulator withhold the same drop."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from withheld_two import Two, states, two_channels, withheld_on_both
from workbench_helpers import add_operator, csrf_of, signed_in


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Two]:
    with two_channels(tmp_path) as found:
        yield found


def test_the_release_button_acts_on_the_channel_of_the_withheld_row(
    serve: Callable[..., Any], db_url: str, db: Engine, two: Two
) -> None:
    mid = withheld_on_both(db_url, db, two)
    base = serve(channels=two.named)
    add_operator(db, "olga", "operator")
    client = signed_in(base, "olga")
    page = client.get(f"/message/{mid}").text
    assert 'id="release-channel"' in page  # withheld on two: which one
    assert "выпуск просит выбранный канал" in html.unescape(page)
    # No channel named while two withhold it: asked which, nothing done.
    unnamed = client.post(
        "/action/release",
        data={"csrf": csrf_of(client, f"/message/{mid}"), "message_id": mid, "note": "sale"},
    )
    assert unnamed.status_code == 400, unnamed.text
    assert "api, market" in html.unescape(unnamed.text)
    assert states(db, mid) == {"api": "withheld", "market": "withheld"}
    # The page's row on the site: released there, delivered; Yandex's stays withheld.
    done = client.post(
        "/action/release",
        data={
            "csrf": csrf_of(client, f"/message/{mid}"),
            "message_id": mid,
            "note": "sale",
            "channel": "api",
        },
    )
    assert done.status_code == 303, html.unescape(done.text)
    assert states(db, mid) == {"api": "delivered", "market": "withheld"}
    assert two.site.effect_counts()[mid] == 1
    # Now the page shows Yandex's row alone: the form carries its channel, and the release
    # is judged by Yandex's delivery (withheld), never the site's (delivered).
    page = client.get(f"/message/{mid}").text
    assert '<input type="hidden" name="channel" value="market">' in page, page
    market = client.post(
        "/action/release",
        data={
            "csrf": csrf_of(client, f"/message/{mid}"),
            "message_id": mid,
            "note": "sale",
            "channel": "market",
        },
    )
    assert market.status_code == 303, html.unescape(market.text)
    assert two.ym.requests["price-quarantine/confirm"] >= 1
    assert two.site.effect_counts()[mid] == 1, "the site was not asked again"
