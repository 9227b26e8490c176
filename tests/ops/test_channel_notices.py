"""Contract 13 in the operators' notices (issue 31 item 7, "the notices"): prices a channel
took and withholds from buyers until a person confirms them (``withheld``) are news, told once,
naming the channel, what it said, and what to do (``exchange withheld release … --channel``,
or the channel's cabinet). On SQLite and on PostgreSQL; the decision by table.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries, messages
from exchange.dev.testing import FAST, fast_settings, posting_row, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.notify import Situation, Told, decide
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.states import State
from exchange.intake.staging_table import take
from exchange.queue.channels import drop, seed
from exchange.report.notice import Notifier
from exchange.settings import load_settings

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
SAID = "Цена в карантине: снижение более чем в три раза"


class Inbox:
    name = "test"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, subject: str, text: str) -> None:
        self.sent.append((subject, text))

    def check(self) -> str:
        return "ok"


def _withheld_on_wb(engine: Engine) -> str:
    """SKU-1 delivered to ``api`` and withheld by a second channel ``wb``: its message_id."""
    stage(engine, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    with transaction(engine) as connection:
        row = connection.execute(select(messages).where(~messages.c.rejected)).one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == row.id)
            .values(state=State.DELIVERED.value, updated_at=NOW)
        )
        wb = connection.execute(
            insert(channels)
            .values(name="wb", target="wildberries", added_at=NOW)
            .returning(channels.c.id)
        ).scalar_one()
        connection.execute(
            insert(deliveries).values(
                message_pk=row.id,
                channel_id=wb,
                aggregate_id=row.aggregate_id,
                kind=row.kind,
                version=row.version,
                state=State.WITHHELD.value,
                last_error=SAID,
                waiting_since=NOW,
                updated_at=NOW + timedelta(minutes=1),
            )
        )
        connection.execute(
            insert(channel_aggregates).values(aggregate_id=row.aggregate_id, channel_id=wb)
        )
        return str(row.message_id)


def _notifier(db_url: str, engine: Engine, clock: FakeClock, inbox: Inbox, lang: str) -> Notifier:
    settings = fast_settings(
        db_url,
        None,
        notify_every=3600.0,
        public_url="https://exchange.shop.example",
        report_lang=lang,
    )
    return Notifier(settings, engine, clock, [inbox])


def test_withheld_prices_are_told_once_naming_the_channel_and_what_releases_them(
    db_url: str, engine: Engine
) -> None:
    message_id = _withheld_on_wb(engine)
    inbox = Inbox()
    clock = FakeClock(NOW + timedelta(minutes=5))
    told = _notifier(db_url, engine, clock, inbox, "ru")
    assert told.step().sent
    subject, text = inbox.sent[0]
    assert subject == "Обмен с 1С: нужен человек: канал придержал цены до подтверждения"
    for expected in (
        "Придержаны каналом (канал принял цену, но не показывает её покупателям, пока "
        "человек не подтвердит): 1.",
        f"- канал wb: 1; самая старая {message_id}, ждёт 4 мин",
        f"  Канал пишет: {SAID}",
        "exchange withheld release MESSAGE_ID… --channel wb",
        "  Открыть: https://exchange.shop.example/messages/withheld?channel=wb",
        f'  exchange withheld release {message_id} --channel wb --note "…"',
    ):
        assert expected in text, (expected, text)
    assert "Карантин" not in text  # nothing quarantined: the quarantine is not mentioned
    clock.advance(2 * 3600)
    assert not told.step().sent  # the same withheld price is no news again


def test_the_english_notice_says_the_same(db_url: str, engine: Engine) -> None:
    _withheld_on_wb(engine)
    inbox = Inbox()
    told = _notifier(db_url, engine, FakeClock(NOW + timedelta(minutes=5)), inbox, "en")
    assert told.step().sent
    subject, text = inbox.sent[0]
    assert subject.endswith("a channel withholds prices until confirmed")
    assert "- channel wb: 1; oldest" in text
    assert "exchange withheld release MESSAGE_ID… --channel wb" in text
    assert "confirm the price in its own cabinet" in text


def test_a_price_withheld_after_the_last_notice_is_news_and_one_before_is_not() -> None:
    told = Told(version=3, attempted_at=NOW - 2 * HOUR, quarantine_mark=NOW - HOUR)
    newer = decide(Situation(withheld=1, newest_withheld_at=NOW - HOUR / 2), told, NOW, HOUR)
    assert newer.send and newer.withheld_gained and not newer.gained
    assert newer.remember is not None and newer.remember.quarantine_mark == NOW - HOUR / 2
    older = decide(Situation(withheld=1, newest_withheld_at=NOW - 2 * HOUR), told, NOW, HOUR)
    assert not older.send and not older.withheld_gained
    # within the period it waits, as the quarantine's news does
    soon = Told(version=3, attempted_at=NOW - HOUR / 4, quarantine_mark=NOW - HOUR)
    assert not decide(Situation(withheld=1, newest_withheld_at=NOW), soon, NOW, HOUR).send


def test_work_on_a_channel_no_configured_channel_serves_is_told_as_status_says_it(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Issue 32 (mpwords2 item 7): the one channel ``api`` configured as ``site`` now (a
    rename), a price waiting on ``api``: ``status`` makes it the cause ``unserved:api``; the
    e-mail/Telegram notice computed nothing of it. It tells it, in ``status``'s own words
    (``attention.unserved``, ``unserved_words``), once; and, the channel dropped, that
    nothing waits on it any more."""
    stage(engine, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")])
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    token = tmp_path / "token"
    token.write_text("test-token\n", encoding="utf-8")
    fast = {k: v for k, v in FAST.items() if k not in ("channels", "site_token_file")}
    site = {"target": "api", "site_url": "https://shop.example.com", "site_token_file": str(token)}
    settings = load_settings(
        database_url=db_url,
        worker_id="w",
        **fast,
        channels={"site": site},
        notify_every=3600.0,
        report_lang="ru",
    )
    inbox = Inbox()
    clock = FakeClock(NOW + timedelta(minutes=5))
    told = Notifier(settings, engine, clock, [inbox])
    assert told.step().sent
    subject, text = inbox.sent[0]
    assert "доставка остановлена" in subject, subject
    said = " ".join(text.split())
    assert (
        "- канал api (сайт): ждёт 1 доставка, а ни один настроенный канал его не обслуживает"
    ) in said, text
    assert "exchange channels seed НОВЫЙ" in said, text
    clock.advance(2 * 3600)
    assert not told.step().sent  # the same waiting work is no news again
    with transaction(engine) as connection:
        drop(connection, "api", operator="olga", note="renamed site", now=NOW)
    clock.advance(60)
    assert told.step().sent
    assert "- на канале api больше ничего не ждёт" in inbox.sent[-1][1], inbox.sent[-1][1]


def test_messages_no_channel_takes_are_told_as_status_says_them(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Contract 1 (nothing is dropped silently): a posting taken in while the one channel
    takes prices only is kept with no delivery; ``status`` makes it the cause
    ``no-channel:financial_posting``. The e-mail/Telegram notice tells it in ``status``'s own
    words (``db.channels.kept_nowhere``, ``no_channel_words``), once; a channel taking
    postings again ends nothing (the kept one still waits, review 32k); its seed from the
    kept one does, and that is told."""
    with transaction(engine) as connection:
        connection.execute(update(channels).values(takes='["price"]'))
    stage(engine, [posting_row("ACC-16", 1)])
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    settings = fast_settings(db_url, notify_every=3600.0, report_lang="ru")
    inbox = Inbox()
    clock = FakeClock(NOW + timedelta(minutes=5))
    told = Notifier(settings, engine, clock, [inbox])
    assert told.step().sent
    _subject, text = inbox.sent[0]
    said = " ".join(text.split())
    assert (
        "- 1 сообщение вида финансовая проводка (financial_posting) хранится, но никуда не "
        "доставляется: ни один канал не принимает этот вид"
    ) in said, text
    assert "exchange channels seed ИМЯ --from financial_posting.ACC-16.v1." in said, text
    clock.advance(2 * 3600)
    assert not told.step().sent  # the same kept message is no news again
    with transaction(engine) as connection:
        connection.execute(update(channels).values(takes='["price", "financial_posting"]'))
        kept = connection.execute(
            select(messages.c.message_id).where(messages.c.kind == "financial_posting")
        ).scalar_one()
    clock.advance(60)
    # A channel taking postings is not enough: the kept one still waits for its seed.
    assert not told.step().sent
    seed(engine, "api", settings.policies, now=NOW, from_message=kept)
    clock.advance(60)
    assert told.step().sent
    assert (
        "- сохранённых сообщений вида financial_posting, которые никуда не доставляются, больше нет"
    ) in " ".join(inbox.sent[-1][1].split()), inbox.sent[-1][1]
