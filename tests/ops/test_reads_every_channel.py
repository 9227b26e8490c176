"""The operator's surfaces read deliveries (issue 31, step 3; contract 13): a message has a
delivery per channel, and ``status``, the quarantine's list and its report, ``find``, the
backlog, the lists by state, known prices and ``prune`` see each one, every channel's by default
and one channel's when asked (by name or id); intake's rejected records are listed whatever the
channel. A second channel is written as rows (``channels``, ``deliveries``,
``channel_aggregates``): tests/support/second_channel.py.
On SQLite and on PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.schema import channel_aggregates, channels, deliveries, messages
from exchange.dev.testing import price_row
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.states import State
from exchange.errors import OperatorError
from exchange.ops import backlog, find, prune, quarantine, status
from exchange.ops.quarantine import Filters
from exchange.report import collect
from tests.support.second_channel import taken, two_channels

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
KINDS = KindPolicies.of(DEFAULT_KINDS)


@pytest.fixture
def scene(engine: Engine) -> Engine:
    """SKU-1 delivered on the one channel (``api``) and quarantined on ``second``; SKU-2
    waiting on both; a rejected record (quarantined, no channel)."""
    return two_channels(
        engine, NOW, sku_1=(State.QUARANTINED.value, "http-422"), sku_2=(State.NEW.value, None)
    )


def _figures(engine: Engine, channel: str | int | None = None) -> status.Status:
    with transaction(engine, read_only=True) as connection:
        return status.status(connection, NOW, KINDS, channel=channel)


def test_status_counts_every_channels_deliveries_and_narrows_to_one(scene: Engine) -> None:
    every = _figures(scene)
    # SKU-1: delivered (api) + quarantined (second); SKU-2 new on both; the record quarantined
    assert every.counts["delivered"] == 1
    assert every.counts["new"] == 2
    assert every.counts["quarantined"] == 2
    assert every.quarantine_by_reason["http-422"]["count"] == 1
    one = _figures(scene, "api")
    assert (one.counts["delivered"], one.counts["new"], one.counts["quarantined"]) == (1, 1, 1)
    assert "http-422" not in one.quarantine_by_reason  # the record's reason stays
    second = _figures(scene, "second")
    assert (second.counts["delivered"], second.counts["new"]) == (0, 1)
    assert second.quarantine_by_reason["http-422"]["count"] == 1
    with transaction(scene, read_only=True) as connection:
        second_id = connection.execute(
            select(channels.c.id).where(channels.c.name == "second")
        ).scalar_one()
    assert _figures(scene, second_id).counts == second.counts  # by id as by name


def test_an_unknown_channel_is_refused_never_read_as_matching_nothing(scene: Engine) -> None:
    with pytest.raises(OperatorError, match="unknown channel 'third': one of api, second"):
        _figures(scene, "third")


def test_the_quarantine_list_and_its_report_show_each_quarantined_delivery(
    scene: Engine,
) -> None:
    with transaction(scene, read_only=True) as connection:
        every = quarantine.list_quarantined(connection, Filters())
        on_api = quarantine.list_quarantined(connection, Filters(channel="api"))
        on_second = quarantine.list_quarantined(connection, Filters(channel="second"))
        report = collect.collect(connection, Filters(), NOW)
        page = quarantine.page_of(connection, Filters(channel="second"))
    sku_1 = [e for e in every if e["aggregate"] == "SKU-1/retail"]
    assert [e["reason"] for e in sku_1] == ["http-422"]  # delivered on api: not listed there
    assert [e["rejected_row"] for e in on_api] == [True]  # the record, whatever the channel
    assert sorted(e["rejected_row"] for e in on_second) == [False, True]
    assert page.total == 2
    assert "SKU-1/retail" in {e.aggregate for e in report.entries}


def test_find_shows_a_messages_delivery_on_each_channel(scene: Engine) -> None:
    with transaction(scene, read_only=True) as connection:
        every = find.find(connection, "SKU-1")
        second = find.find(connection, "SKU-1", channel="second")
        counted = find.count_found(connection, "SKU-1")
    assert sorted(r["state"] for r in every) == ["delivered", "quarantined"]
    assert counted == 2
    assert [r["state"] for r in second] == ["quarantined"]


def test_the_backlog_and_a_list_by_state_see_the_second_channels_waiting(scene: Engine) -> None:
    with transaction(scene, read_only=True) as connection:
        waiting = backlog.backlog(connection, NOW, KINDS, timedelta(minutes=1))
        on_api = backlog.backlog(connection, NOW, KINDS, timedelta(minutes=1), channel="api")
        new = quarantine.page_of(connection, Filters(), state=State.NEW)
    assert (waiting["messages"], on_api["messages"]) == (2, 1)
    assert [e["aggregate"] for e in new.entries] == ["SKU-2/retail", "SKU-2/retail"]


def test_known_prices_are_what_each_channels_shop_holds(scene: Engine) -> None:
    def known(channel: str | None) -> set[str]:
        return {k.sku for k in DbKnownPrices(scene, channel).latest(["SKU-1", "SKU-2"])}

    assert known("api") == {"SKU-1"}  # delivered there
    assert known("second") == set()  # quarantined there: the shop does not hold it


def test_prune_keeps_a_message_still_waiting_on_another_channel(engine: Engine) -> None:
    """SKU-1 v1 and v2 delivered long ago on the one channel (v1 replaced there): v1 goes only
    once it is done with on the second channel too."""
    taken(engine, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], NOW)
    taken(engine, [price_row("SKU-1", 2, "11.00", aggregate="SKU-1/retail")], NOW)
    old = NOW - timedelta(days=60)
    with transaction(engine) as connection:
        pks = connection.execute(
            select(messages.c.id).where(messages.c.aggregate == "SKU-1/retail")
        ).scalars()
        for pk in pks:
            connection.execute(
                update(deliveries)
                .where(deliveries.c.message_pk == pk)
                .values(state="delivered", updated_at=old)
            )
        connection.execute(update(channel_aggregates).values(done_version=2))
        aggregate_id = connection.execute(select(messages.c.aggregate_id).limit(1)).scalar_one()
    with transaction(engine) as connection:
        second = connection.execute(
            insert(channels)
            .values(name="second", target="api", added_at=NOW)
            .returning(channels.c.id)
        ).scalar_one()
        v1 = connection.execute(select(messages.c.id).where(messages.c.version == 1)).scalar_one()
        connection.execute(
            insert(deliveries).values(
                message_pk=v1,
                channel_id=second,
                aggregate_id=aggregate_id,
                kind="price",
                version=1,
                state="new",
                waiting_since=NOW,
                updated_at=NOW,
            )
        )
        connection.execute(
            insert(channel_aggregates).values(aggregate_id=aggregate_id, channel_id=second)
        )

    def versions() -> list[int]:
        with transaction(engine, read_only=True) as connection:
            return sorted(connection.execute(select(messages.c.version)).scalars())

    report = prune.prune(engine, None, now=NOW, retention_days=30, kinds=KINDS)
    assert (report.messages, versions()) == (0, [1, 2])  # v1 waits on the second channel
    with transaction(engine) as connection:
        connection.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == second)
            .values(state="cancelled", reason="superseded", updated_at=old)
        )
        connection.execute(
            update(channel_aggregates)
            .where(channel_aggregates.c.channel_id == second)
            .values(done_version=2)
        )
    report = prune.prune(engine, None, now=NOW, retention_days=30, kinds=KINDS)
    assert (report.messages, versions()) == (1, [2])  # the latest accepted stays


def test_an_action_selects_where_the_message_is_quarantined(scene: Engine) -> None:
    """SKU-1 is delivered on ``api`` and quarantined on ``second``: a retry's preview by id
    takes it (where it is quarantined), and one narrowed to ``api`` refuses it; the bulk
    preview by filters and ``still_quarantined`` read the same deliveries."""
    with transaction(scene, read_only=True) as connection:
        mid = connection.execute(
            select(messages.c.message_id).where(messages.c.aggregate == "SKU-1/retail")
        ).scalar_one()

        def preview(filters: Filters, ids: list[str]) -> list[str]:
            return quarantine.retry(
                connection,
                ids,
                filters,
                operator="olga",
                note=None,
                now=NOW,
                dry_run=True,
            ).touched

        assert preview(Filters(), [mid]) == [mid]
        with pytest.raises(OperatorError, match=f"{mid} is delivered"):
            preview(Filters(channel="api"), [mid])
        assert preview(Filters(reason="http-422"), []) == [mid]
        assert quarantine.still_quarantined(connection, [mid]) == [mid]
        assert quarantine.still_quarantined(connection, [mid], channel="api") == []
