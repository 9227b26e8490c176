"""Seller review 35: the workbench's advice on a price ``invalid-for-channel`` said retry where
1C had since sent a newer version of it (a retry would only end superseded by the newer):
with a newer version, the advice is cancel; without one, correct and retry as before."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from workbench_helpers import signed_in

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row
from tests.support.invalid_newer_scene import invalid_newer_scene
from tests.support.second_channel import on_the_one, taken

messages = one_channel_messages()
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
RETRY = "«Повторить»"


def _advice(olga: str, message_id: str) -> str:
    page = html.unescape(signed_in(olga, "olga").get(f"/message/{message_id}").text)
    return " ".join(page.split('id="next-step"', 1)[1].split("</dd>", 1)[0].split())


def _first(db: Engine) -> str:
    with transaction(db, read_only=True) as connection:
        return str(
            connection.execute(
                select(messages.c.message_id).where(messages.c.version == 1)
            ).scalar_one()
        )


def test_an_invalid_price_with_a_newer_version_from_1c_is_advised_cancel_not_retry(
    olga: str, db: Engine
) -> None:
    taken(db, [price_row("SKU-1", 1, "10.50", aggregate="SKU-1/retail")], NOW)
    on_the_one(db, "SKU-1/retail", state="quarantined", reason="invalid-for-channel")
    alone = _advice(olga, _first(db))
    assert RETRY in alone, alone  # no newer version: correct it, then retry, as before
    taken(db, [price_row("SKU-1", 2, "11.00", aggregate="SKU-1/retail")], NOW)

    said = _advice(olga, _first(db))

    assert "1С с тех пор прислала более новую версию" in said, said
    assert "«Снять с отправки навсегда»" in said and RETRY not in said, said


def _section(page: str, start: str, end: str) -> str:
    return " ".join(page.split(start, 1)[1].split(end, 1)[0].split())


def test_the_quarantine_list_advises_cancel_for_those_with_a_newer_version_alone(
    olga: str, db: Engine
) -> None:
    """The quarantine's list advised correct-and-retry for every price invalid for its
    channel, those with a newer version from 1C too: its «Что делать дальше» says the
    message page's cancel advice for those (one place decides it, ``advice_words``), beside
    the reason's own for the others, and their rows say which they are."""
    taken(
        db,
        [
            price_row("SKU-1", 1, "10.50", aggregate="SKU-1/retail"),
            price_row("SKU-2", 1, "20.50", aggregate="SKU-2/retail"),
        ],
        NOW,
    )
    for aggregate in ("SKU-1/retail", "SKU-2/retail"):
        on_the_one(db, aggregate, state="quarantined", reason="invalid-for-channel")
    client = signed_in(olga, "olga")
    before = html.unescape(client.get("/quarantine").text)
    assert "1С с тех пор прислала" not in before  # no newer version yet: one advice
    taken(db, [price_row("SKU-1", 2, "11.00", aggregate="SKU-1/retail")], NOW)
    with transaction(db, read_only=True) as connection:
        ids = dict(
            connection.execute(
                select(messages.c.aggregate, messages.c.message_id).where(messages.c.version == 1)
            ).all()
        )

    page = html.unescape(client.get("/quarantine").text)

    steps = _section(page, '<section id="next-steps">', "</section>")
    advices = [_section(dd, ">", "</dd>") for dd in steps.split("<dd")[1:]]
    assert len(advices) == 2, steps
    alone, newer = advices
    assert RETRY in alone and "1С с тех пор прислала" not in alone, alone
    # the message page's words for it, from the one place that decides them
    assert newer == _advice(olga, ids["SKU-1/retail"]).split(">", 1)[1], newer
    assert "1С с тех пор прислала более новую версию" in newer and RETRY not in newer, newer
    assert (
        "<dt>не подходит каналу (invalid-for-channel) — 1С с тех пор прислала более новую "
        "версию</dt>" in steps
    ), steps
    rows = {
        message_id: _section(page, f'value="{message_id}"', "</tr>") for message_id in ids.values()
    }
    assert 'class="newer">1С с тех пор прислала более новую версию' in rows[ids["SKU-1/retail"]]
    assert 'class="newer"' not in rows[ids["SKU-2/retail"]]


def test_the_list_and_the_message_page_say_what_the_newer_version_does(
    olga: str, db: Engine
) -> None:
    """Review 36: a newer version in quarantine too was said to go in the price's place
    (item 4; buyers keep the price delivered before); a row superseded after quarantine was
    marked as one with a newer version to go (item 5), where its advice is another. The list's
    rows, its «Что делать дальше» and the message page say it from one decision."""
    ids = invalid_newer_scene(db, NOW)
    client = signed_in(olga, "olga")

    page = html.unescape(client.get("/quarantine").text)

    rows = {
        name: _section(page, f'value="{ids[name]}"', "</tr>")
        for name in ids
        if name in {"V-1 v2", "V-2 v2", "V-2 v3", "V-3 v1", "V-4 v1"}
    }
    assert (
        'class="newer">1С с тех пор прислала более новую версию, но и та в карантине'
        in rows["V-2 v2"]
    ), rows["V-2 v2"]
    assert 'class="newer">1С с тех пор прислала более новую версию<' in rows["V-3 v1"]
    for alone in ("V-1 v2", "V-2 v3", "V-4 v1"):  # V-1 v2: superseded, its advice is that
        assert 'class="newer"' not in rows[alone], (alone, rows[alone])
    steps = _section(page, '<section id="next-steps">', "</section>")
    advices = [_section(dd, ">", "</dd>") for dd in steps.split("<dd")[1:]]
    goes = [a for a in advices if "та уйдёт вместо неё" in a]
    held = [a for a in advices if "но и та в карантине" in a]
    # the reason's own, goes, held, and (review rev36b) withheld and superseded
    assert len(advices) == 5 and len(goes) == 1 and len(held) == 1, steps
    assert "уйдёт вместо" not in held[0], held
    # the message page: the same words, from the same decision
    assert _advice(olga, ids["V-2 v2"]).split(">", 1)[1] == held[0]
    assert _advice(olga, ids["V-3 v1"]).split(">", 1)[1] == goes[0]
    # superseded after quarantine: that advice, as the report's row says it (item 6: «площадка»)
    superseded = _advice(olga, ids["V-1 v2"])
    assert "на площадку уже доставлена более новая версия" in superseded, superseded
    assert "уйдёт вместо" not in superseded, superseded


