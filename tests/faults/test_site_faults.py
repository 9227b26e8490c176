"""The site misbehaving, end to end: staging -> a real Worker -> the site simulator over HTTP on
loopback, with the faults of contract 5 injected through ``Faults``.

The worker is built as production builds it, so every request goes through production's wire
(aiohttp, ``make_worker`` checks it); what was sent is read on the site's side
(``SiteSimulator.received``). The same faults against the httpx wire, at the client level:
test_site_wires.py.

Already proven elsewhere and not repeated here (tests/integration/test_pipeline.py): an answer
lost after the effect, a read timeout marked result-unknown, 409 stale equal/greater, the
poison message among healthy traffic, a long outage, Retry-After in seconds, terminal answers
and the 401 pause. This module adds the faults that were only covered by unit tests against a
mock transport, or not at all. Most run on SQLite only (the database does not change what the
site does); the two taking ``db_url`` run on PostgreSQL too.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.sitesim import Faults, Received, SiteSimulator
from exchange.dev.testing import (
    drain,
    fast_settings,
    message,
    one_channel_messages,
    posting_row,
    price_row,
    run_worker,
    stage,
)
from exchange.domain.clock import ensure_utc
from exchange.ops.quarantine import Filters, retry
from exchange.targets.shop_api.answers import RECEIPT_CAP
from exchange.targets.shop_api.target import ShopApiTarget
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

UPDATES = "/api/v1/updates"


PRODUCTION_WIRE = "aiohttp"  # SiteClient's default: no transport injected, no proxy set


@pytest.fixture(autouse=True)
def no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy set on the machine running the tests would switch the worker to the httpx wire."""
    for scheme in ("http", "https", "all", "no"):
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)


def make_worker(url: str, engine: Engine, site_url: str, **overrides: Any) -> Worker:
    """A worker built as production builds one: no transport can be injected here."""
    settings = fast_settings(url, site_url, **overrides)
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    assert isinstance(worker.target, ShopApiTarget)
    assert PRODUCTION_WIRE == worker.target.client.wire, "the fault tests left production's wire"
    return worker


def updates_sent(sim: SiteSimulator, message_id: str) -> list[Received]:
    """Every update the site read whose body carries this message_id, in order."""
    return [
        r
        for r in sim.received()
        if r.path == UPDATES and json.loads(r.body)["message_id"] == message_id
    ]


def keys_sent(sim: SiteSimulator, message_id: str) -> list[str]:
    """The Idempotency-Key of every update whose body carries this message_id."""
    return [r.headers["idempotency-key"] for r in updates_sent(sim, message_id)]


def bodies_sent(sim: SiteSimulator, message_id: str) -> set[bytes]:
    return {r.body for r in updates_sent(sim, message_id)}


def run(worker: Worker, scenario: Callable[[Worker], Awaitable[Any]] = drain) -> None:
    run_worker(worker, scenario)


def events(engine: Engine, pk: int, event: str | None = None) -> list[dict[str, Any]]:
    query = select(history).where(history.c.message_pk == pk).order_by(history.c.id)
    if event is not None:
        query = query.where(history.c.event == event)
    with transaction(engine, read_only=True) as connection:
        return [dict(r) for r in connection.execute(query).mappings()]


def all_states(engine: Engine) -> dict[str, str]:
    with transaction(engine, read_only=True) as connection:
        return dict(connection.execute(select(messages.c.aggregate, messages.c.state)).all())


@pytest.fixture(params=["versioned", "keys-only"])
def sim(request: pytest.FixtureRequest) -> Iterator[SiteSimulator]:
    """The site on loopback (token ``test-token``), twice: keeping both promises, and keeping
    only the idempotency promise (no 409 for old versions: it applies whatever arrives). After
    each test, whatever the faults: no effect applied twice, no old version applied over a
    newer one. Against the second site these are the service's promises alone."""
    versioned = request.param == "versioned"
    with SiteSimulator(
        token="test-token", faults=Faults(seed=1), check_versions=versioned, keep_requests=True
    ) as site:
        yield site
        assert [] == [f"{e.aggregate} v{e.version}" for e in site.stale_writes()]
        assert {} == {key: n for key, n in site.effect_counts().items() if n > 1}


# -- the wire -----------------------------------------------------------------------------------


