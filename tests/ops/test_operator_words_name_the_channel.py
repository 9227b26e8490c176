"""What an operator reads about a channel that fails names it, by its name and what it is
(contract 13: «канал second (Ozon)»), never "the site": the causes of ``status`` and the
dashboard (a channel that keeps failing, that does not answer, that refused), the workers'
caption of ``status``, and the notice (its stop lines, its resumed lines, its command).
Without EXCHANGE_CHANNELS (one channel) every word stays what existing monitoring and people
read. A second channel (``second``, an Ozon channel) written as rows
(tests/support/second_channel.py); on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import Engine, insert, select

from exchange.db.engine import transaction
from exchange.db.schema import channels, workers
from exchange.domain.notify import Decision, Situation, Stop, Told, channel_pause_stop, decide
from exchange.domain.pause import PauseCause
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.states import State
from exchange.ops import attention, notify, status
from exchange.ops.backlog import backlog_words
from exchange.ops.channel_status import channel_figures
from exchange.queue import control
from exchange.report.notice import compose
from exchange.words import channel_named, word
from tests.support.second_channel import two_channels

DOCS = Path(__file__).resolve().parents[2] / "docs"
NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
KINDS = KindPolicies.of(DEFAULT_KINDS)
LIVE_WITHIN = 60.0
SILENT_SINCE = NOW - timedelta(minutes=10)


@pytest.fixture
def scene(engine: Engine) -> Engine:
    """SKU-1 delivered on ``api`` and waiting on ``second`` (Ozon); SKU-2 waiting on both."""
    return two_channels(
        engine,
        NOW,
        sku_1=(State.NEW.value, None),
        sku_2=(State.NEW.value, None),
        target="ozon",
    )


def _loop(engine: Engine, channel: str, **row: Any) -> None:
    """A live delivery loop of ``channel`` (its row ``w1/<channel>``) saying ``row``."""
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=f"w1/{channel}",
                started_at=NOW - timedelta(minutes=30),
                heartbeat_at=NOW - timedelta(seconds=2),
                channel=channel,
                **{"breaker_state": "closed", **row},
            )
        )


def _read(engine: Engine) -> tuple[Any, dict[str, dict[str, Any]], Any]:
    with transaction(engine, read_only=True) as connection:
        figures = status.status(connection, NOW, KINDS, live_within=LIVE_WITHIN)
        ids = list(connection.execute(select(channels.c.id)).scalars())
        by_channel = channel_figures(
            connection,
            NOW,
            KINDS,
            figures.workers,
            ids,
            configured=("api", "second"),
            live_within=LIVE_WITHIN,
        )
        snapshot = notify.snapshot(connection, NOW, KINDS, stalled_after=LIVE_WITHIN)
    return figures, by_channel, snapshot


def _causes(figures: Any, by_channel: dict[str, dict[str, Any]] | None) -> list[Any]:
    return attention.causes(figures, onec_failed=None, no_live_worker=False, by_channel=by_channel)


def _caption(figures: Any, named: dict[str, str] | None, lang: str = "ru") -> str:
    workers_table = status.tables(figures, lang=lang, named=named)[2]  # type: ignore[arg-type]
    return str(workers_table.caption or "")


def test_a_channel_that_does_not_answer_is_named_with_what_it_is_never_the_site(
    scene: Engine,
) -> None:
    _loop(scene, "second", breaker_state="open", unreachable_since=SILENT_SINCE)
    figures, by_channel, _ = _read(scene)
    named = [c for c in _causes(figures, by_channel) if c.code == "breaker:second"]
    assert len(named) == 1
    ru, en = named[0].words("ru"), named[0].words("en")
    assert ru.startswith("канал second (Ozon) не отвечает с 2026-12-05 09:50 UTC: доставка в него")
    assert en.startswith("channel second (Ozon) has not answered since 2026-12-05 09:50 UTC")
    assert "сайт" not in ru and "site" not in en
    caption = _caption(figures, {"api": "api", "second": "ozon"})
    assert caption.startswith("канал second (Ozon) не отвечает с "), caption
    assert "сайт" not in caption
    # One channel (no EXCHANGE_CHANNELS): the words as they always were.
    bare = [c for c in _causes(figures, None) if c.code == "breaker"]
    assert bare[0].words("ru").startswith("сайт не отвечает с 2026-12-05 09:50 UTC")
    assert _caption(figures, None).startswith("сайт не отвечает с ")


def test_a_channel_that_keeps_failing_is_named_and_the_notice_names_it_too(scene: Engine) -> None:
    _loop(scene, "second", breaker_state="open", breaker_until=NOW + timedelta(seconds=30))
    figures, by_channel, snapshot = _read(scene)
    named = [c for c in _causes(figures, by_channel) if c.code == "breaker:second"]
    assert (
        named[0]
        .words("ru")
        .startswith("канал second (Ozon) раз за разом отвечает ошибками: доставка в него ждёт")
    )
    assert "сайт" not in named[0].words("ru") and "site" not in named[0].words("en")
    decision = Decision(send=True, new_stops=frozenset({Stop.BREAKER}))
    channels_of = {"api": "api", "second": "ozon"}
    _, text = compose(
        snapshot,
        decision,
        lang="ru",
        database="db",
        workbench_url=None,
        every=60,
        channels=channels_of,
    )
    stop = [line for line in text.splitlines() if "w1/second" in line]
    assert stop and stop[0].startswith("- канал second (Ozon) раз за разом отвечает ошибкой"), text
    assert "сайт" not in text.split("Команды:")[0]
    assert "доступен ли каждый канал" in text
    _, one = compose(snapshot, decision, lang="ru", database="db", workbench_url=None, every=60)
    assert "- сайт раз за разом отвечает ошибкой или недоступен" in one
    assert "доступен ли сайт и принят ли токен" in one


def test_a_channels_refusal_says_the_channel_refused_not_the_site(scene: Engine) -> None:
    answer = "HTTP 409: price index check failed"
    _loop(
        scene,
        "second",
        paused_reason=answer,
        paused_at=NOW - timedelta(minutes=1),
        pause_cause=PauseCause.OTHER.value,
    )
    figures, by_channel, snapshot = _read(scene)
    named = [c for c in _causes(figures, by_channel) if c.code == "paused:second"]
    ru = named[0].words("ru")
    assert ru.startswith("Доставка в канал second (Ozon) остановлена: канал отказал (HTTP 409"), ru
    assert "сайт" not in ru and "site" not in named[0].words("en")
    decision = Decision(send=True, new_stops=frozenset({Stop.TOKEN}))
    _, text = compose(
        snapshot,
        decision,
        lang="ru",
        database="db",
        workbench_url=None,
        every=60,
        channels={"api": "api", "second": "ozon"},
    )
    assert ru in text
    bare = [c for c in _causes(figures, None) if c.code == "paused"]
    assert bare[0].words("ru").startswith("Доставка остановлена: сайт отказал (HTTP 409")


@pytest.mark.parametrize(
    ("channels_of", "expected"),
    [
        (None, ["- сайт снова отвечает", "- сайт снова принимает токен"]),
        (
            {"api": "api", "second": "ozon"},
            ["- каждый канал снова отвечает", "- каждый канал снова принимает свой ключ или токен"],
        ),
    ],
)
def test_the_resumed_notice_says_every_channel_with_channels_and_the_site_without(
    channels_of: dict[str, str] | None, expected: list[str]
) -> None:
    snapshot = notify.Snapshot(situation=Situation())
    decision = Decision(send=True, resumed=frozenset({Stop.BREAKER, Stop.TOKEN}))
    _, text = compose(
        snapshot,
        decision,
        lang="ru",
        database="db",
        workbench_url=None,
        every=60,
        channels=channels_of,
    )
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("- ")] == expected


def test_the_backlog_line_says_no_channel_answers_with_channels() -> None:
    waiting = {"messages": 3, "eta_s": None}
    with_channels = backlog_words(waiting, unreachable=True, lang="ru", channels=True)
    assert "ни один канал не отвечает" in with_channels and "сайт" not in with_channels
    assert "сайт не отвечает" in backlog_words(waiting, unreachable=True, lang="ru")


@pytest.mark.parametrize(("runbook", "lang"), [("runbook.ru.md", "ru"), ("runbook.md", "en")])
def test_the_runbooks_quote_a_channels_own_pause_words(runbook: str, lang: str) -> None:
    """The runbooks quote, word for word, what a channel's own pause says (an engineer on
    call searches for the line the page or the notice showed)."""
    text = re.sub(r"\s+", " ", (DOCS / runbook).read_text(encoding="utf-8"))
    named = channel_named("ozon", "ozon", lang)  # type: ignore[arg-type]
    for cause in attention.CHANNEL_PAUSE_WORDS:
        said = attention.pause_words(cause, "…", lang, channel=named)
        assert re.sub(r"\s+", " ", said) in text, cause


def test_an_operators_pause_in_the_notice_names_the_button_that_resumes_every_channel(
    scene: Engine,
) -> None:
    with transaction(scene) as connection:
        control.pause(connection, operator="olga", note="переезд", now=NOW)
    _, _, snapshot = _read(scene)
    decision = Decision(send=True, new_stops=frozenset({Stop.OPERATOR}))
    said = {}
    for channels_of in (None, {"api": "api", "second": "ozon"}):
        _, text = compose(
            snapshot,
            decision,
            lang="ru",
            database="db",
            workbench_url=None,
            every=60,
            channels=channels_of,
        )
        said[channels_of is None] = [line for line in text.splitlines() if "olga" in line]
    assert said[True] == [
        "- доставку остановил оператор olga (2026-12-05 10:00 UTC): «переезд»; возобновить: "
        "кнопка «Возобновить доставку» на рабочем месте"
    ]
    assert said[False] == [
        "- доставку во все каналы остановил оператор olga (2026-12-05 10:00 UTC): «переезд»; "
        "возобновить: кнопка «Возобновить все каналы» на рабочем месте"
    ]


BUSY = (
    '{"accepted_rate": 40, "in_flight": 2, "limit": 3, "max_limit": 16, "refused_last_minute": 12}'
)


def _workers_text(figures: Any, named: dict[str, str] | None, channels: int = 1) -> str:
    """``exchange status``'s workers table in Russian, as the console prints it."""
    table = status.tables(figures, lang="ru", named=named, channels=channels)[2]
    console = Console(width=400, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_the_workers_table_says_the_channel_busy_never_the_site_with_channels(
    scene: Engine,
) -> None:
    """Issue 31 item 7: with EXCHANGE_CHANNELS (or several channels) a marketplace's loop
    is not «сайт»: the columns are «Ответы канала» and «темп канала», its pace names the
    channel as every channel-aware word does («канал second (Ozon) перегружен»,
    ``words.channel_named``); one site channel keeps «Сайт», «темп сайта», «сайт
    перегружен»."""
    _loop(scene, "second", pace=BUSY)
    figures, _, _ = _read(scene)
    for named, count, said in (
        ({"api": "api", "second": "ozon"}, 2, "канал second (Ozon) перегружен: 40 запросов/с"),
        (None, 2, "канал second перегружен: 40 запросов/с"),  # its target not given
    ):
        text = _workers_text(figures, named, count)
        assert "Ответы канала" in text and "темп канала" in text, text
        assert said in text, text
        assert "сайт" not in text.lower(), text
    one = _workers_text(figures, None)
    assert "Сайт" in one and "темп сайта" in one and "сайт перегружен: 40 запросов/с" in one


def test_a_workers_row_waits_for_the_channel_never_the_site_with_channels(scene: Engine) -> None:
    """rev32q: an Ozon channel whose port was closed had its worker's row say «ждёт ответа
    сайта» («waits for the site to answer»); with channels it waits for the channel, as the
    dashboard says it; one site channel keeps the site."""
    _loop(scene, "second", breaker_state="open", unreachable_since=SILENT_SINCE)
    figures, _, _ = _read(scene)
    text = _workers_text(figures, {"api": "api", "second": "ozon"}, 2)
    assert word("waits_for_channel", "ru") in text, text
    assert word("waits_for_site", "ru") not in text, text
    assert word("waits_for_site", "ru") in _workers_text(figures, None)


def test_a_marketplace_alone_is_busy_by_its_own_name_never_the_site(scene: Engine) -> None:
    """A marketplace's channel where the channels are not named (EXCHANGE_TARGET=ozon, or
    ``status --channel`` of it without EXCHANGE_CHANNELS): its column and its pace name the
    marketplace («Ozon», «Ozon перегружен»), never «Сайт» nor «сайт перегружен»; in English
    "Ozon busy"."""
    _loop(scene, "second", pace=BUSY)
    figures, _, _ = _read(scene)
    targets = {"api": "api", "second": "ozon"}
    table = status.tables(figures, lang="ru", targets=targets)[2]
    console = Console(width=400, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert "Ozon перегружен: 40 запросов/с" in text, text
    assert "│ Ozon" in text and "Сайт" not in text and "сайт" not in text.lower(), text
    assert status.pace_words(_pace(BUSY), "en", "Ozon").startswith("Ozon busy: 40 requests/s")
    assert status.pace_words(_pace(BUSY), "en").startswith("site busy: 40 requests/s")


def test_exchange_target_ozons_own_row_is_ozon_busy_never_the_site(scene: Engine) -> None:
    """EXCHANGE_TARGET=ozon alone: its loop reports on the process's own row (no channel); with
    one channel registered that row is the channel's, and its pace says «Ozon перегружен»."""
    from dataclasses import replace

    _loop(scene, "second", pace=BUSY)
    figures, _, _ = _read(scene)
    own = [{**w, "channel": None} for w in figures.workers]
    table = status.tables(replace(figures, workers=own), lang="ru", targets={"ozon": "ozon"})[2]
    console = Console(width=400, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert "Ozon перегружен: 40 запросов/с" in text and "сайт" not in text.lower(), text
    site = status.tables(replace(figures, workers=own), lang="ru", targets={"api": "api"})[2]
    console = Console(width=400, record=True, color_system=None)
    console.print(site)
    assert "сайт перегружен: 40 запросов/с" in console.export_text()  # the site as always


def _pace(text: str) -> dict[str, Any]:
    import json

    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _told(snapshot: Any, decision: Decision, channels_of: dict[str, str] | None) -> list[str]:
    _, text = compose(
        snapshot,
        decision,
        lang="ru",
        database="db",
        workbench_url=None,
        every=60,
        channels=channels_of,
    )
    return [line for line in text.splitlines() if line.startswith("- ")]


def test_an_operators_pause_of_one_channel_is_that_channels_stop_and_its_resume(
    scene: Engine,
) -> None:
    """``exchange pause --channel second`` stops delivery to that channel: the notice tells
    it as that channel's stop, naming it, who paused it and the button that resumes it, and
    its resume as that channel's («оператор возобновил доставку в канал second (Ozon)»),
    even with no worker reporting (the operator's own act). Where the words do not name the
    channels (one channel of EXCHANGE_TARGET) the words are the pause's as always."""
    with transaction(scene) as connection:
        control.pause(connection, operator="olga", note="сверка цен", now=NOW, channel="second")
    _, _, snapshot = _read(scene)
    stop = channel_pause_stop("second")
    assert snapshot.situation.stops == {stop}
    told = decide(snapshot.situation, Told(), NOW, timedelta(minutes=15))
    assert told.send and told.new_stops == {stop} and told.remember is not None
    named = _told(snapshot, told, {"api": "api", "second": "ozon"})
    assert named == [
        "- доставку в канал second (Ozon) остановил оператор olga (2026-12-05 10:00 UTC): "
        "«сверка цен»; возобновить: кнопка «Возобновить канал second» на рабочем месте"
    ]
    assert _told(snapshot, told, None) == [
        "- доставку остановил оператор olga (2026-12-05 10:00 UTC): «сверка цен»; "
        "возобновить: кнопка «Возобновить доставку» на рабочем месте"
    ]
    with transaction(scene) as connection:
        control.resume(connection, channel="second")
    _, _, after = _read(scene)
    resumed = decide(
        Situation(stops=after.situation.stops), told.remember, NOW, timedelta(minutes=15)
    )
    assert resumed.send and resumed.resumed == {stop}
    assert _told(after, resumed, {"api": "api", "second": "ozon"}) == [
        "- оператор возобновил доставку в канал second (Ozon)"
    ]
    assert _told(after, resumed, None) == ["- оператор возобновил доставку"]


def test_a_channels_stop_is_kept_as_told_and_read_back(scene: Engine) -> None:
    """What was told of a channel's pause is kept (``operators`` row) and read back as told,
    so that it is news once, not every period."""
    with transaction(scene) as connection:
        control.pause(connection, operator="olga", note="n", now=NOW, channel="second")
    _, _, snapshot = _read(scene)
    told = decide(snapshot.situation, Told(), NOW, timedelta(minutes=15))
    assert told.remember is not None
    with transaction(scene) as connection:
        assert notify.remember(connection, Told(), told.remember, sent_by="w", outcome="sent")
    with transaction(scene, read_only=True) as connection:
        kept = notify.told(connection)
    assert kept.stops == {channel_pause_stop("second")}
    again = decide(snapshot.situation, kept, NOW + timedelta(hours=1), timedelta(minutes=15))
    assert not again.send and not again.new_stops


@pytest.mark.parametrize(
    ("configured", "registered", "named"),
    [
        (None, {"api": "api"}, None),  # one channel of EXCHANGE_TARGET: the words as always
        (None, {"api": "api", "second": "ozon"}, {"api": "api", "second": "ozon"}),
        ({"ozon": "ozon"}, {"ozon": "ozon"}, {"ozon": "ozon"}),  # EXCHANGE_CHANNELS, one
    ],
)
def test_the_notice_names_the_channels_by_the_one_rule(
    configured: dict[str, str] | None,
    registered: dict[str, str],
    named: dict[str, str] | None,
) -> None:
    """The notice names the channels where the dashboard's words and buttons do
    (``words.channels_named``): EXCHANGE_CHANNELS set, or more than one channel registered."""
    from types import SimpleNamespace

    from exchange.report.notice import Notifier

    found = notify.Snapshot(situation=Situation(), channels=registered)
    notifier = SimpleNamespace(channels=configured)
    assert Notifier.channels_of(notifier, found) == named  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("channel", "target", "english", "russian"),
    [
        ("ozon", "ozon", "channel ozon (Ozon) busy", "канал ozon (Ozon) перегружен"),
        ("shop", "api", "channel shop (site) busy", "канал shop (сайт) перегружен"),
        (None, "yandex-market", "Yandex Market busy", "Яндекс Маркет перегружен"),
        (None, "wildberries", "Wildberries busy", "Wildberries перегружен"),
        (None, "api", "site busy", "сайт перегружен"),  # the one site's words, as always
    ],
)
def test_a_429s_history_row_names_the_channel_or_the_marketplace(
    channel: str | None, target: str, english: str, russian: str
) -> None:
    """A 429's history row (the worker's words, English as details are kept) names what is
    busy as every channel-aware word does: a channel of EXCHANGE_CHANNELS by its name and
    what it is, a marketplace of its own by its name; the Russian page says it in Russian."""
    from types import SimpleNamespace

    from exchange.words import error_words
    from exchange.worker.loop import DeliveryLoop

    loop = SimpleNamespace(channel=channel, settings=SimpleNamespace(target=target))
    said = DeliveryLoop._busy_subject.fget(loop)  # type: ignore[attr-defined]
    assert f"{said} busy" == english
    detail = f"{english}, not charged: HTTP 429: slow down"
    assert error_words(detail, "ru") == f"{russian}, попытка не засчитана: HTTP 429: slow down"
    assert error_words(f"result-unknown: {detail}", "ru").endswith(
        f"{russian}, попытка не засчитана: HTTP 429: slow down"
    )
