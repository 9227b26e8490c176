"""The operators' review of the quarantine's actions: a rejected staging row (never a message,
it can only be cancelled) is offered no «Повторить», is skipped by a retry of a page that holds
it, and a refusal leads back to the list it came from; a preview says what each id is."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
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

from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage
from exchange.words import word

LIST = "/quarantine?reason=invalid-contract&per=50&sort=aggregate"


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
def two(db: Engine, db_url: str, site: SiteSimulator) -> tuple[str, str]:
    """A rejected row (a negative price: invalid-contract) and a price the site refused."""
    stage(db, [price_row("BAD-1", 1, "-1.00", name="Чайник «Заря»")])
    quarantine_some(db_url, site, "GOOD-1")
    return message_id_of(db, "BAD-1"), message_id_of(db, "GOOD-1")


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_a_rejected_rows_page_offers_cancel_only(bench: str, two: tuple[str, str]) -> None:
    rejected, good = two
    client = signed_in(bench, "olga")
    page = client.get(f"/message/{rejected}").text
    assert 'id="cancel"' in page and 'id="retry"' not in page
    assert 'id="retry"' in client.get(f"/message/{good}").text


def test_a_retry_of_a_page_holding_a_rejected_row_skips_it_and_retries_the_rest(
    bench: str, db: Engine, two: tuple[str, str]
) -> None:
    rejected, good = two
    client = signed_in(bench, "olga")
    form = {"action": "retry", "scope": "page", "page_id": [rejected, good], "back": LIST}
    preview = post(client, "/action/preview", form)
    assert preview.status_code == 200, preview.text
    said = _text(preview.text)
    assert f"{word('will_retry', 'ru')}: 1" in said and f"{word('skipped', 'ru')}: 1" in said
    skipped = re.search(r'<ul class="ids" id="skipped">.*?</ul>', preview.text, re.S)
    assert skipped and rejected in _text(skipped.group(0)) and good not in skipped.group(0)
    fields = {**confirm_fields(preview.text), "note": ["site fixed"]}
    done = client.post("/action/confirm", data=fields)
    assert done.status_code == 200, done.text
    assert state_of(db, "GOOD-1") == "new" and state_of(db, "BAD-1") == "quarantined"


def test_a_refused_retry_leads_back_to_the_list_with_its_filters(
    bench: str, two: tuple[str, str]
) -> None:
    rejected, _ = two
    client = signed_in(bench, "olga")
    refused = post(
        client,
        "/action/preview",
        {"action": "retry", "page_id": rejected, "scope": "page", "back": LIST},
    )
    assert refused.status_code == 400
    assert "повторить нельзя" in _text(refused.text) or rejected in refused.text
    back = re.search(r'<a href="([^"]+)" class="back" id="back">', refused.text)
    assert back and html.unescape(back.group(1)) == LIST, refused.text
    # And a confirmation without a note: the same way back.
    no_note = post(
        client,
        "/action/confirm",
        {"action": "cancel", "message_id": rejected, "note": "", "back": LIST},
    )
    assert no_note.status_code == 400
    back = re.search(r'<a href="([^"]+)" class="back" id="back">', no_note.text)
    assert back and html.unescape(back.group(1)) == LIST


def test_a_cancel_preview_says_the_sku_name_and_price_of_each_id(
    bench: str, two: tuple[str, str]
) -> None:
    rejected, good = two
    client = signed_in(bench, "olga")
    preview = post(
        client,
        "/action/preview",
        {"action": "cancel", "page_id": [rejected, good], "scope": "page"},
    )
    assert preview.status_code == 200, preview.text
    touched = re.search(r'<ul class="ids" id="touched">(.*?)</ul>', preview.text, re.S)
    assert touched
    rows = {
        _text(li).split(" — ")[0]: _text(li)
        for li in re.findall(r"<li>.*?</li>", touched.group(1), re.S)
    }
    assert set(rows) == {rejected, good}
    assert "BAD-1" in rows[rejected] and "Чайник «Заря»" in rows[rejected]
    assert "-1,00\xa0₽" in rows[rejected]  # a price as a price (issue 34 item 9)
    assert "GOOD-1" in rows[good] and "199,90\xa0₽" in rows[good]


def test_a_refused_price_names_its_field_once_on_the_list_the_page_and_the_history(
    bench: str, two: tuple[str, str]
) -> None:
    rejected, _ = two
    client = signed_in(bench, "olga")
    once = "цена (price): значение должно быть от 0 и меньше 10^12"
    page = _text(client.get(f"/message/{rejected}").text)
    listed = _text(client.get("/quarantine", params={"reason": "invalid-contract"}).text)
    for said in (page, listed):
        assert once in said, said
        assert "цена: price" not in said and "цена: цена" not in said
    # the message's page says it twice: its last error, and its history's row
    assert page.count(once) >= 2, page


def test_the_workbench_export_says_the_cause_in_russian_and_the_pages_buttons(
    bench: str, two: tuple[str, str]
) -> None:
    client = signed_in(bench, "olga")
    answer = client.get("/export", params={"format": "csv", "reason": "invalid-contract"})
    text = answer.content.decode("utf-8-sig")
    assert "цена (price): значение должно быть от 0 и меньше 10^12" in text
    assert "must be at least" not in text
    assert "exchange quarantine" not in text and "Команда:" not in text
    assert f"«{word('cancel', 'ru')}»" in text


def test_the_list_and_its_export_take_the_same_filters_and_the_list_links_to_its_export(
    bench: str, two: tuple[str, str]
) -> None:
    rejected, good = two
    client = signed_in(bench, "olga")
    listed = client.get("/quarantine", params={"aggregate": "good", "per": "50"}).text
    assert good in listed and rejected not in listed  # the aggregate filter is no longer lost
    export_page = client.get("/export").text
    for name in ("reason", "kind", "aggregate", "since", "until", "q", "superseded"):
        assert f'name="{name}"' in export_page, name
        assert f'name="{name}"' in client.get("/quarantine").text, name
    searched = client.get("/export", params={"format": "json", "q": "BAD-1"})
    assert [e["message_id"] for e in searched.json()["entries"]] == [rejected]
    page = client.get("/quarantine", params={"reason": "http-422", "q": "good", "per": "50"})
    link = re.search(r'<a href="([^"]+)" id="export-these">', page.text)
    assert link, page.text
    href = html.unescape(link.group(1))
    assert href == "/export?reason=http-422&q=good", href
    exported = client.get(href + "&format=json").json()["entries"]
    assert [e["message_id"] for e in exported] == [good]


def test_a_bulk_action_on_the_lists_aggregate_filter_acts_on_that_aggregate_only(
    bench: str, two: tuple[str, str]
) -> None:
    rejected, good = two
    client = signed_in(bench, "olga")
    preview = post(
        client,
        "/action/preview",
        {"action": "cancel", "scope": "all", "all_aggregate": "GOOD", "all_reason": ""},
    )
    assert preview.status_code == 200, preview.text
    touched = re.search(r'<ul class="ids" id="touched">(.*?)</ul>', preview.text, re.S)
    assert touched and good in _text(touched.group(1)) and rejected not in _text(touched.group(1))
    fields = confirm_fields(preview.text)
    assert fields["aggregate"] == ["GOOD"]


def test_a_cancel_preview_says_what_waits_behind_one_message_or_several_by_count(
    bench: str, two: tuple[str, str]
) -> None:
    """The translator's review: the preview of one message said «…ждущих за ними, нет» (them,
    plural) of a single message; one message is «за ней», several «за ними»."""
    rejected, good = two
    client = signed_in(bench, "olga")
    for ids, said, unsaid in (
        ([good], "за ней", "за ними"),
        ([rejected, good], "за ними", "за ней"),
    ):
        preview = post(
            client, "/action/preview", {"action": "cancel", "page_id": ids, "scope": "page"}
        )
        behind = re.search(r'<p id="behind">(.*?)</p>', preview.text, re.S)
        assert behind, preview.text
        assert said in _text(behind.group(1)) and unsaid not in _text(behind.group(1)), behind


def test_the_quarantine_list_leads_with_the_product_and_its_price_as_the_state_lists_do(
    bench: str, two: tuple[str, str]
) -> None:
    """The fresh operator's review: the runbook says the lists lead with the product's name and
    its price, and the state lists and «Поиск» do, but «Карантин» had no «Товар»/«Цена»."""
    client = signed_in(bench, "olga")
    page = client.get("/quarantine", params={"sort": "aggregate"}).text
    header = re.search(r"<thead.*?</thead>", page, re.S)
    assert header, page
    columns = _text(header.group(0))
    assert columns.index("Товар") < columns.index("Цена") < columns.index("Код сообщения")
    names = [_text(c).strip() for c in re.findall(r'<td class="product-name".*?</td>', page, re.S)]
    prices = [_text(c) for c in re.findall(r'<td class="num price nowrap".*?</td>', page, re.S)]
    assert names == ["Чайник «Заря»", "—"], names
    assert prices == ["-1,00\xa0₽", "199,90\xa0₽"], prices