def test_these_fault_tests_run_through_the_wire_production_builds(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    production = bootstrap.site_client(fast_settings(sqlite_url, sim.url))  # as `exchange run`
    asyncio.run(production.aclose())
    worker = make_worker(sqlite_url, sqlite_engine, sim.url)
    assert (PRODUCTION_WIRE, PRODUCTION_WIRE) == (production.wire, worker.target.client.wire)
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    run(worker)
    delivered = message(sqlite_engine, "price", "SKU-1", 1)
    assert [delivered["message_id"]] == keys_sent(sim, delivered["message_id"])


def test_a_worker_off_production_wire_is_refused_by_make_worker(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:9")  # switches to the httpx wire
    with pytest.raises(AssertionError, match="left production's wire"):
        make_worker(sqlite_url, sqlite_engine, sim.url)


# -- the site answers late, or not at all --------------------------------------------------------


def test_an_answer_later_than_the_timeout_is_resent_with_the_same_idempotency_key_and_applied_once(
    db_url: str, engine: Engine, sim: SiteSimulator
) -> None:
    # The client gives up at 0.2 s, the site answers at 4 s: the answer is late unless load
    # holds the client's timer back by more than 3.8 s (1.5 s was once not enough: a CI run on
    # two cores shared with other sessions saw the answer in time).
    sim.faults.slow_rate = 1.0
    sim.faults.slow_seconds = 4.0
    stage(engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])
    impatient = make_worker(db_url, engine, sim.url, http_timeout=0.2)

    async def one_cycle(w: Worker) -> None:
        await w.cycle()  # the site applies both, its answers come after the client gave up

    run(impatient, one_cycle)
    sim.faults.slow_rate = 0.0
    # The resend goes through a worker as patient as production's default: with 0.2 s, a CI run
    # on two shared cores once timed the resend out too (a third attempt, the test's count off).
    run(make_worker(db_url, engine, sim.url, http_timeout=10.0))
    for kind, aggregate in (("price", "SKU-1"), ("financial_posting", "DOC-1")):
        delivered = message(engine, kind, aggregate, 1)
        message_id = delivered["message_id"]
        assert ("delivered", 2) == (delivered["state"], delivered["attempts"])
        assert [message_id, message_id] == keys_sent(sim, message_id)
        assert 1 == len(bodies_sent(sim, message_id)), "the retry changed the body"
        [timeout] = events(engine, delivered["id"], "retry-scheduled")
        assert "ReadTimeout" == timeout["error_class"]
        assert timeout["detail"].startswith("result-unknown")
    assert {1} == set(sim.effect_counts().values())
    assert 2 == len(sim.effects())
    receipts = {e.message_id: e.receipt for e in sim.effects()}
    price = message(engine, "price", "SKU-1", 1)
    assert receipts[price["message_id"]] == price["receipt"]  # the replay of the first answer


def test_connection_refused_is_temporary_with_a_known_result_and_delivers_once_the_site_listens(
    sqlite_url: str, sqlite_engine: Engine
) -> None:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))  # bound and never listening: every connect is refused
    port = holder.getsockname()[1]
    stage(sqlite_engine, [price_row(f"SKU-{n}", 1) for n in range(4)])
    worker = make_worker(
        sqlite_url,
        sqlite_engine,
        f"http://127.0.0.1:{port}",
        max_attempts=3,
        breaker_threshold=2,
    )
    sites: list[SiteSimulator] = []

    async def refused_then_listening(w: Worker) -> None:
        for _ in range(30):  # ten times max_attempts: the breaker must absorb the refusals
            await w.cycle()
            await asyncio.sleep(0.005)
        assert {"new", "delayed"} >= set(all_states(sqlite_engine).values())
        holder.close()
        sites.append(SiteSimulator(token="test-token", port=port).start())
        await drain(w)

    try:
        run(worker, refused_then_listening)
    finally:
        holder.close()
        for site in sites:
            site.stop()
    assert {f"SKU-{n}": "delivered" for n in range(4)} == all_states(sqlite_engine)
    assert {1} == set(sites[0].effect_counts().values())
    assert 4 == len(sites[0].effects())
    failed = [
        e
        for n in range(4)
        for e in events(sqlite_engine, message(sqlite_engine, "price", f"SKU-{n}", 1)["id"])
        if e["error_class"] is not None
    ]
    assert failed, "no refused attempt was recorded"
    assert {"ConnectError"} == {e["error_class"] for e in failed}
    assert not any(e["detail"].startswith("result-unknown") for e in failed)


