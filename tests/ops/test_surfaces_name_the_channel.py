"""What an operator reads names the channel (issue 31, step 7; contract 13 "Commands and
pages"): ``status``'s ``channels``, the causes named after a colon under EXCHANGE_CHANNELS,
``find`` and the biography with every channel's state, the preview counted per channel, the
report's channel column, the per-channel metrics and the notice's count per channel. A second
channel is written as rows (``channels``, ``deliveries``, ``channel_aggregates``):
tests/support/second_channel.py, shared with tests/ops/test_reads_every_channel.py. On SQLite
and on PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, history, messages, workers
from exchange.dev.testing import raw_row, stage
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.states import State
from exchange.intake.staging_table import take
from exchange.ops import attention, find, notify, quarantine, status
from exchange.ops.channel_status import (
    channel_figures,
    channel_state_words,
    channels_table,
    dropped_channels,
)
from exchange.ops.metrics import PrometheusMetrics
from exchange.ops.quarantine import Filters
from exchange.queue import control
from exchange.queue.deliveries import one_channel
from exchange.report import collect
from exchange.report.formats.csv import render_csv
from exchange.report.formats.json import render_json
from exchange.report.words import (
    COLUMNS,
    detail_columns,
    entry_next_check,
    summary_next_check,
)
from tests.support.second_channel import two_channels

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
KINDS = KindPolicies.of(DEFAULT_KINDS)
LIVE_WITHIN = 60.0


@pytest.fixture
def scene(engine: Engine) -> Engine:
    """SKU-1 delivered on ``api`` and quarantined (http-422) on ``second``; SKU-2 waiting on
    ``api`` and withheld on ``second``; a rejected record (quarantined, no channel's)."""
    return two_channels(
        engine,
        NOW,
        sku_1=(State.QUARANTINED.value, "http-422"),
        sku_2=(State.WITHHELD.value, None),
        target="ozon",
    )


def _figures(engine: Engine, configured: tuple[str, ...] = ("api", "second")) -> Any:
    with transaction(engine, read_only=True) as connection:
        figures = status.status(connection, NOW, KINDS, live_within=LIVE_WITHIN)
        ids = [row for row in connection.execute(select(channels.c.id)).scalars()]
        by_channel = channel_figures(
            connection,
            NOW,
            KINDS,
            figures.workers,
            ids,
            configured=configured,
            live_within=LIVE_WITHIN,
        )
    return figures, by_channel


def test_status_has_each_channel_with_its_counts_backlog_withheld_and_configuration(
    scene: Engine,
) -> None:
    figures, by_channel = _figures(scene, configured=("api",))
    assert list(by_channel) == ["api", "second"]
    api, second = by_channel["api"], by_channel["second"]
    assert (api["target"], second["target"]) == ("api", "ozon")
    assert (api["counts"]["delivered"], api["counts"]["new"]) == (1, 1)
    assert (second["counts"]["quarantined"], second["withheld"]) == (1, 1)
    assert (api["backlog"]["messages"], second["backlog"]["messages"]) == (1, 0)
    assert (api["configured"], second["configured"]) == (True, False)  # not in this config
    # Nothing reports for either: no breaker, no pace, no live loop; no pause.
    for channel in (api, second):
        assert (channel["breaker"], channel["pace"], channel["live_workers"]) == (None, None, 0)
        assert channel["paused"] is None
    # The top-level counts are the sum over the channels, plus intake's rejected record.
    assert figures.counts["quarantined"] == 2
    assert set(api) == {
        "target",
        "counts",
        "paused",
        "breaker",
        "pace",
        "backlog",
        "withheld",
        "withheld_behind",
        "live_workers",
        "configured",
    }


def test_a_channels_loop_row_gives_it_its_breaker_pace_and_live_workers(scene: Engine) -> None:
    with transaction(scene) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w1/second",
                started_at=NOW - timedelta(minutes=5),
                heartbeat_at=NOW - timedelta(seconds=5),
                breaker_state="open",
                breaker_until=NOW + timedelta(seconds=30),
                pace=json.dumps({"limit": 4, "in_flight": 0}),
                channel="second",
            )
        )
    _, by_channel = _figures(scene)
    assert by_channel["second"]["live_workers"] == 1
    assert by_channel["second"]["breaker"] == "open"
    assert by_channel["second"]["pace"] == {"limit": 4, "in_flight": 0}
    assert (by_channel["api"]["live_workers"], by_channel["api"]["breaker"]) == (0, None)
    table = channels_table(by_channel)
    assert table.columns[0].header == "channel"
    assert table.row_count == 2


