"""Review words35b (a seller in Russian; docs/marketplaces.md, the pair rule): the words said of
an old price that waits for an operator's decision on its SKU's main price, quarantined by a
rule of two price types, and of that quarantined price. Ozon's simulator (research §1.1: the
old price 1200 set in the seller's cabinet refuses 1C's 1300), on SQLite and PostgreSQL; the
words as ``exchange find``, ``history`` and ``status`` print them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from marketsims import ozon_sim
from ozon_pair import both_clocks, cabinet_old_price_refuses, pair_worker, typed
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.ozonsim import OzonSimulator
from exchange.dev.testing import drain, run_worker, stage
from exchange.ops.backlog import backlog, backlog_words
from exchange.worker import Worker

RU = {"EXCHANGE_LANG": "ru", "COLUMNS": "400"}
EN = {"EXCHANGE_LANG": "en", "COLUMNS": "400"}


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _said(shown: str) -> str:
    """``exchange history``'s output as one line: the lines above the table, then the table's
    last column (the detail, wrapped within its cell) read on."""
    lines = shown.splitlines()
    above = [x for x in lines if "│" not in x and not x.startswith(("┏", "┃", "┡", "└"))]
    detail = [x.split("│")[-2].strip() for x in lines if x.count("│") > 2]
    return " ".join(" ".join(above + detail).split())


def _waiting_for_a_person(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> dict[str, str]:
    """1000 delivered; Ozon holds the cabinet's old price 1200; 1C's 1300 quarantined
    (``channel-rule``); then 1C's old price 1500 waits for the decision on 1300. The backlog
    words (``exchange status``'s line) with a live worker, by language."""
    clock, worker = pair_worker(db_url, engine, site, tmp_path)
    said: dict[str, str] = {}

    advance = both_clocks(clock, site)

    async def scenario(w: Worker) -> None:
        await cabinet_old_price_refuses(w, engine, site, advance)
        advance(60)
        stage(engine, [typed(1, "1500.00", "old")])
        for _ in range(3):
            await w.cycle()
            advance(61)
        await w.cycle()
        with transaction(engine, read_only=True) as connection:
            figures = backlog(connection, clock.now(), w.kinds, timedelta(seconds=60))
        for lang in ("ru", "en"):
            said[lang] = backlog_words(figures, lang=lang, live=True)  # type: ignore[arg-type]

    run_worker(worker, scenario)
    return said


def test_status_says_a_price_waiting_for_an_operator_waits_for_the_operator_with_no_time(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Item 2: ``exchange status`` said «очередь: 1 сообщение, около 1 мин: последнее из них
    уйдёт тогда» of the old price that waits for an operator's decision on the main price:
    nothing sends it until a person decides (a retry or a cancel of the quarantined price). It
    says it waits for the operator, with no time; ``--json`` carries no due time for it."""
    from clitools import Cli

    said = _waiting_for_a_person(db_url, engine, site, tmp_path)
    assert "ждут решения оператора по основной цене в карантине: 1" in said["ru"], said
    assert "около" not in said["ru"] and "about" not in said["en"], said
    assert "waiting for an operator's decision on the main price" in said["en"], said
    cli = Cli(tmp_path)
    shown = cli("status", db=db_url, env=RU)
    line = next(x for x in shown.stdout.splitlines() if x.startswith("очередь:"))
    assert "ждут решения оператора по основной цене в карантине: 1" in line, shown.stdout
    assert "около" not in line and "1 сообщение" not in line, line
    told = json.loads(cli("status", "--json", db=db_url, env=EN).stdout)
    waiting = told["backlog"]
    assert (waiting["messages"], waiting["awaiting_person"], waiting["due_s"]) == (0, 1, None)


def test_the_quarantined_price_says_1cs_old_price_waits_for_the_decision_never_that_1c_sent_none(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Item 1: ``exchange history`` of the quarantined 1300 said "1C has sent none of it for
    this SKU" («1С не присылала её для этого SKU») while 1C's old price 1500 waited beside it
    for the operator's decision on 1300. The entry's words are of the time of the refusal, and
    the history names the old price 1C did send, waiting for that decision."""
    from clitools import Cli

    _waiting_for_a_person(db_url, engine, site, tmp_path)
    cli = Cli(tmp_path)
    found = cli("find", "SKU-1", db=db_url, env=EN).stdout
    ids = [x for x in found.splitlines() if x.startswith("price.")]  # a row's first line
    quarantined = next(x for x in ids if x.startswith("price.SKU-1.v2."))
    waiting = next(x for x in ids if x.startswith("price.SKU-1_old.v1."))
    told = cli("history", quarantined, db=db_url, env=EN)
    assert told.returncode == 0, told.stderr
    en = _said(told.stdout)
    assert "has sent none of it" not in en, en
    assert "1C had sent none for this SKU when Ozon refused this price" in en, en
    said = f"1C's SKU-1/old v1 ({waiting}) waits for an operator's decision on this price"
    assert said in en, en
    ru = _said(cli("history", quarantined, db=db_url, env=RU).stdout)
    assert "1С не присылала её" not in ru, ru
    assert "но к отказу Ozon 1С её для этого SKU не присылала" in ru, ru
    said = f"SKU-1/old v1 из 1С ({waiting}) ждёт решения оператора об этой цене"
    assert said in ru and "повтор этой отправит обе цены вместе" in ru, ru


def test_a_quarantined_old_price_says_the_marketplace_still_shows_the_strikethrough_1c_replaced(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Item 4: 1000 with old_price 1400 delivered; 1C's old price 1020 (a gap of 20, under
    Ozon's 5 %, research §1.4) waits for 1C's next package, then is quarantined (900, below
    1000, was the old price here before review rev40 A4: an old price not above the price is
    no discount now, and goes as old_price "0" at once). Before it is, 1000 goes with
    old_price "0" (issue 32: never the old price 1C replaced), and here Ozon refuses that
    (the category's range moved above 1000 meanwhile, §1.4 ``invalid_category_price``): Ozon
    keeps showing 1400 struck through. The entry said only the rule it breaks; it says, in
    one sentence, that buyers still see the strikethrough price 1C replaced (``history``, the
    operators' report)."""
    from clitools import Cli

    clock, worker = pair_worker(db_url, engine, site, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "1000.00", "retail"), typed(1, "1400.00", "old")])
        await drain(w)
        site.set_category_bounds("SKU-1", Decimal(1100), Decimal(100000))
        for _ in range(13):  # the grace for 1C's next package (10 min) runs out
            clock.advance(61)
            site.clock.advance(61)
            if _ == 0:
                stage(engine, [typed(2, "1020.00", "old")])
            await w.cycle()

    run_worker(worker, scenario)
    product = site.product("SKU-1")
    assert product is not None and product.old_price == Decimal(1400), "Ozon refused 1000/0"
    assert 1 == site.outcomes["invalid_category_price"], "the clearing went once, refused"
    cli = Cli(tmp_path)
    found = cli("find", "SKU-1/old", db=db_url, env=EN).stdout
    refused = next(x for x in found.splitlines() if x.startswith("price.SKU-1_old.v2."))
    assert "quarantined" in found, found
    en = _said(cli("history", refused, db=db_url, env=EN).stdout)
    said = (
        "Ozon still shows old_price 1400.00, the strikethrough price 1C replaced: buyers see it "
        "until 1C's next price of this SKU goes without it, or until a retry of this one sends "
        "the price without it again and the marketplace takes it; a cancel leaves it shown"
    )
    assert said in en, en
    ru = _said(cli("history", refused, db=db_url, env=RU).stdout)
    said = "Ozon по-прежнему показывает old_price 1400.00 — зачёркнутую цену, которую 1С заменила"
    assert said in ru and "покупатели видят её" in ru, ru
    assert "отмена её не убирает" in ru, ru  # review rev37 W1: a cancel sends nothing
    report = tmp_path / "quarantine.md"
    written = cli("quarantine", "export", "--output", str(report), "--lang", "ru", db=db_url)
    assert written.returncode == 0, written.stderr
    shown = " ".join(report.read_text(encoding="utf-8").split())
    assert said in shown, shown


def _quarantined_after_the_wait(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path, *, refuse: bool
) -> Any:
    """The seller's sequence of review ozwords38: 1C's 950 with old price 1400 delivered
    (Ozon 950/1400); 1C's old price 990 alone (a gap of 40, under Ozon's 5 %, research §1.1)
    waits for 1C's next package, then is quarantined. Before it is, the service sends 950
    with old_price "0" (the clearing); ``refuse``: Ozon refuses that (the category's range
    moved above 950, §1.4 ``invalid_category_price``). The ``Cli`` and the quarantined id."""
    from clitools import Cli

    clock, worker = pair_worker(db_url, engine, site, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(engine, [typed(1, "950.00", "retail"), typed(1, "1400.00", "old")])
        await drain(w)
        if refuse:
            site.set_category_bounds("SKU-1", Decimal(1100), Decimal(100000))
        for _ in range(13):  # the grace for 1C's next package (10 min) runs out
            clock.advance(61)
            site.clock.advance(61)
            if _ == 0:
                stage(engine, [typed(2, "990.00", "old")])
            await w.cycle()

    run_worker(worker, scenario)
    cli = Cli(tmp_path)
    found = cli("find", "SKU-1/old", db=db_url, env=EN).stdout
    refused = next(x for x in found.splitlines() if x.startswith("price.SKU-1_old.v2."))
    assert "quarantined" in found, found
    return cli, refused


def test_a_quarantined_old_price_says_the_service_cleared_the_strikethrough_1c_replaced(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozwords38 item 1: after the full wait, the quarantined lone old price 990 said
    only the rule; nothing told the seller that the service had sent 950 without an old price
    (old_price "0"), so Ozon no longer shows 1400, and the advice spoke only of leaving "the
    price the error names live beside the new one". Its words (``history``, in English and
    Russian, and the operators' report) say the clearing and what buyers see, in a seller's
    words, never Ozon's field; the advice says what a cancel leaves after a clearing."""
    cli, refused = _quarantined_after_the_wait(db_url, engine, site, tmp_path, refuse=False)
    product = site.product("SKU-1")
    assert product is not None and (product.price, product.old_price) == (950, 0)
    en = _said(cli("history", refused, db=db_url, env=EN).stdout)
    said = (
        "the service sent the price 950.00 without a strikethrough price, so Ozon no longer "
        "shows 1400.00, the strikethrough price 1C replaced: buyers see 950.00 without a "
        "discount until 1C sends a strikethrough price that keeps the rule"
    )
    assert said in en, en
    assert 'old_price "0"' not in en and "still shows" not in en, en
    ru = _said(cli("history", refused, db=db_url, env=RU).stdout)
    said = (
        "сервис отправил цену 950.00 без зачёркнутой цены, и Ozon больше не показывает "
        "1400.00 — зачёркнутую цену, которую 1С заменила"
    )
    assert said in ru, ru
    report = tmp_path / "quarantine.md"
    written = cli("quarantine", "export", "--output", str(report), "--lang", "en", db=db_url)
    assert written.returncode == 0, written.stderr
    shown = " ".join(report.read_text(encoding="utf-8").split())
    assert "to leave the price without one, cancel this record" in shown, shown


def test_a_refused_clearing_says_the_marketplaces_refusal(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozwords38 item 4: Ozon refused the clearing (950 with old_price "0": the
    category's range moved above 950), and the quarantine of 990 said Ozon still shows 1400,
    never why the clearing failed. It says Ozon's refusal, its code and meaning, in English
    and in Russian."""
    cli, refused = _quarantined_after_the_wait(db_url, engine, site, tmp_path, refuse=True)
    product = site.product("SKU-1")
    assert product is not None and product.old_price == Decimal(1400), "Ozon refused 950/0"
    en = _said(cli("history", refused, db=db_url, env=EN).stdout)
    said = "the service sent the price 950.00 without a strikethrough price, and Ozon refused it:"
    assert said in en and "invalid_category_price" in en, en
    assert "still shows old_price 1400.00" in en, en
    ru = _said(cli("history", refused, db=db_url, env=RU).stdout)
    said = "сервис отправил цену 950.00 без зачёркнутой цены, но Ozon отказал:"
    assert said in ru and "invalid_category_price" in ru, ru
    assert "refused it" not in ru, ru