def test_a_connection_reset_before_the_site_read_the_update_is_retried_and_applied_once(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    sim.faults.answer_fault = "reset"
    stage(sqlite_engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])
    # A cycle claims what is due again before it ends (the claim order has no sweep cursor),
    # so the backoff is long enough that the first cycle ends with the resets of one or a few
    # attempts, never all twenty.
    worker = make_worker(
        sqlite_url,
        sqlite_engine,
        sim.url,
        max_attempts=20,
        retry_base_delay=0.2,
        retry_max_delay=0.4,
    )

    async def reset_then_heal(w: Worker) -> None:
        await w.cycle()
        assert [] == sim.effects()  # the resets came before anything was applied
        sim.faults.answer_fault = None
        await drain(w)

    run(worker, reset_then_heal)
    for kind, aggregate in (("price", "SKU-1"), ("financial_posting", "DOC-1")):
        delivered = message(sqlite_engine, kind, aggregate, 1)
        resets = events(sqlite_engine, delivered["id"], "retry-scheduled")
        assert resets, "no reset was recorded"
        assert ("delivered", len(resets) + 1) == (delivered["state"], delivered["attempts"])
        keys = keys_sent(sim, delivered["message_id"])
        assert [delivered["message_id"]] * (len(resets) + 1) == keys
        assert {"ReadError"} == {e["error_class"] for e in resets}
        # The worker cannot tell a reset before the effect from one after it:
        assert all(e["detail"].startswith("result-unknown") for e in resets)
    assert {1} == set(sim.effect_counts().values())
    assert 2 == len(sim.effects())


# -- answers that cannot be read, or are not what they should be --------------------------------


def test_an_answer_cut_off_mid_body_is_quarantined_unknown_response_and_an_operator_retry_applies_nothing_twice(  # noqa: E501
    db_url: str, engine: Engine, sim: SiteSimulator
) -> None:
    sim.faults.answer_fault = "cut-off"
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, sim.url)

    async def cut_then_replayed(w: Worker) -> None:
        await drain(w)
        cut = message(engine, "price", "SKU-1", 1)
        assert ("quarantined", "unknown-response", 1) == (
            cut["state"],
            cut["reason"],
            cut["attempts"],
        )
        assert 200 == cut["last_status"]
        assert "cannot be read" in cut["last_error"]
        sim.faults.answer_fault = None
        with transaction(engine) as connection:
            retry(
                connection,
                [cut["message_id"]],
                Filters(),
                operator="tester",
                note=None,
                now=w.clock.now(),
                dry_run=False,
            )
        await drain(w)

    run(worker, cut_then_replayed)
    delivered = message(engine, "price", "SKU-1", 1)
    [effect] = sim.effects()  # the site applied it when the answer was cut: the retry replays
    assert ("delivered", effect.receipt) == (delivered["state"], delivered["receipt"])