def test_causes_name_their_channel_only_under_explicit_channels(scene: Engine) -> None:
    figures, by_channel = _figures(scene)
    named = [
        c.code
        for c in attention.causes(
            figures, onec_failed=None, no_live_worker=False, by_channel=by_channel
        )
    ]
    # intake's own record stays bare; the channel's quarantine and withheld name it
    assert named == ["quarantine", "quarantine:second", "withheld:second"]
    words = [
        c.words()
        for c in attention.causes(
            figures, onec_failed=None, no_live_worker=False, by_channel=by_channel
        )
    ]
    # named with what it is (contract 13: «канал ozon (Ozon)»)
    assert words[1] == "channel second (Ozon): 1 message(s) in quarantine"
    ru = attention.causes(figures, onec_failed=None, no_live_worker=False, by_channel=by_channel)
    assert ru[1].words("ru").startswith("канал second (Ozon): в карантине 1")
    # Without EXCHANGE_CHANNELS (no by_channel): the bare codes monitoring always read.
    bare = [c.code for c in attention.causes(figures, onec_failed=None, no_live_worker=False)]
    assert bare == ["quarantine", "withheld"]


def test_find_and_the_biography_show_the_state_on_every_channel(scene: Engine) -> None:
    with transaction(scene, read_only=True) as connection:
        found = find.find(connection, "SKU-1")
        message_id = found[0]["message_id"]
        story = status.biography(connection, message_id)
        on_second = status.biography(connection, message_id, channel="second")
    assert sorted((r["channel"], r["state"]) for r in found) == [
        ("api", "delivered"),
        ("second", "quarantined"),
    ]
    assert [(d["channel"], d["state"], d["reason"]) for d in story["deliveries"]] == [
        ("api", "delivered", None),
        ("second", "quarantined", "http-422"),
    ]
    assert story["message"]["channel"] == "api"
    assert (on_second["message"]["channel"], on_second["message"]["state"]) == (
        "second",
        "quarantined",
    )


def test_a_preview_counts_per_channel_and_the_list_names_the_channel(scene: Engine) -> None:
    with transaction(scene) as connection:
        listed = quarantine.list_quarantined(connection, Filters())
        preview = quarantine.act(
            connection,
            "cancel",
            [],
            Filters(reason="http-422"),
            operator="op",
            note="n",
            now=NOW,
            kinds=KINDS,
            dry_run=True,
            limit=None,
        )
        every = quarantine.act(
            connection,
            "cancel",
            [],
            Filters(kind="price"),
            operator="op",
            note="n",
            now=NOW,
            kinds=KINDS,
            dry_run=True,
            limit=None,
        )
    assert sorted((e["channel"] or "-", e["rejected_row"]) for e in listed) == [
        ("-", True),
        ("second", False),
    ]
    assert preview.per_channel == {"second": 1}
    assert every.per_channel == {"second": 1, None: 1}  # the record: no channel's, last


def test_the_report_has_a_channel_column_after_message_id_with_several_channels(
    scene: Engine,
) -> None:
    with transaction(scene, read_only=True) as connection:
        data = collect.collect(connection, Filters(), NOW)
    assert data.several_channels
    assert detail_columns(data)[:2] == ("message_id", "channel")
    rows = list(csv.reader(io.StringIO(render_csv(data, "en").decode("utf-8-sig"))))
    header = next(row for row in rows if row and row[0] == "Message ID")
    assert header[:3] == ["Message ID", "Channel", "Kind"]
    document = json.loads(render_json(data, "en"))
    assert sorted(str(e["channel"]) for e in document["entries"]) == ["None", "second"]


