"""Contract 13 as an operator meets the registry (issue 31, items 1 and 5): ``exchange channels
list`` shows each registered channel with its counts and «не настроен» for one this process
does not configure; a configured name registered with another target is one line, exit 2;
``check`` registers what it reads; ``channels drop`` cancels the waiting deliveries with the
operator and the note; ``channels seed`` killed mid-way goes on from its mark when run again.
"""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from clitools import FAST_ENV, TOKEN, Cli, assert_one_line_error, describe, until_stopped
from sqlalchemy import Engine, func, select, update

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, history
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import Policy
from exchange.intake import staging_table as intake

SHOP = {
    "target": "woocommerce",
    "woo_url": "https://second.example.com",
}


def token(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return str(path)


def with_shop(tmp_path: Path) -> dict[str, str | None]:
    """EXCHANGE_CHANNELS: the site (``api``, as migrate registered it) and a second shop."""
    secret = tmp_path / "woo-secret"
    secret.write_text("cs_" + "s" * 20 + "\n", encoding="utf-8")
    key = tmp_path / "woo-key"
    key.write_text("ck_" + "k" * 20 + "\n", encoding="utf-8")
    named = {
        "api": {
            "target": "api",
            "site_url": "https://shop.example.com",
            "site_token_file": token(tmp_path),
        },
        "shop": {**SHOP, "woo_key_file": str(key), "woo_secret_file": str(secret)},
    }
    return {"EXCHANGE_CHANNELS": json.dumps(named), "EXCHANGE_SITE_TOKEN": None}


def taken(engine: Engine, count: int) -> None:
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(count)])
    intake.take(engine, None, {"price": Policy.LATEST_WINS}, SystemClock().now())


def listed(cli: Cli, db_url: str, **env: str | None) -> dict[str, Any]:
    result = cli("channels", "list", "--json", db=db_url, env=env)
    assert result.returncode == 0, describe(result)
    return {row["name"]: row for row in json.loads(result.stdout)}


