"""A model-based test of the whole pipeline (hypothesis stateful): any interleaving of 1C
writes, site answers, clock jumps, worker cycles, crashes, restarts and operator actions keeps
the contract's promises after every single step.

The world: one SQLite database shared by three workers (their own ``Worker`` objects and worker
ids), one ``FakeClock`` that moves only when a rule says so or a worker waits out its
site's hold (``FakeMonotonic``: no real sleep), and ``ModelSite``, an in-process
site with the contract's idempotency semantics behind ``httpx.MockTransport`` whose next answers
the rules choose (every class of contract 5). A worker "crashes" by claiming a batch (and maybe
sending it) and never recording the outcome; its lease must expire before anyone else sends
that aggregate, and its late record must change nothing.

Invariants checked after every step (``every_promise_holds``):
- every taken staging row ended as exactly one outcome, the one 1C's rows call for: a message
  (first row of a version), a duplicate (same payload again) or a ``version-conflict`` record;
- the site never saw two effects for one message_id, and no request for a message the service
  had already recorded ``delivered``; the payload it received is the staged one, to the digit;
- the version the site holds for each (kind, aggregate) never decreases;
- postings reach the site in strictly increasing order, with no version skipped unless an
  operator cancelled it; a delivered posting was applied at the site;
- attempts <= max_attempts; at most one message per aggregate is in flight under a live lease;
- every message's history is an unbroken chain of transitions ending in its current state, and
  a delivered or cancelled message never changes again;
- a price aggregate's cursor (``done_version``) never runs ahead of the version the site holds;
- every accepted message is one delivery on the one channel, every aggregate has its cursor
  there, every delivery's history names it (``every_message_is_its_delivery``);
- checked as each request arrives: no price at or below its aggregate's delivered version
  (``done_version``) is ever sent. Run twice: against a site that also refuses old versions
  (409), and against one that only de-duplicates keys (``KeysOnlyPipeline``), where an old
  price sent after a newer one would be applied.
The ``heal_and_drain`` rule also checks liveness: once the site behaves and time passes, the
service becomes idle (nothing left that it could move without a person). It found a posting
that waited forever: version 1 never came, version 2 was quarantined for the gap and cancelled
by an operator, and version 3 was then neither sent nor quarantined (fixed in
``coalesce.quarantine_gaps``; ``tests/queue/test_coalesce.py`` keeps the minimal case).

Budget: EXCHANGE_MODEL_EXAMPLES (default 30) and EXCHANGE_MODEL_STEPS (default 30). A long run:
``EXCHANGE_MODEL_EXAMPLES=2000 EXCHANGE_MODEL_STEPS=60 pytest tests/integration/test_model.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import mirror
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import make_engine, transaction
from exchange.db.schema import history, staging
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.sitemodel import SiteModel
from exchange.dev.testing import fast_settings, one_channel_aggregates, one_channel_messages, stage
from exchange.domain.clock import FakeClock, FakeMonotonic
from exchange.domain.identity import message_id
from exchange.domain.retry import Decision
from exchange.errors import OperatorError
from exchange.intake import staging_table as intake
from exchange.ops import quarantine
from exchange.queue import coalesce, lease, record
from exchange.settings import Settings
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

EXAMPLES = int(os.environ.get("EXCHANGE_MODEL_EXAMPLES", "30"))
STEPS = int(os.environ.get("EXCHANGE_MODEL_STEPS", "30"))

SKUS = ("S1", "S2", "S3")
DOCS = ("D1", "D2")
WORKERS = 3
MAX_ATTEMPTS = 3
LEASE_S = 30.0
GAP_TIMEOUT_S = 120.0
RETRY_MAX_S = 60.0
POSTING = "financial_posting"

# One entry per request the site receives (then "ok"). "read-timeout": the effect is applied,
# the answer lost; "connect-error": nothing reached the site; "unreadable": applied, but the
# body arrives broken.
FAULTS = (
    "ok",
    "409-processing",
    "400",
    "404",
    "422",
    "401",
    "403",
    "429",
    "500",
    "503",
    "connect-error",
    "read-timeout",
    "302",
    "unreadable",
)
# past a retry, past a lease, past the longest retry delay, past the gap timeout
# One 1C write: (aggregate, what kind of version, price or amount in cents, which earlier row).
WRITE = st.tuples(
    st.sampled_from(SKUS + DOCS),
    st.sampled_from(["next", "next", "gap", "late", "duplicate", "conflict"]),
    st.integers(1, 99_999),
    st.integers(0, 50),
)
CLOCK_STEPS = (1.0, 8.0, LEASE_S + 1, RETRY_MAX_S + 1, GAP_TIMEOUT_S + 1)


class ModelSite:
    """The site's promises (contract 5) in memory, with answers chosen by the test.

    ``check_versions=False``: a site that keeps only the idempotency promise (no 409 for an old
    version: it applies whatever arrives). Against it, nothing but the service stands between
    an old price and the shop. Either way, every request is checked as it arrives against the
    service's database: no latest-wins version at or below its aggregate's delivered version
    (``done_version``) is ever sent (contract 3, at the moment of the claim).
    """

    def __init__(self, check_versions: bool = True) -> None:
        self.check_versions = check_versions
        # The site's answers come from the one site model of the shop API's fakes (keys,
        # versions, the body's rules), as FakeSite's, sitesim's and fastsite's do.
        self.model = SiteModel(check_versions=check_versions)
        self.engine: Engine | None = None  # the service's database, to read done_version
        self.faults: list[str] = []
        self.expected: dict[str, Any] = {}  # message_id -> the payload 1C staged for it
        self.delivered: set[str] = set()  # what the service has recorded as delivered
        self.violations: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/health"):
            return httpx.Response(200, json={"status": "ok"})
        body = json.loads(request.content, parse_float=Decimal)
        key = request.headers["Idempotency-Key"]
        if key != body["message_id"]:
            self.violations.append(f"Idempotency-Key {key} differs from {body['message_id']}")
        if key in self.delivered:
            self.violations.append(f"{key} was sent again after it was recorded delivered")
        if key in self.expected and exact(body["payload"]) != self.expected[key]:
            self.violations.append(f"{key}: sent {body['payload']}, staged {self.expected[key]}")
        if body["kind"] == "price":
            delivered = self._delivered_version(body["aggregate"])
            if body["version"] <= delivered:
                self.violations.append(
                    f"{key} sent at or below version {delivered}, already delivered"
                )
        fault = self.faults.pop(0) if self.faults else "ok"
        if fault == "connect-error":
            raise httpx.ConnectError("connection refused", request=request)
        if fault in ("400", "404", "422", "401", "403", "500", "503"):
            return httpx.Response(int(fault), json={"error": f"fault {fault}"})
        if fault == "429":
            return httpx.Response(429, headers={"Retry-After": "7"}, json={"error": "slow down"})
        if fault == "409-processing":
            return httpx.Response(409, json={"error": "processing"})
        if fault == "302":
            return httpx.Response(302, headers={"Location": "/elsewhere"})
        answer = self.model.single(request.content, key).reply
        status, content = answer.status, answer.body
        if fault == "read-timeout":
            raise httpx.ReadTimeout("the answer was lost", request=request)
        if fault == "unreadable":
            return httpx.Response(
                status,
                stream=httpx.ByteStream(b"\x00garbage"),
                headers={"Content-Encoding": "gzip"},
            )
        return httpx.Response(status, content=content)

    def _delivered_version(self, aggregate: str) -> int:
        assert self.engine is not None
        with transaction(self.engine, read_only=True) as connection:
            done = connection.execute(
                select(aggregates.c.done_version).where(
                    aggregates.c.kind == "price", aggregates.c.aggregate == aggregate
                )
            ).scalar()
        return int(done or 0)

    @property
    def held(self) -> dict[tuple[str, str], int]:
        """What the site shows: the last version applied (the model's own dict: a rule may set
        it, as someone editing a price on the site itself)."""
        return self.model.held

    @property
    def top(self) -> dict[tuple[str, str], int]:
        """The highest version applied (the model's own dict)."""
        return self.model.top

    @property
    def applied(self) -> dict[tuple[str, str], list[int]]:
        applied: dict[tuple[str, str], list[int]] = {}
        for effect in self.model.effects:
            applied.setdefault((effect.kind, effect.aggregate), []).append(effect.version)
        return applied

    @property
    def effects(self) -> Counter[str]:
        return self.model.effect_counts


@dataclass
class Staged:
    kind: str
    aggregate: str
    version: int
    payload: dict[str, Any]
    outcome: str  # what intake must make of it: message, duplicate, version-conflict


def price_payload(sku: str, cents: int) -> dict[str, Any]:
    return {"sku": sku, "price": f"{cents // 100}.{cents % 100:02d}", "currency": "RUB"}


def posting_payload(doc: str, version: int, cents: int) -> dict[str, Any]:
    return {
        "document": doc,
        "line": version,
        "amount": Decimal(f"{cents // 100}.{cents % 100:02d}"),
    }


def canonical(kind: str, payload: dict[str, Any]) -> Any:
    """The payload as the site must receive it (prices: defaults filled in), decimals exact."""
    if kind == "price":
        payload = {"price_type": "retail", **payload}
    return exact(payload)


def exact(value: Any) -> Any:
    """A JSON value with every decimal as its digits: 12.30 and 12.3 differ here."""
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, Decimal):
        return f"decimal {value}"
    return value