def test_a_one_channel_report_keeps_its_columns(engine: Engine) -> None:
    stage(engine, [raw_row("price", "SKU-BAD", 1, "{not json")])
    take(engine, None, dict(DEFAULT_KINDS), NOW)
    with transaction(engine, read_only=True) as connection:
        data = collect.collect(connection, Filters(), NOW)
    assert not data.several_channels
    assert detail_columns(data) == COLUMNS


def test_metrics_carry_a_channel_label_beside_the_sums(scene: Engine) -> None:
    metrics = PrometheusMetrics()
    metrics._refresh_queue(scene, NOW)
    value = metrics.registry.get_sample_value
    assert value("exchange_channel_messages", {"channel": "second", "state": "withheld"}) == 1
    assert value("exchange_channel_messages", {"channel": "api", "state": "new"}) == 1
    assert value("exchange_channel_messages", {"channel": "api", "state": "quarantined"}) == 0
    assert (
        value("exchange_channel_quarantined_messages", {"channel": "second", "reason": "http-422"})
        == 1
    )
    # the sums existing monitoring reads are unchanged: every channel and the record
    assert value("exchange_messages", {"state": "quarantined"}) == 2
    assert value("exchange_channel_oldest_undelivered_age_seconds", {"channel": "api"}) >= 0


def test_the_notice_counts_the_quarantine_per_channel(scene: Engine) -> None:
    with transaction(scene, read_only=True) as connection:
        found = notify.snapshot(connection, NOW, KINDS, stalled_after=60)
        notify.add_details(found, connection, NOW)
    assert found.quarantine_by_channel == {"api": 0, "second": 1, None: 1}


def test_a_breaker_no_channels_row_says_is_still_a_cause_bare(scene: Engine) -> None:
    """A worker row of no channel (a process's own) with its breaker open: no channel's
    figures hold it, so the cause is said bare rather than lost."""
    with transaction(scene) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="w0",
                started_at=NOW - timedelta(minutes=5),
                heartbeat_at=NOW - timedelta(seconds=5),
                breaker_state="open",
                breaker_until=NOW + timedelta(seconds=30),
            )
        )
    figures, by_channel = _figures(scene)
    codes = [
        c.code
        for c in attention.causes(
            figures, onec_failed=None, no_live_worker=False, by_channel=by_channel
        )
    ]
    assert "breaker" in codes and not any(c.startswith("breaker:") for c in codes)


def test_a_channels_own_pause_is_its_paused_and_its_cause_only(scene: Engine) -> None:
    """`pause --channel second` holds that shop only: status shows it paused (its cause
    ``paused:second`` is said from this), ``api`` runs on (found by the shop owner's
    walk-through: the pause was obeyed but status said nothing needs a person)."""
    with transaction(scene) as connection:
        control.pause(connection, operator="anna", note="shop down", now=NOW, channel="second")
    _, by_channel = _figures(scene)
    assert by_channel["api"]["paused"] is None
    paused = by_channel["second"]["paused"]
    assert paused is not None
    assert (paused["by"], paused["operator"]) == ("operator", "anna")


def test_a_dropped_channel_is_said_dropped_never_not_configured(scene: Engine) -> None:
    """Owner 31 item 5: ``status``'s row of a dropped channel says «удалён», as ``channels
    list`` does, never «не настроен» (the words of a channel that needs a person)."""
    with transaction(scene) as connection:
        connection.execute(
            update(channels).where(channels.c.name == "second").values(dropped_at=NOW)
        )
    _, by_channel = _figures(scene, configured=("api",))
    with transaction(scene, read_only=True) as connection:
        dropped = dropped_channels(connection)
    assert frozenset({"second"}) == dropped
    table = io.StringIO()
    Console(file=table, width=200).print(channels_table(by_channel, "ru", dropped=dropped))
    second = next(line for line in table.getvalue().splitlines() if " second " in line)
    assert "удалён" in second and "не настроен" not in second, second
    assert "dropped" == channel_state_words(by_channel["second"], dropped=True)


