"""Issue 12 items 4 and 7 where a user meets them: ``exchange`` run as a real process with a
secret written the way people write one, and with settings beyond any sensible bound.

Promises (contract 6 and 7): a token that can work works (a Windows line end, a Notepad BOM);
every command refuses what cannot work at load, exit 2, one line, no traceback, without the
secret; a database password given in the URL's query is masked wherever the URL is shown; a
time or a worker id that would fail every cycle is refused before the first one, and the
largest accepted values really run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from clitools import TOKEN, Cli, Result, describe
from sqlalchemy import Engine, select, update
from sqlalchemy.engine import make_url

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, history, messages
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import one_channel_messages, posting_row, price_row, stage
from exchange.domain.identity import message_id
from exchange.settings import MAX_SECONDS, WORKER_ID_MAX

COMMANDS = [["check"], ["run", "--once"], ["config"], ["migrate"], ["status"]]
ROWS = [price_row("SKU-1", 1), price_row("SKU-2", 1), posting_row("DOC-1", 1)]


def printed_lines(result: Result) -> list[str]:
    return [line for line in f"{result.stdout}\n{result.stderr}".splitlines() if line.strip()]


def assert_refused_in_one_line(
    results: Sequence[Result], *fragments: str, hidden: tuple[str, ...]
) -> None:
    """Exit 2, one line (an ``error:`` on stderr, or check's FAIL line), naming the problem,
    holding none of ``hidden``."""
    for result in results:
        assert 2 == result.returncode, describe(result)
        lines = printed_lines(result)
        assert 1 == len(lines), describe(result)
        assert lines[0].startswith(("error: ", "FAIL configuration valid: ")), describe(result)
        for fragment in fragments:
            assert fragment in lines[0], describe(result)
        for secret in hidden:
            assert secret not in result.stdout + result.stderr, describe(result)


def delivered(engine: Engine) -> dict[str, str]:
    with transaction(engine, read_only=True) as connection:
        one = one_channel_messages()  # each message's state on the one channel (migration 0026)
        rows = connection.execute(select(one.c.aggregate, one.c.state)).all()
    return {aggregate: state for aggregate, state in rows}


# -- a token as people write it ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["env CRLF", "file BOM CRLF", "file LF"])
def test_a_token_with_a_windows_line_end_or_a_bom_is_stripped_and_the_messages_delivered(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Path, where: str
) -> None:
    env: dict[str, str | None] = {"EXCHANGE_SITE_TOKEN": TOKEN + "\r\n"}
    if where.startswith("file"):
        token_file = tmp_path / "site_token"
        text = TOKEN + ("\r\n" if "CRLF" in where else "\n")
        token_file.write_bytes(("\ufeff" if "BOM" in where else "").encode() + text.encode())
        env = {"EXCHANGE_SITE_TOKEN": None, "EXCHANGE_SITE_TOKEN_FILE": str(token_file)}
    stage(engine, ROWS)

    check, run = cli.many(
        [["check"], ["run", "--until-idle", "--max-seconds", "60"]],
        db=db_url,
        site=site.url,
        env=env,
    )

    assert 0 == run.returncode, describe(run)
    assert {"SKU-1": "delivered", "SKU-2": "delivered", "DOC-1": "delivered"} == delivered(engine)
    assert "OK   site reachable and token accepted" in check.stdout, describe(check)


UNUSABLE_TOKENS = [
    pytest.param("tok-Secret-77\r\nX-Evil: 1", id="header-injection"),
    pytest.param("tok-Secret-77\x01zz", id="control-character"),
    pytest.param("tok-Secret-77éè", id="non-ASCII"),
    pytest.param("tok-Secret-77 zz", id="inner-space"),
]


@pytest.mark.parametrize("token", UNUSABLE_TOKENS)
def test_an_unusable_env_token_stops_every_command_in_one_line_without_showing_it(
    cli: Cli, tmp_path: Path, site: SiteSimulator, token: str
) -> None:
    # Refused at load, before any database is opened: one database kind is enough.
    db = f"sqlite:///{tmp_path / 'exchange.db'}"
    results = cli.many(COMMANDS, db=db, site=site.url, env={"EXCHANGE_SITE_TOKEN": token})
    assert_refused_in_one_line(results, "EXCHANGE_SITE_TOKEN", hidden=("tok-Secret-77", "Secret"))


@pytest.mark.parametrize("token", UNUSABLE_TOKENS)
def test_an_unusable_token_file_stops_every_command_in_one_line_without_showing_it(
    cli: Cli, tmp_path: Path, site: SiteSimulator, token: str
) -> None:
    token_file = tmp_path / "site_token"
    token_file.write_bytes(b"\xef\xbb\xbf" + token.encode() + b"\r\n")
    db = f"sqlite:///{tmp_path / 'exchange.db'}"
    results = cli.many(
        COMMANDS,
        db=db,
        site=site.url,
        env={"EXCHANGE_SITE_TOKEN": None, "EXCHANGE_SITE_TOKEN_FILE": str(token_file)},
    )
    assert_refused_in_one_line(
        results, "EXCHANGE_SITE_TOKEN_FILE", hidden=("tok-Secret-77", "Secret")
    )


def test_a_site_url_with_credentials_stops_every_command_in_one_line_without_the_password(
    cli: Cli, tmp_path: Path, site: SiteSimulator
) -> None:
    url = site.url.replace("http://", "http://bridge:pw-Basic-55@")
    results = cli.many(COMMANDS, db=f"sqlite:///{tmp_path / 'x.db'}", site=url)
    assert_refused_in_one_line(
        results, "EXCHANGE_SITE_URL", "user name or password", hidden=("pw-Basic-55", TOKEN)
    )


# -- a database password in the URL's query ----------------------------------------------------

QUERY_PASSWORD = "pw-Query-0ddba11"


def test_a_database_password_in_the_query_is_masked_wherever_the_url_is_shown(
    cli: Cli, pg_url: str
) -> None:
    """On PostgreSQL (SQLite has no password): the server trusts the test user, so the password
    travels but is not needed; what matters is that no output shows it."""
    url = f"{pg_url}?password={QUERY_PASSWORD}&application_name=exchange"
    unreachable = make_url(url).set(port=1).render_as_string(hide_password=False)
    migrate, config, check, status = cli.many(
        [["migrate"], ["config"], ["check"], ["status"]],
        db=url,
        envs=[{}, {}, {}, {"EXCHANGE_DATABASE_URL": unreachable}],
    )
    assert 0 == migrate.returncode, describe(migrate)
    for result in (migrate, config, check, status):
        assert QUERY_PASSWORD not in result.stdout + result.stderr, describe(result)
    for result in (migrate, config, check):
        assert "password=***" in result.stdout, describe(result)
    assert "OK   database reachable" in check.stdout, describe(check)
    assert 2 == status.returncode, describe(status)
    (line,) = printed_lines(status)
    assert line.startswith("error: database ") and "password=***" in line, describe(status)


# -- settings without bounds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EXCHANGE_GAP_TIMEOUT", "inf"),
        ("EXCHANGE_GAP_TIMEOUT", "1e12"),
        ("EXCHANGE_LEASE_SECONDS", "1e12"),
        ("EXCHANGE_RETRY_MAX_DELAY", "1e12"),
        ("EXCHANGE_POLL_INTERVAL", "nan"),
        ("EXCHANGE_MAX_ATTEMPTS", str(2**31)),
        ("EXCHANGE_WORKER_ID", "w" * (WORKER_ID_MAX + 1)),
        # Ozon answers a Client-Id above int64 with a 400 on every request (review 32c)
        ("EXCHANGE_OZON_CLIENT_ID", "9" * 20),
    ],
)
def test_a_setting_that_would_fail_every_cycle_stops_check_and_run_at_load(
    cli: Cli, pg_url: str, site: SiteSimulator, variable: str, value: str
) -> None:
    # PostgreSQL: where a worker id over 200 characters failed every cycle (SQLite ignores
    # VARCHAR widths); refused at load, so no cycle runs on either.
    results = cli.many(
        [["check"], ["run", "--once"], ["config"]], db=pg_url, site=site.url, env={variable: value}
    )
    assert_refused_in_one_line(results, variable, hidden=())


def test_the_largest_accepted_times_and_worker_id_really_run(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    """The bounds are not only refusals: at the bound a whole run works on both databases
    (a lease, a retry, a gap deadline and the worker's row are computed and stored with them)."""
    site.faults.poison = {"SKU-2"}  # a 500: one retry scheduled with the largest delays
    stage(engine, [*ROWS, posting_row("DOC-2", 2)])  # DOC-2 waits for v1: a gap deadline
    bound = str(MAX_SECONDS)
    env: dict[str, str | None] = {
        "EXCHANGE_GAP_TIMEOUT": bound,
        "EXCHANGE_LEASE_SECONDS": bound,
        "EXCHANGE_HTTP_TIMEOUT": bound,
        "EXCHANGE_RETRY_MAX_DELAY": bound,
        "EXCHANGE_RETRY_BASE_DELAY": bound,
        "EXCHANGE_WORKER_ID": "w" * WORKER_ID_MAX,
    }

    check, run, again = cli.many(
        [["check"], ["run", "--once"], ["run", "--once"]], db=db_url, site=site.url, env=env
    )

    for result in (check, run, again):
        assert result.returncode == 0, describe(result)
    states = delivered(engine)
    assert "delivered" == states["SKU-1"] == states["DOC-1"], states
    assert "delayed" == states["SKU-2"], states  # its retry is ten years away, not a crash


# -- data read back ----------------------------------------------------------------------------


def test_a_token_already_in_the_data_is_masked_by_history_and_quarantine_list(
    cli: Cli, db_url: str, engine: Engine, scenario: object
) -> None:
    """Rows recorded before the token was masked at the source (or a token 1C or the site put
    into the data) are not shown in clear: every text read back goes through the same masking.
    The Cli helper fails the test if the token appears in any output."""
    rejected = message_id("price", "SKU-REJ", 1)
    leaked = f"HTTP 422: you sent {json.dumps({'authorization': 'Bearer ' + TOKEN})} {TOKEN!r}"
    with transaction(engine) as connection:
        connection.execute(
            update(messages).where(messages.c.message_id == rejected).values(last_error=leaked)
        )
        pk = connection.execute(
            select(messages.c.id).where(messages.c.message_id == rejected)
        ).scalar_one()
        # the delivery's own words, which the lists read (contract 13: per channel)
        connection.execute(
            update(deliveries).where(deliveries.c.message_pk == pk).values(last_error=leaked)
        )
        connection.execute(update(history).where(history.c.message_pk == pk).values(detail=leaked))

    results = cli.many(
        [["history", rejected], ["history", rejected, "--json"], ["quarantine", "list"],
         ["quarantine", "list", "--json"]],
        db=db_url,
    )  # fmt: skip

    for result in results:
        assert 0 == result.returncode, describe(result)
        assert "you sent" in result.stdout and "***" in result.stdout, describe(result)
