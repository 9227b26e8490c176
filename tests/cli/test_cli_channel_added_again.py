"""A channel dropped and added again under its name (review ozon 34b): ``find`` and
``history`` say the live channel's delivery as the channel's state, and name the dropped
one's as of a removed channel («ozon (удалён …)», "ozon (removed …)"), never both under the
bare name, where the removed one's ``cancelled`` read as the state of the channel that now
holds the price delayed."""

from __future__ import annotations

from clitools import Cli, Scenario, describe, message_id, run_json
from sqlalchemy import Engine, insert, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries
from exchange.dev.testing import one_channel_messages
from exchange.domain.clock import SystemClock
from exchange.queue import channels as channel_ops

messages = one_channel_messages()


def _drop_and_add_again(engine: Engine, message_id: str) -> None:
    """``api`` holds ``message_id`` delayed, is dropped (it is cancelled there), and ``api``
    is added again with the message delayed on it (as ``channels seed`` gives it)."""
    with transaction(engine) as connection:
        row = connection.execute(select(messages).where(messages.c.message_id == message_id)).one()
        connection.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == row.id)
            .values(state="delayed", reason=None)
        )
        channel_ops.drop(connection, "api", operator="ops", note="x", now=SystemClock().now())
        again = connection.execute(
            insert(channels)
            .values(name="api", target="api", added_at=SystemClock().now())
            .returning(channels.c.id)
        ).scalar_one()
        connection.execute(
            insert(deliveries).values(
                message_pk=row.id,
                channel_id=again,
                aggregate_id=row.aggregate_id,
                kind=row.kind,
                version=row.version,
                state="delayed",
                reason=None,
                waiting_since=row.updated_at,
                updated_at=row.updated_at,
            )
        )
        connection.execute(
            insert(channel_aggregates).values(aggregate_id=row.aggregate_id, channel_id=again)
        )


def test_find_and_history_say_the_live_channels_state_and_name_the_removed_one(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    _drop_and_add_again(engine, scenario.sku2)
    (found,) = run_json(cli, "find", "SKU-2", "--json", db=db_url)
    assert (found["state"], found["channel"]) == ("delayed", "api")  # the live one's
    assert found["deliveries"]["api"] == "delayed"
    assert found["channel_removed_at"] is None
    (removed,) = [key for key in found["deliveries"] if key != "api"]
    assert removed.startswith("api (removed ") and found["deliveries"][removed] == "cancelled"
    assert found["channels"][removed]["reason"] == "channel-removed"

    text = cli("find", "SKU-2", db=db_url)
    assert "channel api: delayed" in text.stdout, describe(text)
    assert "channel api (removed " in text.stdout, describe(text)
    ru = cli("find", "SKU-2", db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert "канал api (удалён " in ru.stdout, describe(ru)

    bio = run_json(cli, "history", scenario.sku2, "--json", db=db_url)
    assert bio["message"]["state"] == "delayed" and bio["message"]["channel_removed_at"] is None
    shown = [(d["channel"], d["channel_removed_at"] is None, d["state"]) for d in bio["deliveries"]]
    assert shown == [("api", False, "cancelled"), ("api", True, "delayed")]
    cancelled = [e for e in bio["history"] if e["to"] == "cancelled"]
    assert cancelled and all(e["channel_removed_at"] for e in cancelled)
    story = cli("history", scenario.sku2, db=db_url)
    assert "channel api (removed " in story.stdout, describe(story)
    assert "channel api: delayed" in story.stdout, describe(story)


def test_history_of_several_messages_lists_each_with_the_live_channels_state(
    cli: Cli, db_url: str, engine: Engine, scenario: Scenario
) -> None:
    """Review rev35ow (words): ``history SKU`` matching several messages lists them with the
    state ``find`` says, the live channel's, never the dropped channel's «cancelled»."""
    _drop_and_add_again(engine, message_id("price", "SKU-1", 2))
    listed = cli("history", "SKU-1", db=db_url)
    assert listed.returncode != 0, describe(listed)  # two messages: give one of the ids
    (line,) = [row for row in listed.stdout.splitlines() if "price SKU-1 v2" in row]
    assert line.split()[0] == "delayed", listed.stdout
