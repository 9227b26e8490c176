"""Review rev39y H1 (docs/marketplaces.md, the pair rule; research §3.1: discountBase above the
value by a discount of 5-99 %; §3.4: a 200 is accepted, not applied, and a 400 names the offers
it refuses): Yandex accepted 1C's 1000/1400 and does not show it yet; 1C's discountBase 1050
alone breaks the rule beside 1000 (a discount of 4.76 %) and waits for 1C's next package, and
the value 1000 goes once more without 1400, the discount 1C replaced. Yandex answers that
update 400 (the simulator armed to, once).

Before: the value 1000 was quarantined ``http-400`` "refused" though Yandex took it with its
200 and showed it, Yandex kept 1000 "was 1400" with no word of it anywhere, and 1050 was judged
without a value (or beside nothing Yandex held). Now the refusal is of the update without 1400
only: 1000 is read back as the update Yandex took and delivered once shown, its words say
Yandex refused the update without discountBase 1400 and buyers still see it; 1050 waits for
1C's next package judged beside the accepted value 1000; the update without 1400 is not sent
again and again.

A worker against the simulator over HTTP, on SQLite and PostgreSQL, the clocks moved by the
test (``test_ym_pair_read_back_pending``)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from test_ym_pair_read_back_pending import STEP, pair_worker, run_for, settle, shown, ym
from ym_pair import row, states

from exchange.db.engine import transaction
from exchange.db.schema import history, messages
from exchange.dev.testing import run_worker, stage
from exchange.dev.ymsim import ApiError, YmSimulator
from exchange.words import detail_words
from exchange.worker import Worker

__all__ = ["ym"]  # the simulator fixture, shared

# Words about the offer, and words that say its price is set already (a repeat: Yandex may
# compare the value alone), which the service reads back as maybe taken (§3.5 open).
REFUSALS = ["Price update failed: offerId = 'Y-1'", "Price is already set: offerId = 'Y-1'"]


def said(engine: Engine, aggregate: str, version: int) -> list[tuple[str, str]]:
    """The message's history: (state it went to, words), in order."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(history.c.to_state, history.c.detail)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.aggregate == aggregate, messages.c.version == version)
            .order_by(history.c.id)
        )
        return [(str(s), str(d or "")) for s, d in rows]


@pytest.mark.parametrize("refusal", REFUSALS, ids=["refused", "already-set"])
def test_a_refused_update_without_the_replaced_discount_leaves_the_accepted_value_delivered(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, refusal: str
) -> None:
    worker, advance = pair_worker(db_url, engine, ym, tmp_path)
    seen: dict[str, object] = {}
    updates: list[str] = []

    def refuse_once(method: str) -> None:
        if method == "offer-prices/updates":
            updates.append(method)
            if len(updates) == 1:  # the value 1000 once more without 1400
                raise ApiError(400, [("BAD_REQUEST", refusal)])

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "900"), row("Y-1", "old", 1, "1200")])
        await settle(engine, w, advance)
        stage(engine, [row("Y-1", "retail", 2, "1000"), row("Y-1", "old", 2, "1400")])
        await run_for(w, advance, STEP)
        seen["accepted"] = shown(ym)
        ym.on_request = refuse_once
        stage(engine, [row("Y-1", "old", 3, "1050")])
        await run_for(w, advance, 20.0)

    try:
        run_worker(worker, scenario)
    finally:
        ym.on_request = None
    assert (Decimal(900), Decimal(1200)) == seen["accepted"], "accepted, not shown yet"
    assert updates, "the update without 1400 went and was refused"
    assert 1 == len(updates), f"never sent again without 1400: {updates}"
    # What Yandex shows: 1000, and 1400, the discount 1C replaced (the update without it refused).
    assert (Decimal(1000), Decimal(1400)) == shown(ym)

    found = states(engine)
    history_ = "\n".join(map(str, said(engine, "Y-1/retail", 2)))
    assert ("delivered", None) == found[("Y-1/retail", 2)], history_
    delivered = [d for s, d in said(engine, "Y-1/retail", 2) if s == "delivered"]
    assert 1 == len(delivered), said(engine, "Y-1/retail", 2)
    words = delivered[0]
    assert words.startswith("HTTP 200, read back: offer 'Y-1' shows value=1000"), words
    assert "refused the update of offer 'Y-1' without discountBase 1400" in words, words
    assert refusal in words and "buyers see it" in words, words
    russian = detail_words(words)
    assert "Яндекс Маркет отклонил обновление предложения 'Y-1' без discountBase 1400" in (
        russian
    ), russian
    assert "покупатели видят её" in russian, russian
    assert not [s for s, _ in said(engine, "Y-1/retail", 2) if s == "quarantined"]

    # 1050 waits for 1C's next package, judged beside the accepted value 1000.
    assert ("delayed", None) == found[("Y-1/old", 3)], (found, said(engine, "Y-1/old", 3))
    waits = said(engine, "Y-1/old", 3)[-1][1]
    assert "(discountBase 1050, value 1000)" in waits, waits
    assert "no price mapped" not in waits, waits
