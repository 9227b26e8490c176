"""Log lines (issue 3 item 6): one structured line per outcome, text or JSON, no secrets.

The service's own handler is installed with ``logs.configure`` on a StringIO, exactly as the
CLI installs it on stderr.
"""

from __future__ import annotations

import io
import json
import logging
import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from opstools import make_worker, run
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange import logs
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import FAST, posting_row, price_row, stage
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ConfigurationError
from exchange.queue.lease import Leased
from exchange.settings import Settings, load_settings
from exchange.worker.loop import log_outcome

pytestmark = pytest.mark.usefixtures("restore_logging")

OUTCOME_KEYS = {
    "timestamp",
    "level",
    "logger",
    "event",
    "outcome",
    "message_id",
    "kind",
    "aggregate",
    "version",
    "attempt",
    "http_status",
    "error_class",
    "delay_s",
    "reason",
    "result_unknown",
    "detail",
}
# The simulated site answers in milliseconds; the fast settings' 2 s timeout was still exceeded
# by four requests in a full run at load 10, which retried them and broke the exact line counts.
# These tests are about the lines: the timeout is a hang guard here.
HTTP_TIMEOUT = 30.0
SECRET_TOKEN = "tok-9f8e7d6c5b4a-very-secret"
DB_PASSWORD = "pw-5up3r/s3cret@x"


def capture(**overrides: Any) -> io.StringIO:
    stream = io.StringIO()
    logs.configure(load_settings(database_url="sqlite:///x.db", **overrides), stream=stream)
    return stream


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = stream.getvalue().splitlines()
    assert lines, "nothing was logged"
    return [json.loads(line) for line in lines]  # every line is one JSON object