def test_a_channel_with_due_work_and_no_live_worker_is_its_own_cause(engine: Engine) -> None:
    """Review 33 (contract 6: no live worker is a cause): ``api``'s worker is live, ``second``'s
    only one died, and SKU-1 has waited on ``second`` (new) past the live window: the cause
    ``no-live-worker:second`` says which channel and what to start. None once a worker of
    ``second`` is live, and none while ``second`` is paused on its own (its pause is said)."""
    two_channels(
        engine,
        NOW,
        sku_1=(State.NEW.value, None),
        sku_2=(State.DELIVERED.value, None),
        target="ozon",
    )
    with transaction(engine) as connection:
        connection.execute(
            update(messages).values(created_at=NOW - timedelta(hours=1))  # 1C sent it then
        )
        on_api = update(deliveries).where(deliveries.c.channel_id == one_channel(connection))
        connection.execute(on_api.values(state=State.DELIVERED.value))  # api has nothing due
        for worker, channel, seen in (
            ("w1/api", "api", NOW),
            ("w2/second", "second", NOW - timedelta(hours=1)),
        ):
            connection.execute(
                insert(workers).values(
                    worker_id=worker,
                    started_at=NOW - timedelta(hours=2),
                    heartbeat_at=seen,
                    channel=channel,
                )
            )

    def found() -> list[attention.Cause]:
        figures, by_channel = _figures(engine)
        with transaction(engine, read_only=True) as connection:
            return attention.attention(
                connection,
                None,
                figures,
                NOW,
                KINDS,
                LIVE_WITHIN,
                by_channel=by_channel,
                configured=("api", "second"),
            ).causes

    (cause,) = [c for c in found() if c.code.startswith("no-live-worker")]
    assert cause.code == "no-live-worker:second"
    assert cause.words() == (
        "channel second (Ozon): 1 delivery waits on it and no worker delivering to it is live: "
        "nothing goes to it. Start one for it: exchange run --channel second (or exchange run, "
        "which delivers to every configured channel)"
    )
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="check", now=NOW, channel="second")
    assert not [c for c in found() if c.code.startswith("no-live-worker")]
    with transaction(engine) as connection:
        control.resume(connection, operator="olga", now=NOW, channel="second")
        connection.execute(
            update(workers).where(workers.c.worker_id == "w2/second").values(heartbeat_at=NOW)
        )
    assert not [c for c in found() if c.code.startswith("no-live-worker")]


def test_a_channels_report_entry_has_its_channels_history_attempt_and_command(
    scene: Engine,
) -> None:
    """Seller 34 item 4: SKU-1 delivered on ``api`` a minute ago and quarantined on ``second``
    ten minutes ago: ``second``'s entry lists its own rows and 1C's (no channel's), never the
    site's «доставлено»; its last attempt is its own; its commands name ``--channel second``."""
    with transaction(scene) as connection:
        ids = dict(connection.execute(select(channels.c.name, channels.c.id)).all())
        pk = connection.execute(
            select(deliveries.c.message_pk).where(
                deliveries.c.channel_id == ids["second"], deliveries.c.state == "quarantined"
            )
        ).scalar_one()
        for channel, minutes, event, code in (
            ("second", 10, "quarantined", 422),
            ("api", 1, "delivered", 200),
        ):
            connection.execute(
                insert(history).values(
                    message_pk=pk,
                    channel_id=ids[channel],
                    at=NOW - timedelta(minutes=minutes),
                    event=event,
                    attempt=1,
                    http_status=code,
                )
            )
    with transaction(scene, read_only=True) as connection:
        data = collect.collect(connection, Filters(), NOW)
    entry = next(e for e in data.entries if e.channel == "second")
    assert {e.channel_id for e in entry.history} <= {ids["second"], None}
    assert "delivered" not in [e.event for e in entry.history]
    assert entry.last_attempt == NOW - timedelta(minutes=10)
    said = entry_next_check(entry, "en")
    assert f"exchange quarantine retry {entry.message_id} --channel second" in said, said
    summary = summary_next_check(data, "http-422", "en")
    assert "--reason http-422 --channel second" in summary, summary