def test_list_shows_counts_and_a_channel_this_process_does_not_configure(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    taken(engine, 3)
    seeded = cli("channels", "seed", "shop", db=db_url, env=with_shop(tmp_path))
    assert seeded.returncode == 0, describe(seeded)
    assert "channel shop: 3 deliveries created" in seeded.stdout
    rows = listed(cli, db_url)  # without EXCHANGE_CHANNELS: the one channel api
    assert rows["api"]["configured"] is True and rows["api"]["counts"]["new"] == 3
    assert rows["shop"]["configured"] is False and rows["shop"]["counts"]["new"] == 3
    assert rows["shop"]["takes"] == ["price"] and rows["shop"]["target"] == "woocommerce"
    russian = cli("channels", "list", db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert russian.returncode == 0, describe(russian)
    line = next(line for line in russian.stdout.splitlines() if " shop " in line)
    assert "не настроен" in line and "новое 3" in line, line


def test_a_configured_name_registered_with_another_target_is_one_line_exit_2(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    env = with_shop(tmp_path)
    named = json.loads(env["EXCHANGE_CHANNELS"] or "{}")
    named["api"] = {**named["shop"]}  # the name api, now a WooCommerce shop
    env["EXCHANGE_CHANNELS"] = json.dumps(named)
    result = cli("migrate", db=db_url, env=env)
    assert result.returncode == 2, describe(result)
    assert_one_line_error(
        result, "channel api is registered with target api, configured with woocommerce"
    )


def test_check_registers_the_channels_it_reads(cli: Cli, db_url: str, tmp_path: Path) -> None:
    result = cli("check", db=db_url, env=with_shop(tmp_path))
    assert result.returncode in (0, 1), describe(result)  # the shops are not reachable here
    assert set(listed(cli, db_url)) == {"api", "shop"}


def test_drop_cancels_the_waiting_deliveries_with_the_operator_and_the_note(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    taken(engine, 2)
    assert cli("channels", "seed", "shop", db=db_url, env=with_shop(tmp_path)).returncode == 0
    result = cli(
        "channels", "drop", "shop", "--note", "shop closed", "--operator", "anna", db=db_url
    )
    assert result.returncode == 0, describe(result)
    assert "channel shop dropped: 2 waiting deliveries cancelled" in result.stdout
    with transaction(engine, read_only=True) as c:
        shop = c.execute(select(channels.c.id).where(channels.c.name == "shop")).scalar_one()
        states = c.execute(
            select(deliveries.c.state, deliveries.c.reason).where(deliveries.c.channel_id == shop)
        ).all()
        written = c.execute(
            select(history.c.operator, history.c.note).where(
                history.c.channel_id == shop, history.c.event == "channel-removed"
            )
        ).all()
    assert set(states) == {("cancelled", "channel-removed")}
    assert written == [("anna", "shop closed")] * 2
    rows = listed(cli, db_url)
    assert rows["shop"]["dropped_at"] is not None and rows["api"]["counts"]["new"] == 2
    again = cli("channels", "drop", "shop", "--note", "again", db=db_url)
    assert again.returncode == 2
    assert_one_line_error(again, "no channel shop is in use")
    no_note = cli("channels", "drop", "api", "--note", "", db=db_url)
    assert no_note.returncode == 2
    assert_one_line_error(no_note, "--note is required")


def test_seed_killed_after_a_batch_goes_on_from_its_mark(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    """A real crash (SIGKILL at the failpoint after the second batch committed): run again,
    the seed creates only what is missing, and every aggregate has its one delivery."""
    taken(engine, 9)
    cli = Cli(tmp_path, process=True)
    env = with_shop(tmp_path)
    killed = cli(
        "channels",
        "seed",
        "shop",
        "--batch",
        "2",
        db=db_url,
        env={**env, "EXCHANGE_FAILPOINTS": "seed-batch-done=kill@2"},
    )
    assert killed.returncode == -signal.SIGKILL, describe(killed)

    def seeded() -> int:
        with transaction(engine, read_only=True) as c:
            shop = c.execute(select(channels.c.id).where(channels.c.name == "shop")).scalar_one()
            return int(
                c.execute(
                    select(func.count())
                    .select_from(deliveries)
                    .where(deliveries.c.channel_id == shop)
                ).scalar_one()
            )

    assert seeded() == 4
    rest = cli("channels", "seed", "shop", "--batch", "2", db=db_url, env=env)
    assert rest.returncode == 0, describe(rest)
    assert "channel shop: 5 deliveries created" in rest.stdout
    assert seeded() == 9


@pytest.mark.parametrize("command", ["run", "serve"])
def test_run_and_serve_register_the_channel_they_read(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path, command: str
) -> None:
    def registered() -> bool:
        with transaction(engine, read_only=True) as c:
            return "site" in c.execute(select(channels.c.name)).scalars().all()

    with SiteSimulator(token=TOKEN) as site:
        channel = {"target": "api", "site_url": site.url, "site_token_file": token(tmp_path)}
        env: dict[str, str | None] = {
            **FAST_ENV,
            "EXCHANGE_CHANNELS": json.dumps({"site": channel}),
            "EXCHANGE_SITE_TOKEN": None,
            "EXCHANGE_HTTP_HOST": "127.0.0.1",
            "EXCHANGE_HTTP_PORT": "0",
        }
        result = until_stopped(
            cli, command, stop_when=registered, seconds=30, what="registered", db=db_url, env=env
        )
    assert result.returncode == 0, describe(result)
    rows = listed(cli, db_url, **env)
    assert rows["site"]["configured"] is True and rows["api"]["configured"] is False


def test_drop_of_a_channel_still_configured_warns_it_will_be_registered_again(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    """Promise: dropping a channel this process still configures says, in one line, that the
    next run or check registers it again as a new channel unless EXCHANGE_CHANNELS drops it."""
    env = with_shop(tmp_path)
    assert cli("check", db=db_url, env=env).returncode in (0, 1)
    result = cli("channels", "drop", "shop", "--note", "closed", db=db_url, env=env)
    assert result.returncode == 0, describe(result)
    (line,) = [row for row in result.stdout.splitlines() if "still configured" in row]
    assert "registers it again as a new channel" in line and "EXCHANGE_CHANNELS" in line
    assert cli("check", db=db_url, env=env).returncode in (0, 1)
    russian = cli(
        "channels",
        "drop",
        "shop",
        "--note",
        "closed",
        db=db_url,
        env={"EXCHANGE_LANG": "ru", **env},
    )
    assert russian.returncode == 0, describe(russian)
    assert "всё ещё настроен" in russian.stdout, describe(russian)
    implicit = cli("channels", "drop", "api", "--note", "x", db=db_url)  # the one channel
    assert "still configured" in implicit.stdout, describe(implicit)


def test_a_seed_that_creates_nothing_says_why_in_its_one_line(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Issue 32 (mpwords2 item 4): «создано 0» alone leaves the operator guessing. The line
    says why: nothing accepted of the kinds the channel takes; each current message already
    has a delivery there (delivered or waiting); an earlier seed gave it all."""
    env = with_shop(tmp_path)
    empty = cli("channels", "seed", "shop", db=db_url, env=env)
    assert empty.returncode == 0, describe(empty)
    assert (
        "channel shop: 0 deliveries created; no message of the kinds it takes (price) has been "
        "accepted"
    ) in " ".join(empty.stdout.split()), describe(empty)
    taken(engine, 2)  # shop registered above: 1C's prices reached it as they came
    held = cli("channels", "seed", "shop", db=db_url, env=env)
    assert (
        "channel shop: 0 deliveries created; each of the 2 current messages it takes already "
        "has a delivery on it (delivered or waiting)"
    ) in " ".join(held.stdout.split()), describe(held)
    again = cli("channels", "seed", "shop", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    said = " ".join(again.stdout.split())
    assert "создано 0" in said and "предыдущий seed уже дал" in said, describe(again)


def test_verify_of_a_dropped_channel_says_it_was_dropped_when_by_whom_and_what_to_do(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Issue 32 (mpwords2 item 5): ``verify --channel shop`` after ``channels drop shop`` said
    «no channel shop»; it says the channel was dropped, when, by whom, and what to do (one
    line, exit 2; in Russian too)."""
    taken(engine, 2)
    assert cli("channels", "seed", "shop", db=db_url, env=with_shop(tmp_path)).returncode == 0
    dropped = cli(
        "channels", "drop", "shop", "--note", "shop closed", "--operator", "anna", db=db_url
    )
    assert dropped.returncode == 0, describe(dropped)
    only_api = json.loads(with_shop(tmp_path)["EXCHANGE_CHANNELS"] or "{}")
    del only_api["shop"]
    env = {"EXCHANGE_CHANNELS": json.dumps(only_api), "EXCHANGE_SITE_TOKEN": None}
    result = cli("verify", "--channel", "shop", db=db_url, env=env)
    line = assert_one_line_error(
        result,
        "channel shop was dropped 20",
        " by anna: nothing is delivered to it any more",
        "verify a channel configured now (api)",
        "exchange channels seed shop",
    )
    assert "no channel" not in line, line
    russian = cli("verify", "--channel", "shop", db=db_url, env={**env, "EXCHANGE_LANG": "ru"})
    assert russian.returncode == 2, describe(russian)
    (said,) = russian.stderr.splitlines()
    assert said.startswith("ошибка: канал shop удалён 20"), said
    assert "(удалил anna)" in said and "exchange channels seed shop" in said, said


def test_a_seed_says_its_count_once(cli: Cli, db_url: str, engine: Engine, tmp_path: Path) -> None:
    """Issue 32 (mpminor item 1): a seed printed «… 5 deliveries created» and then «channel
    shop: 5 deliveries created», its result twice. Each batch's running count is said before
    the result, the last one only in the result line."""
    taken(engine, 5)
    seeded = cli("channels", "seed", "shop", "--batch", "2", db=db_url, env=with_shop(tmp_path))
    assert seeded.returncode == 0, describe(seeded)
    assert "… 2 deliveries created" in seeded.stderr, describe(seeded)
    assert "… 4 deliveries created" in seeded.stderr, describe(seeded)
    assert (seeded.stdout + seeded.stderr).count("5 deliveries created") == 1, describe(seeded)


def test_list_counts_a_wait_for_the_marketplace_apart_from_a_retry(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """Seller 34 item 3: of three delayed deliveries, two wait for the marketplace (their last
    delaying event ``awaiting-outcome``: Ozon's hourly limit) and one for a retry: ``channels
    list`` says «ждёт площадку 2» and «отложено (повтор) 1», by ``status``'s one wait rule."""
    taken(engine, 3)
    with transaction(engine) as connection:
        rows = connection.execute(select(deliveries.c.message_pk, deliveries.c.channel_id)).all()
        connection.execute(deliveries.update().values(state="delayed"))
        for n, row in enumerate(rows):
            connection.execute(
                history.insert().values(
                    message_pk=row.message_pk,
                    channel_id=row.channel_id,
                    at=SystemClock().now(),
                    event="retry-scheduled" if n == 0 else "awaiting-outcome",
                    from_state="in_progress",
                    to_state="delayed",
                )
            )
    assert listed(cli, db_url)["api"]["awaiting"] == {"channel": 2}
    russian = cli("channels", "list", db=db_url, env={"EXCHANGE_LANG": "ru"})
    assert "ждёт площадку 2" in russian.stdout, describe(russian)
    assert "отложено (повтор) 1" in russian.stdout, describe(russian)


def test_drop_with_a_delivery_in_flight_says_when_its_lease_ends_if_its_worker_is_gone(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Promise (review rev35ow words): the delivery left in flight is its worker's to record,
    or, that worker gone (killed), it ends when its lease runs out: the line says in how long,
    never that a dead worker will record it."""
    taken(engine, 1)
    assert cli("channels", "seed", "shop", db=db_url, env=with_shop(tmp_path)).returncode == 0
    with transaction(engine) as c:
        shop = c.execute(select(channels.c.id).where(channels.c.name == "shop")).scalar_one()
        until = SystemClock().now() + timedelta(seconds=120)
        c.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == shop)
            .values(state="in_progress", locked_by="w1", locked_until=until, lease_token="t")
        )
    result = cli("channels", "drop", "shop", "--note", "shop closed", db=db_url)
    assert result.returncode == 0, describe(result)
    said = next(line for line in result.stdout.splitlines() if "in flight" in line)
    assert "if that worker is gone, it ends when its lease runs out (in about" in said, said
    seconds = int(said.rsplit("in about ", 1)[1].split(" ", 1)[0])
    assert 100 <= seconds <= 120, said
