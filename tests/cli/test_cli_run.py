"""``exchange run`` (contract 6): forever until a signal, ``--once``, ``--until-idle``."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from clitools import (
    TOKEN,
    Cli,
    assert_no_leaks,
    describe,
    state_counts,
    untaken_rows,
)
from procs import wait_for
from sqlalchemy import Engine

from exchange.db.engine import make_engine, transaction
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import message, posting_row, price_row, stage
from exchange.ops.status import worker_rows


def test_run_until_idle_delivers_every_staged_row_and_exits_0(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    skus = [f"SKU-{n}" for n in range(5)]
    stage(engine, [price_row(sku, v, f"{v}0.00") for sku in skus for v in (1, 2)])
    stage(engine, [posting_row("DOC-1", v) for v in (1, 2, 3)])

    result = cli("run", "--until-idle", "--max-seconds", "60", db=db_url, site=site.url)

    assert result.returncode == 0, describe(result)
    assert untaken_rows(engine) == 0
    assert state_counts(engine) == {
        "delivered": 5 + 3,
        "cancelled": 5,
    }  # v1 of each SKU: superseded
    assert site.held_versions() == {
        **{("price", sku): 2 for sku in skus},
        ("financial_posting", "DOC-1"): 3,
    }
    assert site.applied_versions("financial_posting", "DOC-1") == [1, 2, 3]
    assert_retired(engine)


def assert_retired(engine: Engine) -> None:
    """A run that ends normally retires as a SIGTERM'd one does: its row stopped, with when
    (the new operator's review: never «молчит… (ещё считается работающим)» after it)."""
    with transaction(engine, read_only=True) as connection:
        shown = worker_rows(connection, datetime.now(UTC))
    assert shown and all(w["state"] == "stopped" and w["stopped_at"] for w in shown), shown


def test_run_once_runs_one_cycle_and_exits_0_leaving_retries_for_later(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.poison = {"SKU-POISON"}  # answers 500, every time
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)] + [price_row("SKU-POISON", 1)])
    started = time.monotonic()

    result = cli(
        "run",
        "--once",
        db=db_url,
        site=site.url,
        # the poison SKU's retry is due only in seconds: --once does not wait for it
        env={"EXCHANGE_RETRY_BASE_DELAY": "30", "EXCHANGE_RETRY_MAX_DELAY": "60"},
    )

    assert result.returncode == 0, describe(result)
    assert time.monotonic() - started < 20
    assert untaken_rows(engine) == 0
    assert {message(engine, "price", f"SKU-{n}", 1)["state"] for n in range(3)} == {"delivered"}
    assert message(engine, "price", "SKU-POISON", 1)["state"] == "delayed"
    assert_retired(engine)


def test_run_until_idle_exits_3_when_max_seconds_runs_out_during_an_outage(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.outage = True
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(10)])
    started = time.monotonic()

    result = cli("run", "--until-idle", "--max-seconds", "1", db=db_url, site=site.url)

    assert result.returncode == 3, describe(result)
    assert time.monotonic() - started < 20
    assert site.effects() == []
    counts = state_counts(engine)
    assert counts["quarantined"] == 0, counts  # an outage is not a poison message
    assert counts["delivered"] == 0, counts


def test_run_until_idle_counts_messages_held_behind_a_quarantined_predecessor_as_idle(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.reject = {"DOC-1"}  # the site answers 422 to every version of DOC-1
    stage(engine, [posting_row("DOC-1", v) for v in (1, 2, 3)])

    result = cli("run", "--until-idle", "--max-seconds", "30", db=db_url, site=site.url)

    assert result.returncode == 0, describe(result)
    v1, v2, v3 = (message(engine, "financial_posting", "DOC-1", v) for v in (1, 2, 3))
    assert (v1["state"], v1["reason"]) == ("quarantined", "http-422")
    assert (v2["state"], v3["state"]) == ("new", "new")  # held: only a person releases them
    assert site.requests_by_status() == {422: 1}  # v2 and v3 were never sent


def test_run_forever_delivers_until_sigterm_then_exits_0_within_10_s(
    cli: Cli, tmp_path: Path, site: SiteSimulator
) -> None:
    db_url = sqlite_copy(tmp_path / "forever.db")
    engine = make_engine(db_url)
    stage(engine, [price_row("SKU-1", 1)])
    args = ["run"]
    environment = cli.environment(db_url, site.url)
    with (tmp_path / "out.txt").open("w+") as out, (tmp_path / "err.txt").open("w+") as err:
        process = subprocess.Popen(
            cli.command(args), env=environment, cwd=cli.cwd, stdout=out, stderr=err, text=True
        )
        try:
            wait_for(
                lambda: (
                    site.held_versions().get(("price", "SKU-1")) == 1 or process.poll() is not None
                ),
                seconds=20,
                what="the staged row delivered to the site",
            )
            assert process.poll() is None, "exchange run stopped by itself"
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    shown = f"\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}"
    assert_no_leaks(args, environment, stdout, stderr)
    assert code == 0, f"exit code {code}{shown}"
    assert message(engine, "price", "SKU-1", 1)["state"] == "delivered", shown
    engine.dispose()


def test_run_until_idle_says_the_messages_kept_on_no_channel(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path
) -> None:
    """Promise (issue 32, mpminor item 4): the closing line of ``run --until-idle`` counts the
    messages kept on no channel (a kind no channel takes: no run delivers them), by kind,
    beside what waits and what is quarantined."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    prices_only = {
        "api": {
            "target": "api",
            "site_url": site.url,
            "site_token_file": str(token),
            "takes": ["price"],
        }
    }
    env = {"EXCHANGE_CHANNELS": json.dumps(prices_only), "EXCHANGE_SITE_TOKEN": None}
    stage(engine, [price_row("SKU-1", 1, "10.00"), posting_row("DOC-1", 1)])
    result = cli("run", "--until-idle", "--max-seconds", "60", db=db_url, env=env)
    assert result.returncode == 0, describe(result)
    last = result.stdout.strip().splitlines()[-1]
    assert "1 kept on no channel (financial_posting)" in last, describe(result)