def test_a_200_whose_body_is_not_json_is_delivered_with_the_body_as_its_receipt(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    # Contract 5: 2xx is delivered, the receipt is the body's "receipt" or else the whole body.
    sim.faults.answer_fault = "not-json"
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    run(make_worker(sqlite_url, sqlite_engine, sim.url))
    delivered = message(sqlite_engine, "price", "SKU-1", 1)
    [effect] = sim.effects()
    assert ("delivered", 1, f"OK {effect.receipt}") == (
        delivered["state"],
        delivered["attempts"],
        delivered["receipt"],
    )


def test_a_redirect_is_quarantined_unknown_response_and_never_followed(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    with SiteSimulator(token="test-token") as elsewhere:
        sim.faults.answer_fault = "redirect"
        sim.faults.redirect_to = f"{elsewhere.url}{UPDATES}"
        stage(sqlite_engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])
        run(make_worker(sqlite_url, sqlite_engine, sim.url))
        assert (0, []) == (elsewhere.request_count, elsewhere.effects())
    for kind, aggregate in (("price", "SKU-1"), ("financial_posting", "DOC-1")):
        redirected = message(sqlite_engine, kind, aggregate, 1)
        assert ("quarantined", "unknown-response", 1, 307) == (
            redirected["state"],
            redirected["reason"],
            redirected["attempts"],
            redirected["last_status"],
        )
    assert [] == sim.effects()


def test_a_huge_answer_is_read_only_up_to_the_cap_and_its_receipt_is_capped(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    sim.faults.answer_fault = "huge"  # 256 MiB promised and streamed
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    worker = make_worker(sqlite_url, sqlite_engine, sim.url)
    tracemalloc.start()
    try:
        run(worker)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    delivered = message(sqlite_engine, "price", "SKU-1", 1)
    [effect] = sim.effects()
    assert ("delivered", 1) == (delivered["state"], delivered["attempts"])
    assert RECEIPT_CAP == len(delivered["receipt"])
    assert delivered["receipt"].startswith(f'{{"receipt":"{effect.receipt}","padding":"')
    assert peak < 32 * 1024 * 1024, f"{peak / 2**20:.0f} MiB allocated: the body was read whole"


# -- Retry-After --------------------------------------------------------------------------------


@pytest.mark.timing  # up to 15 s of a cycle on a loaded machine fit the 25-40 s window
def test_retry_after_as_an_http_date_delays_the_retry_until_that_time(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    sim.faults = Faults(fail_rate=1.0, seed=1)
    sim.faults.retry_after = format_datetime(datetime.now(UTC) + timedelta(seconds=40), usegmt=True)
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    run(make_worker(sqlite_url, sqlite_engine, sim.url, retry_max_delay=120), lambda w: w.cycle())
    delayed = message(sqlite_engine, "price", "SKU-1", 1)
    [scheduled] = events(sqlite_engine, delayed["id"], "retry-scheduled")
    assert ("delayed", 503) == (delayed["state"], scheduled["http_status"])
    # The date has whole seconds and the cycle took a moment: a little under 40 s.
    assert 30 <= scheduled["delay_s"] <= 40, scheduled
    wait = ensure_utc(delayed["next_try_at"]) - datetime.now(UTC)
    assert timedelta(seconds=25) <= wait <= timedelta(seconds=40), wait


@pytest.mark.parametrize("garbage", ["soon", "1.5", "-3", "Sat, 99 Foo 2026 25:61:00 GMT"])
def test_a_garbage_retry_after_is_ignored_and_the_backoff_applies_as_if_absent(
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator, garbage: str
) -> None:
    sim.faults = Faults(fail_rate=1.0, retry_after=garbage, seed=1)
    stage(sqlite_engine, [price_row("SKU-1", 1)])
    worker = make_worker(
        sqlite_url, sqlite_engine, sim.url, retry_base_delay=0.5, retry_max_delay=60
    )
    run(worker, lambda w: w.cycle())
    delayed = message(sqlite_engine, "price", "SKU-1", 1)
    # The first retry's delay is the one to judge: a pause longer than it inside the cycle (a
    # full garbage collection of the test process took 0.2-0.3 s) makes the message due again,
    # and the cycle may try it once more (worker.TRIES_PER_CYCLE), with a second delay.
    scheduled = events(sqlite_engine, delayed["id"], "retry-scheduled")[0]
    assert "delayed" == delayed["state"]
    assert 0 <= scheduled["delay_s"] <= 0.5  # full jitter below the first attempt's ceiling


# -- a long outage with a poison message in it ------------------------------------------------


def test_a_long_outage_with_a_poison_message_ends_with_the_healthy_delivered_and_only_the_poison_quarantined(  # noqa: E501
    sqlite_url: str, sqlite_engine: Engine, sim: SiteSimulator
) -> None:
    sim.faults.outage = True
    sim.faults.poison = {"SKU-P"}
    healthy = [price_row(f"SKU-{n}", 1) for n in range(12)]
    postings = [posting_row("DOC-1", v) for v in (1, 2, 3)]
    stage(sqlite_engine, [price_row("SKU-P", 1), *healthy, *postings])
    worker = make_worker(sqlite_url, sqlite_engine, sim.url, max_attempts=3, breaker_threshold=3)

    async def outage_then_recovery(w: Worker) -> None:
        # 60 cycles: many times max_attempts x the largest backoff (3 x 10 ms)
        for _ in range(60):
            await w.cycle()
            await asyncio.sleep(0.005)
        assert "quarantined" not in all_states(sqlite_engine).values(), "the outage quarantined"
        sim.faults.outage = False
        await drain(w)

    run(worker, outage_then_recovery)
    states = all_states(sqlite_engine)
    poison = message(sqlite_engine, "price", "SKU-P", 1)
    assert ("quarantined", "retry-limit", 3, 500) == (
        poison["state"],
        poison["reason"],
        poison["attempts"],
        poison["last_status"],
    )
    del states["SKU-P"]
    assert {"delivered"} == set(states.values())
    assert [1, 2, 3] == sim.applied_versions("financial_posting", "DOC-1")
    assert 15 == len(sim.effects())
    assert {1} == set(sim.effect_counts().values())