def test_json_lines_carry_one_outcome_line_per_message_with_its_fields(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.reject = {"SKU-R"}
    site.faults.poison = {"SKU-P"}
    stage(engine, [price_row(f"SKU-{n}", 1, "123.45") for n in range(3)])
    stage(engine, [price_row("SKU-R", 1, "123.45"), price_row("SKU-P", 1, "123.45")])
    stage(engine, [posting_row("DOC-1", 1, "777.77")])
    stream = capture(log_format="json", site_token="test-token", log_level="DEBUG")
    run(make_worker(db_url, engine, site, max_attempts=2, http_timeout=HTTP_TIMEOUT))

    lines = json_lines(stream)
    outcomes = [line for line in lines if line["event"] == "delivery"]
    batches = [line for line in lines if line["event"] == "deliveries"]
    assert {"INFO"} == {line["level"] for line in batches}
    assert 4 == sum(line["count"] for line in batches)
    assert all(OUTCOME_KEYS == set(line) for line in outcomes)
    assert {"delivered": 4, "quarantined": 2, "retry-scheduled": 1} == Counter(
        line["outcome"] for line in outcomes
    )
    rejected = next(line for line in outcomes if line["aggregate"] == "SKU-R")
    assert ("WARNING", "exchange.worker", 422, "http-422", 1) == (
        rejected["level"],
        rejected["logger"],
        rejected["http_status"],
        rejected["reason"],
        rejected["attempt"],
    )
    retried = next(line for line in outcomes if line["outcome"] == "retry-scheduled")
    assert (500, 1, "SKU-P") == (retried["http_status"], retried["attempt"], retried["aggregate"])
    assert retried["delay_s"] is not None
    delivered = [line for line in outcomes if line["outcome"] == "delivered"]
    assert {"DEBUG"} == {line["level"] for line in delivered}  # their batch has the INFO line
    assert {200} == {line["http_status"] for line in delivered}
    assert {e.message_id for e in site.effects()} == {line["message_id"] for line in delivered}
    for line in lines:
        assert line["timestamp"].endswith("Z")
        assert datetime.fromisoformat(line["timestamp"]).utcoffset().total_seconds() == 0
    # No payload: neither its values nor its shape.
    text = stream.getvalue()
    assert "123.45" not in text and "777.77" not in text and "price_type" not in text


def test_text_lines_are_readable_and_name_each_field(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    stream = capture(log_level="DEBUG")
    run(make_worker(db_url, engine, site, http_timeout=HTTP_TIMEOUT))

    [line] = [line for line in stream.getvalue().splitlines() if " delivery " in line]
    assert " DEBUG exchange.worker: delivery outcome=delivered message_id=price.SKU-1.v1." in line
    assert line.endswith(" kind=price aggregate=SKU-1 version=1 attempt=1 http_status=200")
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_deliveries_have_one_info_line_per_batch_and_failures_keep_their_own(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    """Issue 13, item 7: count, time, the first and the last message_id of the batch."""
    site.faults.reject = {"SKU-R"}
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(5)] + [price_row("SKU-R", 1)])
    stream = capture()
    run(make_worker(db_url, engine, site, batch_size=100, http_timeout=HTTP_TIMEOUT))

    lines = stream.getvalue().splitlines()
    [batch] = [line for line in lines if " deliveries " in line]
    ids = sorted(e.message_id for e in site.effects())
    assert " INFO exchange.worker: deliveries outcome=delivered count=5 seconds=" in batch
    first = batch.split("first_message_id=")[1].split()[0]
    last = batch.split("last_message_id=")[1].split()[0]
    assert {first, last} <= set(ids)
    assert [] == [line for line in lines if "outcome=delivered message_id=" in line]
    [rejected] = [line for line in lines if " delivery outcome=quarantined" in line]
    assert " WARNING " in rejected and "aggregate=SKU-R" in rejected


def test_neither_the_token_nor_a_database_password_reaches_the_log_even_at_debug(
    db_url: str, engine: Engine
) -> None:
    url = f"postgresql+psycopg://exchange:{DB_PASSWORD}@db.internal/exchange"
    stream = capture(
        log_level="DEBUG",
        log_format="json",
        site_token=SECRET_TOKEN,
        staging_url=url,
    )
    with SiteSimulator(token=SECRET_TOKEN) as site:
        site.faults.reject = {"SKU-R"}
        stage(engine, [price_row("SKU-1", 1), price_row("SKU-R", 1)])
        settings = load_settings(
            database_url=db_url, site_url=site.url, site_token=SECRET_TOKEN, worker_id="w", **FAST
        )
        # httpx's own transport (used when a proxy is set): its wire trace at DEBUG is the
        # chattiest place a header could show; the default transport is checked in
        # tests/security/test_secrets_and_tls.py
        run(bootstrap.worker(settings, engine, transport=httpx.AsyncHTTPTransport()))
    log = logging.getLogger("exchange.test")
    # What a careless caller, a driver or a site might put into a line:
    log.error("connecting to %s failed", url)
    log.warning("site said: Authorization: Bearer %s", SECRET_TOKEN)
    try:
        raise RuntimeError(f"bad answer for token {SECRET_TOKEN}")
    except RuntimeError:
        log.exception("request failed")
    logs.log_event(log, logging.WARNING, "delivery", detail=f"HTTP 400: echo {SECRET_TOKEN}")

    text = stream.getvalue()
    lines = json_lines(stream)
    assert any(line["logger"].startswith("httpcore") for line in lines), "DEBUG lines missing"
    assert SECRET_TOKEN not in text
    assert DB_PASSWORD not in text
    assert "pw-5up3r%2Fs3cret%40x" not in text  # nor as it is written inside a URL
    assert text.count(logs.REDACTED) >= 4
    assert any("Traceback" in line.get("exception", "") for line in lines)


def test_the_redaction_filter_replaces_every_secret_in_message_arguments_and_fields() -> None:
    settings = Settings(
        database_url="postgresql+psycopg://u:p%40ss-word@h/db",
        site_token=SECRET_TOKEN,
        worker_id="w",
    )
    redact = logs.RedactSecrets(logs.secrets_of(settings))
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %s b %s", None, None)
    record.args = (SECRET_TOKEN, "p@ss-word")
    setattr(record, logs.FIELDS_ATTR, {"detail": f"({SECRET_TOKEN})", "attempt": 3})
    assert redact.filter(record)
    assert "a *** b ***" == record.getMessage()
    assert {"detail": "(***)", "attempt": 3} == getattr(record, logs.FIELDS_ATTR)
    assert "p%40ss-word" in redact.secrets  # as written in a URL


def test_log_format_is_validated_and_case_insensitive() -> None:
    assert "json" == load_settings(log_format="JSON").log_format
    with pytest.raises(ConfigurationError, match="EXCHANGE_LOG_FORMAT"):
        load_settings(log_format="xml")


def test_configuring_twice_leaves_one_handler_and_quiets_per_request_library_lines() -> None:
    capture()
    stream = capture()
    root = logging.getLogger()
    ours = [h for h in root.handlers if any(isinstance(f, logs.RedactSecrets) for f in h.filters)]
    assert 1 == len(ours)
    assert logging.WARNING == logging.getLogger("httpx").level
    logging.getLogger("httpx").info("HTTP Request: POST … 200 OK")
    assert "" == stream.getvalue()


def test_a_tick_skipped_during_a_long_cycle_is_not_logged_other_scheduler_warnings_are() -> None:
    stream = capture(log_format="text")
    scheduler = logging.getLogger("apscheduler.scheduler")
    scheduler.warning(
        'Execution of job "tick" skipped: maximum number of running instances reached (1)'
    )
    scheduler.warning('Run time of job "tick" was missed by 0:00:05')
    text = stream.getvalue()
    assert "maximum number of running instances" not in text
    assert "was missed by" in text


def test_a_pool_reset_failure_after_a_lost_connection_is_one_redacted_line_without_traceback() -> (
    None
):
    """PostgreSQL ending a connection mid-pipeline made SQLAlchemy's pool log its failed reset
    with a traceback (seen in CI under pg_terminate_backend): an operator would read a crash."""
    stream = capture(
        log_format="text",
        staging_url=f"postgresql+psycopg://exchange:{DB_PASSWORD}@db.example/exchange",
    )
    pool = logging.getLogger("sqlalchemy.pool.impl.QueuePool")
    try:
        raise OSError(f"server closed the connection\n\tpassword={DB_PASSWORD} lost")
    except OSError:
        pool.error("Exception during reset or similar", exc_info=True)
    logging.getLogger("psycopg").warning(
        "error ignored terminating %s: consuming input failed: server closed\n\tThis probably",
        "<psycopg.Pipeline [BAD]>",
    )
    lines = stream.getvalue().splitlines()
    assert 2 == len(lines), lines
    assert "Exception during reset or similar: OSError: server closed the connection" in lines[0]
    assert "consuming input failed: server closed This probably" in lines[1]
    assert "Traceback" not in stream.getvalue()
    assert DB_PASSWORD not in stream.getvalue()


def test_the_services_own_failures_keep_their_traceback() -> None:
    stream = capture(log_format="text")
    try:
        raise ValueError("a bug")
    except ValueError:
        logging.getLogger("exchange.runner").exception("cycle failed")
    assert "Traceback" in stream.getvalue()


def test_the_amqp_clients_traceback_for_a_lost_connection_is_lowered_to_one_debug_line() -> None:
    """aiormq logs its reader's exit with the whole traceback when the broker goes away, before
    the RabbitMQ source says so in its own line: at INFO nothing of it shows, at DEBUG one
    line; "Unexpected connection close from remote" (at ERROR in aiormq) likewise."""
    import aiormq

    client = logging.getLogger("aiormq.connection")
    lost = aiormq.exceptions.AMQPConnectionError("Server connection unexpectedly closed")
    for log_level in ("INFO", "DEBUG"):
        stream = capture(log_format="text", log_level=log_level)
        client.warning("Cancelling cause reader exited abnormally", exc_info=lost)
        client.error(
            'Unexpected connection close from remote "%s", Connection.Close(reply_code=%r)',
            "amqp://127.0.0.1",
            320,
        )
        refused = aiormq.exceptions.AMQPConnectionError(111, "Connect call failed")
        client.error("error when creating transport: %r", refused)
        text = stream.getvalue()
        assert "Traceback" not in text and " ERROR " not in text and " WARNING " not in text
        if log_level == "INFO":
            assert "" == text
        else:
            lines = text.splitlines()
            assert 3 == len(lines), lines
            assert (
                "DEBUG aiormq.connection: Cancelling cause reader exited abnormally: "
                "AMQPConnectionError: Server connection unexpectedly closed" in lines[0]
            )


def test_the_amqp_clients_other_errors_keep_their_level_and_traceback() -> None:
    """Only a lost connection is lowered: a consumer callback that failed is a real error."""
    stream = capture(log_format="text")
    try:
        raise ValueError("a bug in the callback")
    except ValueError as exc:
        logging.getLogger("aiormq.channel").error("Consumer callback failed", exc_info=exc)
    logging.getLogger("aiormq.connection").error("Unexpected frame %r", "frame")
    text = stream.getvalue()
    assert "ERROR aiormq.channel: Consumer callback failed" in text
    assert "Traceback" in text and "ValueError: a bug in the callback" in text
    assert "ERROR aiormq.connection: Unexpected frame 'frame'" in text


@pytest.mark.parametrize(
    ("said", "status", "outcome", "attempt"),
    [
        # Wildberries' catalogue not read again yet (nmID unknown): nothing was sent
        ("Wildberries' catalogue has no good with vendor code 'SKU-1' yet", None, "waiting", None),
        # a Wildberries task: sent, its outcome read later
        ("Wildberries took it in task 7: its outcome is read later", 200, "awaiting-outcome", 1),
    ],
)
def test_a_wait_decided_without_sending_is_logged_as_a_wait_with_no_attempt(
    said: str, status: int | None, outcome: str, attempt: int | None
) -> None:
    """Promise (issue 32, mpminor item 5): a wait the target decided without sending anything
    (no HTTP status) is logged ``outcome=waiting`` with no attempt; a wait for what the channel
    took keeps ``awaiting-outcome`` and its attempt."""
    stream = capture(log_format="json", log_level="DEBUG")
    now = datetime(2026, 12, 5, tzinfo=UTC)
    waited = decide(
        Classification(Verdict.AWAITING, said, http_status=status, again_in=60.0),
        attempt=1,
        now=now,
        policy=RetryPolicy(5, 1.0, 60.0),
        rng=random.Random(1),
    )
    log_outcome(Leased(1, "m-1", 1, "price", "SKU-1", 1, "{}", now, 1, 1), waited)
    [line] = json_lines(stream)
    assert (line["outcome"], line["attempt"]) == (outcome, attempt), line