def dumps(payload: dict[str, Any], *, reverse: bool = False) -> str:
    """1C's JSON: amounts as JSON numbers with their exact digits, keys in 1C's order."""
    items = list(payload.items())
    if reverse:
        items.reverse()
    parts = []
    for key, value in items:
        text = str(value) if isinstance(value, Decimal) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{json.dumps(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def model_settings(url: str, worker_id: str) -> Settings:
    base = fast_settings(
        url,
        "https://site.test",
        batch_size=3,
        concurrency=2,
        lease_seconds=LEASE_S,
        max_attempts=MAX_ATTEMPTS,
        retry_base_delay=1.0,
        retry_max_delay=RETRY_MAX_S,
        gap_timeout=GAP_TIMEOUT_S,
        breaker_threshold=2,
    )
    return base.model_copy(update={"worker_id": worker_id})


EXAMPLE_NUMBERS = itertools.count()
TEMPLATE: dict[str, Path] = {}  # the migrated database each example starts from a copy of


class Pipeline(RuleBasedStateMachine):
    CHECK_VERSIONS = True  # the site's 409 for old versions; KeysOnlyPipeline: none

    def __init__(self) -> None:
        super().__init__()
        template = TEMPLATE["path"]
        self.dir = template.parent / f"example-{next(EXAMPLE_NUMBERS)}"
        self.dir.mkdir()
        shutil.copy(template, self.dir / "exchange.db")
        self.url = f"sqlite:///{self.dir / 'exchange.db'}"
        self.engine: Engine = make_engine(self.url)
        self.clock = FakeClock()
        # The model's world has one time: the workers' monotonic clock is the FakeClock's
        # (a rule that lets time pass lets the pace's holds pass too), and a request that
        # waits out a hold (a 429's Retry-After of 7 s, the growing holds of 503s) moves the
        # FakeClock on at once instead of sleeping: most of this test's wall time went to
        # such sleeps, none to checks.
        self.monotonic = FakeMonotonic(self.clock)
        self.site = ModelSite(self.CHECK_VERSIONS)
        self.site.engine = self.engine
        self.loop = asyncio.new_event_loop()
        self.restarts = 0
        self.workers = [self._start(f"w{i}") for i in range(WORKERS)]
        # a batch claimed (and maybe sent) whose outcome is not recorded yet, per worker
        self.pending: dict[int, tuple[lease.Batch, list[tuple[lease.Leased, Decision]]]] = {}
        self.staged: list[Staged] = []
        self.first: dict[tuple[str, str, int], Any] = {}
        self.held_before: dict[tuple[str, str], int] = {}
        self.final: dict[str, str] = {}

    def _start(self, worker_id: str) -> Worker:
        return bootstrap.worker(
            model_settings(self.url, worker_id),
            self.engine,
            clock=self.clock,
            transport=httpx.MockTransport(self.site),
            rng=random.Random(worker_id),
            monotonic=self.monotonic,
        )

    def teardown(self) -> None:
        for worker in self.workers:
            self.loop.run_until_complete(worker.target.aclose())
        self.loop.close()
        self.engine.dispose()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- 1C writes ---------------------------------------------------------------------------

    def _stage(
        self,
        kind: str,
        aggregate: str,
        version: int,
        payload: dict[str, Any],
        *,
        reverse: bool = False,
    ) -> None:
        key = (kind, aggregate, version)
        shown = canonical(kind, payload)
        if key not in self.first:
            self.first[key] = shown
            self.site.expected[message_id(*key)] = shown
            outcome = "message"
        else:
            outcome = "duplicate" if self.first[key] == shown else "version-conflict"
        self.staged.append(Staged(kind, aggregate, version, payload, outcome))
        row = {
            "kind": kind,
            "aggregate": aggregate,
            "aggregate_version": version,
            "payload": dumps(payload, reverse=reverse),
            "schema_version": "1",
            "source_ref": f"Документ {aggregate} v{version}",
        }
        stage(self.engine, [row])

    def _versions(self, kind: str, aggregate: str) -> list[int]:
        return sorted(
            {s.version for s in self.staged if (s.kind, s.aggregate) == (kind, aggregate)}
        )

    def _restage(self, kind: str, aggregate: str, pick: int, conflict: bool) -> bool:
        seen = [s for s in self.staged if (s.kind, s.aggregate) == (kind, aggregate)]
        if not seen:
            return False
        old = seen[pick % len(seen)]
        payload = dict(old.payload)
        if conflict:
            field = "price" if kind == "price" else "amount"
            bumped = Decimal(str(payload[field])) + Decimal("0.01")
            payload[field] = f"{bumped:.2f}" if kind == "price" else bumped
        self._stage(kind, aggregate, old.version, payload, reverse=not conflict)
        return True

    def _price(self, sku: str, mode: str, cents: int, pick: int) -> None:
        if mode in ("duplicate", "conflict") and self._restage(
            "price", sku, pick, mode == "conflict"
        ):
            return
        versions = self._versions("price", sku)
        top = max(versions, default=0)
        missing = [v for v in range(1, top) if v not in versions]
        if mode == "late" and missing:  # late, and stale when a higher one is delivered
            version = missing[pick % len(missing)]
        else:
            version = top + (2 if mode == "gap" else 1)
        self._stage("price", sku, version, price_payload(sku, cents))

    def _posting(self, doc: str, mode: str, cents: int, pick: int) -> None:
        if mode in ("duplicate", "conflict") and self._restage(
            POSTING, doc, pick, mode == "conflict"
        ):
            return
        versions = self._versions(POSTING, doc)
        top = max(versions, default=0)
        missing = [v for v in range(1, top) if v not in versions]
        if mode == "late" and missing:  # the posting that fills a gap
            version = missing[0]
        else:
            version = top + (2 if mode == "gap" else 1)
        self._stage(POSTING, doc, version, posting_payload(doc, version, cents))

    @initialize(writes=st.lists(WRITE, min_size=1, max_size=8))
    def one_c_has_written(self, writes: list[tuple[str, str, int, int]]) -> None:
        """Rows already waiting when the service starts."""
        self.one_c_writes(writes)

    @rule(writes=st.lists(WRITE, min_size=1, max_size=4))
    def one_c_writes(self, writes: list[tuple[str, str, int, int]]) -> None:
        """New versions, a gap, a late (or stale) version, duplicates, conflicting payloads."""
        for aggregate, mode, cents, pick in writes:
            if aggregate in SKUS:
                self._price(aggregate, mode, cents, pick)
            else:
                self._posting(aggregate, mode, cents, pick)

    # -- the site and the clock ------------------------------------------------------------------

    @rule(faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=4))
    def site_answers_next(self, faults: list[str]) -> None:
        self.site.faults.extend(faults)

    @precondition(lambda self: self.site.check_versions)
    @rule()
    def site_forgets_idempotency_keys(self) -> None:
        """Keys expire at the site: a replay is then answered by the version it holds (409)."""
        self.site.model.forget_keys()

    @precondition(lambda self: self.site.check_versions)
    @rule(sku=st.sampled_from(SKUS))
    def site_price_changed_elsewhere(self, sku: str) -> None:
        """Someone sets a price on the site itself, ahead of 1C's versions: 409 stale, greater."""
        aggregate = ("price", sku)
        top = max(self._versions("price", sku), default=0)
        self.site.held[aggregate] = max(self.site.held.get(aggregate, 0), top) + 1
        self.site.top[aggregate] = max(self.site.top.get(aggregate, 0), self.site.held[aggregate])

    @rule(seconds=st.sampled_from(CLOCK_STEPS), writes=st.lists(WRITE, max_size=2))
    def time_passes(self, seconds: float, writes: list[tuple[str, str, int, int]]) -> None:
        """Time passes, and 1C may write meanwhile (writes are the heart of the model: Hypothesis
        picks among many rules, and this one is picked often)."""
        self.one_c_writes(writes)
        self.clock.advance(seconds)

    # -- workers -----------------------------------------------------------------------------

    def _record(self, index: int) -> int:
        batch, outcomes = self.pending.pop(index)
        worker = self.workers[index]
        with transaction(self.engine) as connection:
            return record.record(
                connection,
                token=batch.token,
                worker=worker.worker_id,
                now=self.clock.now(),
                outcomes=outcomes,
                kinds=worker.kinds,
            )

    @rule(index=st.integers(0, WORKERS - 1))
    def run_cycle(self, index: int) -> None:
        """A worker in the middle of a batch finishes it (records); otherwise runs a cycle."""
        if index in self.pending:
            self._record(index)
            return
        self.loop.run_until_complete(self.workers[index].cycle())

    @rule(index=st.integers(0, WORKERS - 1))
    def run_cycle_too(self, index: int) -> None:
        """(Cycles are the main event: a second rule makes them as likely as the rest.)"""
        self.run_cycle(index)

    @rule(index=st.integers(0, WORKERS - 1), send=st.booleans())
    def claim_and_stall(self, index: int, send: bool) -> None:
        """A worker claims a batch and sends it (or not), and has not recorded anything yet."""
        if index in self.pending:
            return
        worker = self.workers[index]
        with transaction(self.engine) as connection:
            batch = lease.claim(
                connection,
                worker=worker.worker_id,
                now=self.clock.now(),
                limit=worker.settings.batch_size,
                lease_seconds=worker.settings.lease_seconds,
                kinds=worker.kinds,
                max_attempts=worker.settings.max_attempts,
            )
        if not batch.messages:
            return
        if not send:
            self.pending[index] = (batch, [])
            return
        outcomes = self.loop.run_until_complete(worker._deliver(batch))
        self.pending[index] = (batch, outcomes)

    def _claim(self, index: int) -> lease.Batch:
        worker = self.workers[index]
        with transaction(self.engine) as connection:
            return lease.claim(
                connection,
                worker=worker.worker_id,
                now=self.clock.now(),
                limit=worker.settings.batch_size,
                lease_seconds=worker.settings.lease_seconds,
                kinds=worker.kinds,
                max_attempts=worker.settings.max_attempts,
            )

    @rule(
        index=st.integers(0, WORKERS - 1),
        other=st.integers(0, WORKERS - 1),
        answer=st.sampled_from(["503", "429", "read-timeout", "ok"]),
        seconds=st.sampled_from([0.0, 1.0, 8.0]),
        rounds=st.integers(1, 3),
    )
    def newer_version_staged_while_in_flight(
        self, index: int, other: int, answer: str, seconds: float, rounds: int
    ) -> None:
        """Issue 12: a worker starts a cycle and sends a batch; while the answers are out, 1C
        writes the next version of each price in flight and another worker runs a cycle
        (intake, coalescing: the versions in flight are not pending, so nothing is cancelled).
        The first worker records (the site answered ``answer``), time passes, and it goes on
        claiming, sending and recording as its cycle's loop does: without coalescing."""
        if index in self.pending or other in self.pending or index == other:
            return
        worker = self.workers[index]
        intake.take(self.engine, None, worker.settings.kinds, self.clock.now())
        with transaction(self.engine) as connection:  # the start of its cycle
            coalesce.coalesce(connection, worker.kinds, self.clock.now())
        batch = self._claim(index)
        if not batch.messages:
            return
        for leased in batch.messages:
            if leased.kind == "price":
                self._price(leased.aggregate, "next", 100 + leased.version, 0)
        self.loop.run_until_complete(self.workers[other].cycle())
        self.site.faults[:0] = [answer] * len(batch.messages)
        outcomes = self.loop.run_until_complete(self.workers[index]._deliver(batch))
        self.pending[index] = (batch, outcomes)
        self._record(index)
        self.clock.advance(seconds)
        for _ in range(rounds):
            batch = self._claim(index)
            if not batch.messages:
                return
            outcomes = self.loop.run_until_complete(self.workers[index]._deliver(batch))
            self.pending[index] = (batch, outcomes)
            self._record(index)

    @rule(index=st.integers(0, WORKERS - 1))
    def crash_and_restart(self, index: int) -> None:
        """The worker dies (its batch unrecorded, its lease left to expire) and a new one starts."""
        self.pending.pop(index, None)
        self.loop.run_until_complete(self.workers[index].target.aclose())
        self.restarts += 1
        self.workers[index] = self._start(f"w{index}-restart{self.restarts}")

    # -- operators --------------------------------------------------------------------------

    def _quarantined(self) -> list[dict[str, Any]]:
        with transaction(self.engine, read_only=True) as connection:
            return quarantine.list_quarantined(connection, quarantine.Filters())

    @rule(pick=st.integers(0, 50))
    def operator_retries(self, pick: int) -> None:
        found = self._quarantined()
        if not found:
            return
        chosen = found[pick % len(found)]
        try:
            with transaction(self.engine) as connection:
                quarantine.retry(
                    connection,
                    [chosen["message_id"]],
                    quarantine.Filters(),
                    operator="operator",
                    note="model retry",
                    now=self.clock.now(),
                    dry_run=False,
                )
        except OperatorError:
            assert chosen["rejected_row"], f"retry of {chosen['message_id']} was refused"

    @rule(pick=st.integers(0, 50))
    def operator_cancels(self, pick: int) -> None:
        found = self._quarantined()
        if not found:
            return
        chosen = found[pick % len(found)]
        with transaction(self.engine) as connection:
            quarantine.cancel(
                connection,
                [chosen["message_id"]],
                operator="operator",
                note="model cancel",
                now=self.clock.now(),
                kinds=self.workers[0].kinds,
            )

    @rule()
    def heal_and_drain(self) -> None:
        """Liveness: once the site behaves and time passes, the service runs out of work."""
        self.site.faults.clear()
        worker = self.workers[0]
        for _ in range(15):
            self.clock.advance(GAP_TIMEOUT_S + RETRY_MAX_S + LEASE_S)
            self.loop.run_until_complete(worker.cycle())
            if worker.idle():
                return
        raise AssertionError("the service did not become idle with a healthy site")

    # -- the promises -------------------------------------------------------------------------

    @invariant()
    def every_message_is_its_delivery(self) -> None:
        """Issue 31: every accepted message is one delivery on the one channel, every
        aggregate has its cursor there (``tests/support/mirror.py``)."""
        with transaction(self.engine, read_only=True) as connection:
            found = mirror.differences(connection)
        assert found == [], "\n".join(found)

    @invariant()
    def every_promise_holds(self) -> None:
        now = self.clock.now()
        with transaction(self.engine, read_only=True) as connection:
            rows = connection.execute(
                select(staging.c.id, staging.c.taken_at).order_by(staging.c.id)
            ).all()
            found = list(connection.execute(select(messages)).mappings())
            events = list(connection.execute(select(history).order_by(history.c.id)).mappings())
            done = connection.execute(
                select(aggregates.c.kind, aggregates.c.aggregate, aggregates.c.done_version)
            ).all()
        self._outcomes(rows, found, events)
        self._site(found)
        self._messages(found, events, now)
        for kind, aggregate, version in done:
            # latest-wins: the cursor is a version the site confirmed (none: no cursor on the
            # channel yet, as before 0026 its copy's 0)
            if kind == "price" and version is not None:
                assert version <= self.site.top.get((kind, aggregate), 0), (aggregate, version)

    def _outcomes(self, rows: Any, found: list[Any], events: list[Any]) -> None:
        assert len(rows) == len(self.staged)
        made = {m["staging_id"]: m for m in found}
        duplicates = Counter(
            int(e["detail"].split("#", 1)[1].split()[0])
            for e in events
            if e["event"] == "duplicate"
        )
        for (staging_id, taken_at), staged in zip(rows, self.staged, strict=True):
            count = int(staging_id in made) + duplicates[staging_id]
            if taken_at is None:
                assert 0 == count, f"untaken row #{staging_id} already has an outcome"
                continue
            assert 1 == count, f"row #{staging_id} ({staged}) has {count} outcomes"
            if staged.outcome == "duplicate":
                assert 1 == duplicates[staging_id], staged
            else:
                record = made[staging_id]
                rejected = staged.outcome == "version-conflict"
                assert rejected == record["rejected"], (staged, dict(record))
                if rejected and record["state"] == "quarantined":
                    assert "version-conflict" == record["reason"], dict(record)

    def _site(self, found: list[Any]) -> None:
        site = self.site
        assert [] == site.violations
        assert set() == {key for key, n in site.effects.items() if n > 1}, "two effects"
        for aggregate, version in site.held.items():
            # A site without a version check shows the last version applied, which may go back
            # without the service breaking a promise: a version applied (its answer lost),
            # quarantined and cancelled by an operator is not delivered, and a lower one may
            # follow. What the service promises is checked as each request arrives (ModelSite).
            if site.check_versions or aggregate[0] == POSTING:
                assert version >= self.held_before.get(aggregate, 0), f"{aggregate} went back"
        self.held_before = dict(site.held)
        by_version = {
            (m["kind"], m["aggregate"], m["version"]): m for m in found if not m["rejected"]
        }
        for aggregate, applied in site.applied.items():
            if site.check_versions or aggregate[0] == POSTING:
                assert applied == sorted(set(applied)), f"{aggregate} out of order: {applied}"
            if aggregate[0] != POSTING:
                continue
            for version in range(1, applied[-1]):
                if version in applied:
                    continue
                skipped = by_version.get((*aggregate, version))
                assert skipped is not None and (skipped["state"], skipped["reason"]) == (
                    "cancelled",
                    "operator",
                ), f"{aggregate}: version {version} skipped, applied {applied}"
        for m in found:
            if m["state"] != "delivered":
                continue
            site.delivered.add(m["message_id"])
            aggregate = (m["kind"], m["aggregate"])
            assert site.top.get(aggregate, 0) >= m["version"], f"{m['message_id']} not at site"
            if m["kind"] == POSTING:
                assert m["version"] in site.applied.get(aggregate, []), m["message_id"]

    def _messages(self, found: list[Any], events: list[Any], now: datetime) -> None:
        by_pk: dict[int, list[Any]] = {}
        for event in events:
            by_pk.setdefault(event["message_pk"], []).append(event)
        live: Counter[int] = Counter()
        for m in found:
            assert m["attempts"] <= MAX_ATTEMPTS, dict(m)
            if m["state"] == "in_progress" and m["locked_until"] > now:
                live[m["aggregate_id"]] += 1
            chain = by_pk.get(m["id"], [])
            assert chain and chain[0]["event"] in ("taken", "rejected"), m["message_id"]
            state = None
            for event in chain:
                if event["event"] == "duplicate":
                    continue
                if _leased_then(state, event["from_state"], event["leased_at"]):
                    state = "in_progress"  # the claim's move is in the attempt's own row
                assert state == event["from_state"], (m["message_id"], [dict(e) for e in chain])
                state = event["to_state"]
            if _leased_then(state, m["state"], m["leased_at"]):
                state = "in_progress"  # an attempt in flight: its row comes with its outcome
            assert state == m["state"], (m["message_id"], m["state"], [e["event"] for e in chain])
            before = self.final.get(m["message_id"])
            assert before in (None, m["state"]), f"{m['message_id']} left {before}"
            if m["state"] in ("delivered", "cancelled"):
                self.final[m["message_id"]] = m["state"]
        assert {} == {a: n for a, n in live.items() if n > 1}, (
            "two messages of one aggregate in flight"
        )


def _leased_then(state: str | None, now: str | None, leased_at: datetime | None) -> bool:
    """A claim writes no history row (issue 13: one row per attempt): a message waiting
    (``new``/``delayed``) is next seen ``in_progress`` only with the attempt's lease start."""
    return state in ("new", "delayed") and now == "in_progress" and leased_at is not None


class KeysOnlyPipeline(Pipeline):
    """The same world against a site that only de-duplicates keys (issue 12): an old price the
    service sends after a newer one was delivered is applied there, and the check as each
    request arrives catches it."""

    CHECK_VERSIONS = False


# At CI's 30 examples (--hypothesis-seed=1, a 2-core machine loaded about 6): 22 s (versioned)
# and 16 s (keys-only); 133 s and 29 s while the workers slept out their site's holds for
# real (132 s of the run spent waiting), before FakeMonotonic.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("machine", [Pipeline, KeysOnlyPipeline], ids=["versioned", "keys-only"])
def test_any_interleaving_of_writes_faults_crashes_and_operators_keeps_every_promise(
    tmp_path: Path, machine: type[Pipeline]
) -> None:
    template = tmp_path / "template.db"
    sqlite_copy(template)
    TEMPLATE["path"] = template
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