WITHHELD_NOTE = "1С с тех пор прислала более новую версию, но площадка её придерживает"
WITHHELD = "но площадка придерживает её в собственном карантине цен"
WITHHELD_LIST = "список «Принято каналом, придержано от покупателей»"


def test_the_list_and_the_message_page_say_a_withheld_newer_version_goes_nowhere_until_released(
    olga: str, db: Engine
) -> None:
    """Review rev36b, item 1: a newer version the marketplace withholds in its own price
    quarantine was said to go in the price's place («та уйдёт вместо неё»), though buyers do
    not see it until someone releases it. The list's row, its «Что делать дальше» and the
    message page say it from one decision: cancel, then decide on the newer one in the list
    of withheld prices; a newer one on its way beside a withheld one still goes."""
    ids = invalid_newer_scene(db, NOW)
    client = signed_in(olga, "olga")

    page = html.unescape(client.get("/quarantine").text)

    rows = {
        name: _section(page, f'value="{ids[name]}"', "</tr>")
        for name in ids
        if name in {"V-5 v2", "V-5 v4", "V-6 v1"}
    }
    assert f'class="newer">{WITHHELD_NOTE}<' in rows["V-5 v2"], rows["V-5 v2"]
    assert 'class="newer">1С с тех пор прислала более новую версию<' in rows["V-6 v1"]
    assert 'class="newer"' not in rows["V-5 v4"], rows["V-5 v4"]
    steps = _section(page, '<section id="next-steps">', "</section>")
    assert f"<dt>не подходит каналу (invalid-for-channel) — {WITHHELD_NOTE}</dt>" in steps, steps
    advices = [_section(dd, ">", "</dd>") for dd in steps.split("<dd")[1:]]
    (withheld,) = [a for a in advices if WITHHELD in a]
    assert "уйдёт вместо" not in withheld and "в карантине, так что" not in withheld, withheld
    assert "«Снять с отправки навсегда»" in withheld and RETRY not in withheld, withheld
    assert WITHHELD_LIST in withheld and "сайт" not in withheld, withheld
    assert "пока новую не выпустят" in withheld, withheld
    # the message page: the same words, from the same decision
    assert _advice(olga, ids["V-5 v2"]).split(">", 1)[1] == withheld
    assert "та уйдёт вместо неё" in _advice(olga, ids["V-6 v1"])
    # the workbench's export: the same advice, the list named where it is (no command)
    exported = client.get("/export", params={"format": "json"})
    assert exported.status_code == 200, exported.text
    entries = {e["message_id"]: e for e in json.loads(exported.text)["entries"]}
    said = entries[ids["V-5 v2"]]["next_check"]
    assert entries[ids["V-5 v2"]]["newer_version_withheld"] is True, said
    assert WITHHELD in said and f"{WITHHELD_LIST} на рабочем месте" in said, said
    assert "exchange withheld list" not in said and "уйдёт вместо" not in said, said


def test_the_list_says_the_advice_of_rows_superseded_after_quarantine_as_their_page_does(
    olga: str, db: Engine
) -> None:
    """Review rev36b, item 2: a row superseded after quarantine (a newer version delivered
    after it was quarantined) had no advice of its own in the quarantine's list (only its
    message page said it): the list says it apart, as it does the newer versions' advice, in
    the marketplace's words (never «сайт»), and marks the row; the reason's own advice stays
    for the others."""
    ids = invalid_newer_scene(db, NOW)
    client = signed_in(olga, "olga")

    page = html.unescape(client.get("/quarantine").text)

    row = _section(page, f'value="{ids["V-1 v2"]}"', "</tr>")
    note = "устарела после карантина: более новая версия уже доставлена"
    assert f'class="superseded">{note}<' in row, row
    assert 'class="superseded"' not in _section(page, f'value="{ids["V-4 v1"]}"', "</tr>")
    steps = _section(page, '<section id="next-steps">', "</section>")
    assert f"<dt>не подходит каналу (invalid-for-channel) — {note}</dt>" in steps, steps
    advices = [_section(dd, ">", "</dd>") for dd in steps.split("<dd")[1:]]
    (superseded,) = [a for a in advices if "уже доставлена более новая версия" in a]
    assert "на площадку уже доставлена более новая версия" in superseded, superseded
    assert "сайт" not in superseded and RETRY not in superseded, superseded
    assert _advice(olga, ids["V-1 v2"]).split(">", 1)[1] == superseded
    # the others of the reason keep its own advice (correct, then retry)
    assert any(RETRY in a and "1С с тех пор" not in a for a in advices), advices
    # the filter «только устаревшие» lists it alone, with its advice alone
    only = html.unescape(client.get("/quarantine?superseded=1").text)
    only_steps = _section(only, '<section id="next-steps">', "</section>")
    only_advices = [_section(dd, ">", "</dd>") for dd in only_steps.split("<dd")[1:]]
    assert only_advices == [superseded], only_steps
