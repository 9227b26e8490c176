"""Refused sign-ins (issue 34 item 5; contract 15, "Refused sign-ins"): ``serve`` writes at
most one summary row a minute per way in (a count, the first and the last time, never the
name or address tried), so a flood of wrong passwords is not a flood of writes; wrong 1C
passwords (intake tokens) in the last hour with no success since are the cause
``sign-in-refused:1c`` (``:intake``), said in ``status``, on the page and in the notice with
the same words, and cleared by a successful sign-in. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import sign_in_refusals
from exchange.domain.clock import FakeClock
from exchange.domain.notify import Decision, Stop
from exchange.domain.policy import KindPolicies
from exchange.ops import notify, sign_ins
from exchange.ops.attention import attention
from exchange.ops.status import status
from exchange.report.notice import compose
from exchange.web.sign_ins import SignIns

KINDS = KindPolicies.of({})


class Seconds:
    """A monotonic clock that moves only when told (the tally's minute)."""

    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


def _rows(engine: Engine) -> list[dict[str, object]]:
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(select(sign_in_refusals).order_by(sign_in_refusals.c.id))
        return [dict(row) for row in found.mappings()]


def _causes(engine: Engine, clock: FakeClock) -> tuple[list[str], list[str]]:
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, clock.now(), KINDS)
        found = attention(connection, None, figures, clock.now(), KINDS, 60.0)
    return [c.code for c in found.causes], [c.words("ru") for c in found.causes]


def test_a_flood_of_wrong_passwords_is_one_row_a_minute_with_nothing_of_what_was_tried(
    engine: Engine, clock: FakeClock
) -> None:
    seconds = Seconds()
    tally = SignIns(engine, clock, seconds)

    async def flood() -> None:
        for _ in range(5000):
            await tally.refused(sign_ins.ONEC)
            clock.advance(0.001)
        await tally.flush()  # within the minute: nothing more is written
        assert len(_rows(engine)) == 1
        seconds.value += 60
        await tally.flush()

    asyncio.run(flood())
    rows = _rows(engine)
    assert [(r["door"], r["count"]) for r in rows] == [("1c", 1), ("1c", 4999)]
    assert set(rows[0]) == {"id", "door", "count", "first_at", "last_at", "succeeded_at"}
    assert rows[1]["first_at"] <= rows[1]["last_at"]


def test_wrong_1c_passwords_are_a_cause_until_a_successful_sign_in(
    engine: Engine, clock: FakeClock
) -> None:
    seconds = Seconds()
    tally = SignIns(engine, clock, seconds)

    async def refused(door: str, times: int) -> None:
        for _ in range(times):
            await tally.refused(door)
        await tally.flush(everything=True)  # what serve does at its stop

    asyncio.run(refused(sign_ins.ONEC, 3))
    asyncio.run(refused(sign_ins.WORKBENCH, 2))
    codes, words = _causes(engine, clock)
    assert codes == ["sign-in-refused:1c"]  # the workbench's own refusals are no cause
    assert words[0].startswith("1С не может войти: 3 неверных входа с "), words
    assert "EXCHANGE_1C_PASSWORD" in words[0]
    # A new tally (serve restarted) reads the same rows: they survive a restart.
    clock.advance(30)
    seconds.value += 120
    again = SignIns(engine, clock, seconds)
    asyncio.run(again.succeeded(sign_ins.ONEC))
    assert _causes(engine, clock)[0] == []
    # Refused again after the success: a cause again, counting only the new ones.
    clock.advance(5)
    asyncio.run(refused(sign_ins.ONEC, 1))
    codes, words = _causes(engine, clock)
    assert codes == ["sign-in-refused:1c"] and "1 неверный вход" in words[0], words
    # An hour later with nothing new, it is no longer a cause.
    clock.advance(3601)
    assert _causes(engine, clock)[0] == []


def test_intake_tokens_refused_are_a_cause_of_their_own(engine: Engine, clock: FakeClock) -> None:
    tally = SignIns(engine, clock, Seconds())
    asyncio.run(tally.refused(sign_ins.INTAKE))
    codes, words = _causes(engine, clock)
    assert codes == ["sign-in-refused:intake"]
    assert "EXCHANGE_INTAKE_TOKEN" in words[0]


def test_the_notice_says_1c_cannot_sign_in_in_the_words_of_status(
    engine: Engine, clock: FakeClock
) -> None:
    tally = SignIns(engine, clock, Seconds())
    asyncio.run(tally.refused(sign_ins.ONEC))
    with transaction(engine, read_only=True) as connection:
        found = notify.snapshot(connection, clock.now(), KINDS, stalled_after=60.0)
    assert found.situation.stops == frozenset({Stop.SIGN_IN_1C})
    decision = Decision(send=True, new_stops=frozenset({Stop.SIGN_IN_1C}))
    subject, text = compose(
        found, decision, lang="ru", database="db", workbench_url=None, every=3600
    )
    assert "доставка остановлена" not in subject and "отказано во входе" in subject
    _, words = _causes(engine, clock)
    assert f"- {words[0]}" in text


def test_the_notice_says_the_cause_time_in_the_display_zone(
    engine: Engine, clock: FakeClock
) -> None:
    """The new operator's review: a notice that says its times in EXCHANGE_DISPLAY_TZ says
    since when 1C cannot sign in in that zone too, never in UTC beside them."""
    tally = SignIns(engine, clock, Seconds())
    asyncio.run(tally.refused(sign_ins.ONEC))
    with transaction(engine, read_only=True) as connection:
        found = notify.snapshot(connection, clock.now(), KINDS, stalled_after=60.0)
    decision = Decision(send=True, new_stops=frozenset({Stop.SIGN_IN_1C}))
    _, text = compose(
        found,
        decision,
        lang="ru",
        database="db",
        workbench_url=None,
        every=3600,
        zone="Europe/Moscow",
    )
    line = next(row for row in text.splitlines() if "1С не может войти" in row)
    moscow = clock.now().astimezone(ZoneInfo("Europe/Moscow")).strftime("%Y-%m-%d %H:%M MSK")
    assert f" с {moscow}," in line and "UTC" not in line, line


def test_old_rows_are_cleared_after_a_day(engine: Engine, clock: FakeClock) -> None:
    tally = SignIns(engine, clock, Seconds())
    asyncio.run(tally.refused(sign_ins.ONEC))
    clock.advance(timedelta(days=1, seconds=1).total_seconds())
    with transaction(engine) as connection:
        assert sign_ins.clear_old(connection, clock.now()) == 1
    assert _rows(engine) == []
