"""One conformance table for the shop API's three fakes (contract 5, 5b).

The in-process ``FakeSite`` (an httpx transport), the HTTP simulator ``exchange.dev.sitesim``
and the benchmark's ``bench/fastsite.py`` (its own process) are three front ends of one site
model (``exchange.dev.sitemodel``). Each case below is a short conversation with a site, written
from the contract, not from our client: what it sends, what the site must answer, and how many
effects the site may have applied at the end. Every case runs on all three front ends.

Where the contract leaves the site's answer open, the model's choice (documented in
``exchange/dev/sitemodel.py``) is what the table expects: 400 for a request that is not an update
(bad JSON, envelope, key), 422 for a payload that breaks the rules of contract 1 and for a key
reused with another body, 404 ``unknown-sku`` for a SKU the site's catalogue does not hold.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import FakeSite

TOKEN = "conformance-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
UPDATES = "/api/v1/updates"
BATCH = "/api/v1/updates:batch"
HEALTH = "/api/v1/health"
FASTSITE = Path(__file__).resolve().parents[2] / "bench" / "fastsite.py"
CREATED = "2026-08-23T07:20:00Z"


# -- bodies, written as a client writes them (the payload spliced in as JSON text) -----------


def price(
    sku: str = "SKU-1", amount: str = '"840.00"', *, currency: str = '"RUB"', extra: str = ""
) -> str:
    """A price payload, schema 1; ``amount`` is JSON text (a string or a number)."""
    return (
        f'{{"sku": {json.dumps(sku)}, "price": {amount}, "currency": {currency}, '
        f'"price_type": "retail"{extra}}}'
    )


def update(
    aggregate: str = "SKU-1",
    version: int = 1,
    payload: str | None = None,
    *,
    kind: str = "price",
    message_id: str | None = None,
    created_at: str | None = json.dumps(CREATED),
    version_text: str | None = None,
) -> str:
    """One update body (contract 5): ``created_at`` is JSON text, None leaves it out."""
    message_id = message_id or f"{kind}.{aggregate}.v{version}"
    payload = payload if payload is not None else price(aggregate)
    text = (
        f'{{"message_id": {json.dumps(message_id)}, "kind": {json.dumps(kind)}, '
        f'"aggregate": {json.dumps(aggregate)}, "version": {version_text or version}, '
        f'"payload": {payload}'
    )
    if created_at is not None:
        text += f', "created_at": {created_at}'
    return text + "}"


def batch_of(*items: str) -> str:
    return '{"items": [' + ", ".join(items) + "]}"


# -- the table ---------------------------------------------------------------------------------

FROM_BODY = "from-body"  # the Idempotency-Key: the body's message_id
RECEIPT = "a receipt"  # the answer must be {"receipt": <a non-empty string>}


@dataclass(frozen=True)
class Step:
    body: str
    status: int
    answer: Any = None  # the whole JSON answer expected; RECEIPT; None: not checked
    path: str = UPDATES
    key: str | None = FROM_BODY  # None: no Idempotency-Key header
    token: str | None = TOKEN  # None: no Authorization header
    same_as: int | None = None  # the answer's bytes equal those of step N (0-based)
    # A batch: (message_id, status, body or RECEIPT or None) per item, in order.
    results: tuple[tuple[str | None, int, Any], ...] | None = None


@dataclass(frozen=True)
class Config:
    batch: bool = True
    catalog: frozenset[str] | None = None  # None: the site has every SKU


@dataclass(frozen=True)
class Case:
    id: str
    steps: tuple[Step, ...]
    effects: int  # effects the site applied once every step was answered
    config: Config = field(default_factory=Config)


def ok(body: str, **kw: Any) -> Step:
    return Step(body, 200, RECEIPT, **kw)


def replay(body: str, of: int) -> Step:
    return Step(body, 200, RECEIPT, same_as=of)


def reuse(body: str) -> Step:
    return Step(body, 422, {"error": "idempotency-key-reuse"})


def stale(body: str, current: int) -> Step:
    return Step(body, 409, {"error": "stale", "current_version": current})


def bad(body: str, **kw: Any) -> Step:
    return Step(body, 400, **kw)


def invalid(body: str) -> Step:
    return Step(body, 422)


def price_is(amount: str, sku: str = "SKU-1") -> str:
    return update(sku, 1, price(sku, amount))


def price_cases() -> list[Case]:
    """Contract 1's price: a decimal in plain notation (a string or a JSON number), finite,
    0 <= price < 10^12, at most 4 decimal places."""
    refused_strings = {
        "nan-string": '"NaN"',
        "infinity-string": '"Infinity"',
        "negative-string": '"-1.00"',
        "five-decimals-string": '"1.00001"',
        "exponent-string": '"1E+3"',
        "too-large-string": '"1000000000000"',
        "spaces-string": '" 1.00"',
        "plus-string": '"+1.00"',
        "comma-string": '"1,00"',
        "empty-string": '""',
    }
    refused_numbers = {
        "negative-number": "-1",
        "five-decimals-number": "1.00001",
        "exponent-number": "1e3",
        "too-large-number": "1000000000000",
        "true": "true",
        "null": "null",
        "object": '{"amount": 1}',
    }
    cases = [
        Case(f"price-{name}-is-422", (invalid(price_is(text)),), 0)
        for name, text in {**refused_strings, **refused_numbers}.items()
    ]
    # Not JSON at all (JSON has no NaN or Infinity): the request is unreadable, 400.
    cases += [
        Case(f"price-{name}-literal-is-400", (bad(price_is(text)),), 0)
        for name, text in {
            "nan": "NaN",
            "infinity": "Infinity",
            "minus-infinity": "-Infinity",
        }.items()
    ]
    accepted = {
        "zero": '"0"',
        "four-decimals": '"0.0001"',
        "largest": '"999999999999.9999"',
        "integer-number": "840",
        "decimal-number": "840.50",
    }
    cases += [
        Case(f"price-{name}-is-accepted", (ok(price_is(text)),), 1)
        for name, text in accepted.items()
    ]
    return cases


def payload_cases() -> list[Case]:
    """The other fields of contract 1's price: ``sku`` 1..100 characters, ``currency`` three
    upper-case letters (RUB when absent), ``price_type`` non-empty (retail when absent), and
    nothing else."""
    no_currency = '{"sku": "SKU-1", "price": "1.00", "price_type": "retail"}'
    return [
        Case("payload-empty-sku-is-422", (invalid(update("SKU-1", 1, price(""))),), 0),
        Case(
            "payload-sku-of-101-characters-is-422",
            (invalid(update("SKU-1", 1, price("S" * 101))),),
            0,
        ),
        Case(
            "payload-lower-case-currency-is-422",
            (invalid(update("SKU-1", 1, price(currency='"rub"'))),),
            0,
        ),
        Case(
            "payload-unknown-field-is-422",
            (invalid(update("SKU-1", 1, price(extra=', "colour": "red"'))),),
            0,
        ),
        Case("payload-missing-price-is-422", (invalid(update("SKU-1", 1, '{"sku": "SKU-1"}')),), 0),
        Case(
            "payload-empty-price-type-is-422",
            (invalid(update("SKU-1", 1, '{"sku": "SKU-1", "price": "1", "price_type": ""}')),),
            0,
        ),
        Case(
            "payload-without-currency-and-price-type-is-accepted",
            (
                ok(update("SKU-1", 1, no_currency)),
                ok(update("SKU-2", 1, '{"sku": "SKU-2", "price": "1"}')),
            ),
            2,
        ),
        Case(
            "payload-of-a-posting-is-any-object-with-exact-numbers",
            (
                ok(
                    update(
                        "DOC-1",
                        1,
                        '{"amount": 1e-2, "lines": [{"sum": -5}], "note": "NaN"}',
                        kind="financial_posting",
                    )
                ),
            ),
            1,
        ),
    ]


V1 = update("SKU-1", 1)
CASES: list[Case] = [
    # -- idempotency by message_id: the same key and the same body is the first answer again
    Case("accepted-update-is-200-with-a-receipt", (ok(V1),), 1),
    Case(
        "replay-same-key-same-body-is-the-first-answer-without-an-effect",
        (ok(V1), replay(V1, 0)),
        1,
    ),
    Case(
        "replay-price-string-1.0-then-1.00-is-the-same-payload",
        (ok(price_is('"1.0"')), replay(price_is('"1.00"'), 0)),
        1,
    ),
    Case(
        "replay-price-number-1.0-then-1.00-is-the-same-payload",
        (ok(price_is("1.0")), replay(price_is("1.00"), 0)),
        1,
    ),
    Case(
        "replay-price-string-then-number-of-equal-value-is-the-same-payload",
        (ok(price_is('"840.00"')), replay(price_is("840"), 0)),
        1,
    ),
    Case(
        "replay-posting-numbers-equal-as-decimals-are-the-same-payload",
        (
            ok(update("DOC-1", 1, '{"amount": 10.0}', kind="financial_posting")),
            replay(update("DOC-1", 1, '{"amount": 10.00}', kind="financial_posting"), 0),
        ),
        1,
    ),
    Case(
        "replay-ignores-key-order-and-whitespace",
        (
            ok(V1),
            replay(json.dumps(dict(reversed(list(json.loads(V1).items()))), indent=2), 0),
        ),
        1,
    ),
    Case(
        "replay-created-at-of-the-same-instant-is-the-same-body",
        (ok(V1), replay(update("SKU-1", 1, created_at='"2026-08-23T10:20:00+03:00"'), 0)),
        1,
    ),
    Case(
        "replay-after-the-aggregate-moved-on-is-still-the-first-answer",
        (ok(V1), ok(update("SKU-1", 2)), replay(V1, 0)),
        2,
    ),
    Case(
        "replay-of-a-key-first-answered-in-a-batch-is-that-answer",
        (
            Step(
                batch_of(V1), 200, path=BATCH, key=None, results=(("price.SKU-1.v1", 200, RECEIPT),)
            ),
            Step(V1, 200, RECEIPT),
        ),
        1,
    ),
    # -- the same message_id with another body: refused, nothing applied
    Case("reuse-other-price-is-422", (ok(V1), reuse(price_is('"840.01"'))), 1),
    Case(
        "reuse-other-created-at-is-422",
        (ok(V1), reuse(update("SKU-1", 1, created_at='"2026-08-23T07:20:01Z"'))),
        1,
    ),
    Case(
        "reuse-other-version-under-the-same-key-is-422",
        (ok(V1), reuse(update("SKU-1", 2, message_id="price.SKU-1.v1"))),
        1,
    ),
    Case(
        "reuse-posting-string-1.0-and-1.00-are-different-text",
        (
            ok(update("DOC-1", 1, '{"note": "1.0"}', kind="financial_posting")),
            reuse(update("DOC-1", 1, '{"note": "1.00"}', kind="financial_posting")),
        ),
        1,
    ),
    Case(
        "reuse-integer-and-true-are-different-values",
        (
            ok(update("DOC-1", 1, '{"flag": 1}', kind="financial_posting")),
            reuse(update("DOC-1", 1, '{"flag": true}', kind="financial_posting")),
        ),
        1,
    ),
    # -- versions: 409 stale at or below the version held, per (kind, aggregate)
    Case(
        "older-version-after-newer-is-409-stale",
        (ok(update("SKU-1", 5)), stale(update("SKU-1", 4), 5)),
        1,
    ),
    Case(
        "same-version-under-another-key-is-409-stale",
        (ok(update("SKU-1", 5)), stale(update("SKU-1", 5, message_id="other-key"), 5)),
        1,
    ),
    Case("newer-version-is-applied", (ok(update("SKU-1", 5)), ok(update("SKU-1", 6))), 2),
    Case(
        "stale-key-asked-again-is-409-again-without-an-effect",
        (ok(update("SKU-1", 5)), stale(update("SKU-1", 4), 5), stale(update("SKU-1", 4), 5)),
        1,
    ),
    Case(
        "versions-are-held-per-kind-and-aggregate",
        (
            ok(update("SKU-1", 5)),
            ok(update("SKU-2", 1)),
            ok(update("SKU-1", 1, '{"amount": "1"}', kind="financial_posting")),
            stale(
                update("SKU-1", 1, '{"amount": "1"}', kind="financial_posting", message_id="p2"), 1
            ),
        ),
        3,
    ),
    # -- created_at: an RFC 3339 timestamp with its offset
    Case("created-at-missing-is-400", (bad(update(created_at=None)),), 0),
    Case("created-at-not-a-time-is-400", (bad(update(created_at='"yesterday"')),), 0),
    Case("created-at-without-a-zone-is-400", (bad(update(created_at='"2026-08-23T07:20:00"')),), 0),
    Case("created-at-a-date-only-is-400", (bad(update(created_at='"2026-08-23"')),), 0),
    Case("created-at-a-number-is-400", (bad(update(created_at="1787469600")),), 0),
    Case(
        "created-at-impossible-date-is-400", (bad(update(created_at='"2026-02-30T07:20:00Z"')),), 0
    ),
    Case(
        "created-at-with-an-offset-is-accepted",
        (ok(update(created_at='"2026-08-23T10:20:00+03:00"')),),
        1,
    ),
    Case(
        "created-at-with-fractions-is-accepted",
        (ok(update(created_at='"2026-08-23T07:20:00.250Z"')),),
        1,
    ),
    *price_cases(),
    *payload_cases(),
    # -- unknown SKU: a site with a catalogue refuses a price for a SKU it does not have
    Case(
        "unknown-sku-is-404-and-a-known-one-is-applied",
        (
            Step(update("SKU-404", 1), 404, {"error": "unknown-sku", "sku": "SKU-404"}),
            ok(update("SKU-1", 1)),
        ),
        1,
        Config(catalog=frozenset({"SKU-1"})),
    ),
    # -- the request itself: token, key, envelope
    Case("no-token-is-401", (Step(V1, 401, {"error": "unauthorized"}, token=None),), 0),
    Case("wrong-token-is-401", (Step(V1, 401, {"error": "unauthorized"}, token="another"),), 0),
    Case(
        "health-is-200-with-the-token-401-without",
        (
            Step("", 200, {"status": "ok"}, path=HEALTH, key=None),
            Step("", 401, {"error": "unauthorized"}, path=HEALTH, key=None, token=None),
        ),
        0,
    ),
    Case("missing-idempotency-key-is-400", (bad(V1, key=None),), 0),
    Case("idempotency-key-other-than-message-id-is-400", (bad(V1, key="another-key"),), 0),
    Case("malformed-json-is-400", (bad("{not json", key="k"),), 0),
    Case("body-not-an-object-is-400", (bad("[]", key="k"),), 0),
    Case("duplicate-json-key-is-400", (bad(V1[:-1] + ', "version": 2}'),), 0),
    Case("version-zero-is-400", (bad(update(version=0)),), 0),
    Case("version-as-string-is-400", (bad(update(version_text='"1"')),), 0),
    Case("version-true-is-400", (bad(update(version_text="true")),), 0),
    Case("version-fraction-is-400", (bad(update(version_text="1.0")),), 0),
    Case("version-beyond-bigint-is-400", (bad(update(version_text=str(2**63))),), 0),
    Case("payload-not-an-object-is-400", (bad(update(payload="[1]")),), 0),
    Case("kind-missing-is-400", (bad(V1.replace('"kind": "price", ', "")),), 0),
    Case(
        "aggregate-empty-is-400", (bad(V1.replace('"aggregate": "SKU-1"', '"aggregate": ""')),), 0
    ),
    # -- the batch API (5b): one result per item, in order, each as the single answer
    Case(
        "batch-answers-each-item-as-a-single-request",
        (
            ok(update("SKU-OLD", 5)),
            ok(update("SKU-A", 1, price("SKU-A", '"1.0"'))),
            Step(
                batch_of(
                    update("SKU-A", 1, price("SKU-A", '"1.00"')),  # a replay, 1.0 = 1.00
                    update("SKU-B", 1),
                    update("SKU-OLD", 4),
                    update("SKU-C", 1, price("SKU-C", '"NaN"')),
                    update("SKU-D", 1, created_at='"noon"'),
                    update("SKU-E", 1, price("SKU-E", '"2.00"'), message_id="price.SKU-A.v1"),
                ),
                200,
                path=BATCH,
                key=None,
                results=(
                    ("price.SKU-A.v1", 200, RECEIPT),
                    ("price.SKU-B.v1", 200, RECEIPT),
                    ("price.SKU-OLD.v4", 409, {"error": "stale", "current_version": 5}),
                    ("price.SKU-C.v1", 422, None),
                    ("price.SKU-D.v1", 400, None),
                    ("price.SKU-A.v1", 422, {"error": "idempotency-key-reuse"}),
                ),
            ),
        ),
        3,
    ),
    Case(
        "batch-item-for-an-unknown-sku-is-404",
        (
            Step(
                batch_of(update("SKU-404", 1), update("SKU-1", 1)),
                200,
                path=BATCH,
                key=None,
                results=(
                    ("price.SKU-404.v1", 404, {"error": "unknown-sku", "sku": "SKU-404"}),
                    ("price.SKU-1.v1", 200, RECEIPT),
                ),
            ),
        ),
        1,
        Config(catalog=frozenset({"SKU-1"})),
    ),
    Case(
        "batch-with-two-items-of-one-aggregate-is-400-as-a-whole",
        (bad(batch_of(update("SKU-1", 1), update("SKU-1", 2)), path=BATCH, key=None),),
        0,
    ),
    Case("batch-not-items-is-400", (bad('{"items": 3}', path=BATCH, key=None),), 0),
    Case(
        "batch-without-the-token-is-401",
        (Step(batch_of(V1), 401, {"error": "unauthorized"}, path=BATCH, key=None, token=None),),
        0,
    ),
    Case(
        "batch-on-a-site-without-it-is-404",
        (Step(batch_of(V1), 404, path=BATCH, key=None),),
        0,
        Config(batch=False),
    ),
]


# -- the three front ends ----------------------------------------------------------------------


class Front(Protocol):
    client: httpx.Client

    def effects(self) -> int: ...


@dataclass
class FakeFront:
    site: FakeSite
    client: httpx.Client

    def effects(self) -> int:
        return sum(self.site.effects.values())


@dataclass
class SimFront:
    site: SiteSimulator
    client: httpx.Client

    def effects(self) -> int:
        return len(self.site.effects())


@dataclass
class FastFront:
    client: httpx.Client

    def effects(self) -> int:
        stats: dict[str, Any] = self.client.get("/bench/stats").json()
        return int(stats["effects"])


class FastSites:
    """bench/fastsite.py processes, one per configuration, started when first asked for."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[Config, tuple[subprocess.Popen[str], str]] = {}

    def url(self, config: Config) -> str:
        if config not in self.procs:
            command = [
                sys.executable,
                str(FASTSITE),
                "--port",
                "0",
                "--token",
                TOKEN,
                "--no-uvloop",
            ]
            if not config.batch:
                command.append("--no-batch")
            if config.catalog is not None:
                path = self.tmp / f"catalog-{len(self.procs)}.txt"
                path.write_text("".join(f"{sku}\n" for sku in sorted(config.catalog)))
                command += ["--catalog", str(path)]
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            line = proc.stdout.readline()
            found = re.search(r"http://\S+", line)
            if not found:
                proc.kill()
                proc.wait()
                raise AssertionError(f"fastsite did not start: {line}{proc.stdout.read()}")
            self.procs[config] = (proc, found.group(0))
        return self.procs[config][1]

    def close(self) -> None:
        for proc, _ in self.procs.values():
            proc.terminate()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture(scope="module")
def fast_sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastSites]:
    sites = FastSites(tmp_path_factory.mktemp("fastsite"))
    yield sites
    sites.close()


def open_fake(config: Config, fast_sites: FastSites) -> tuple[Front, Callable[[], None]]:
    site = FakeSite(token=TOKEN, batch_enabled=config.batch, catalog=config.catalog)
    client = httpx.Client(transport=httpx.MockTransport(site), base_url="https://site.test")
    return FakeFront(site, client), client.close


def open_sim(config: Config, fast_sites: FastSites) -> tuple[Front, Callable[[], None]]:
    site = SiteSimulator(TOKEN, batch_enabled=config.batch, catalog=config.catalog).start()
    client = httpx.Client(base_url=site.url, timeout=10)

    def close() -> None:
        client.close()
        site.stop()

    return SimFront(site, client), close


def open_fast(config: Config, fast_sites: FastSites) -> tuple[Front, Callable[[], None]]:
    client = httpx.Client(base_url=fast_sites.url(config), timeout=10)
    client.post("/bench/reset").raise_for_status()
    return FastFront(client), client.close


FRONTS = {"fakesite": open_fake, "sitesim": open_sim, "fastsite": open_fast}


@pytest.fixture(params=list(FRONTS))
def front_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


# -- running a case ----------------------------------------------------------------------------


def send(front: Front, step: Step) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if step.token is not None:
        headers["Authorization"] = f"Bearer {step.token}"
    if step.key is not None:
        headers["Idempotency-Key"] = (
            json.loads(step.body)["message_id"] if step.key == FROM_BODY else step.key
        )
    if step.path == HEALTH:
        return front.client.get(step.path, headers=headers)
    return front.client.post(step.path, content=step.body.encode(), headers=headers)


def expect_answer(expected: Any, actual: Any, where: str) -> None:
    if expected is None:
        return
    if expected is RECEIPT:
        assert isinstance(actual, dict) and set(actual) == {"receipt"}, f"{where}: {actual}"
        assert isinstance(actual["receipt"], str) and actual["receipt"], f"{where}: {actual}"
        return
    assert expected == actual, where


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_front_end_answers_the_conformance_table_as_the_contract_says(
    case: Case, front_name: str, fast_sites: FastSites
) -> None:
    front, close = FRONTS[front_name](case.config, fast_sites)
    try:
        answers: list[httpx.Response] = []
        for n, step in enumerate(case.steps):
            answer = send(front, step)
            answers.append(answer)
            where = f"step {n}: {answer.status_code} {answer.text[:300]}"
            assert step.status == answer.status_code, where
            body = answer.json() if answer.content else None
            expect_answer(step.answer, body, where)
            if step.same_as is not None:
                assert answers[step.same_as].content == answer.content, where
            if step.results is not None:
                got = [(r["message_id"], r["status"]) for r in body["results"]]
                assert [(m, s) for m, s, _ in step.results] == got, where
                for (_, _, expected), result in zip(step.results, body["results"], strict=True):
                    expect_answer(expected, result["body"], where)
        assert case.effects == front.effects(), "effects the site applied"
    finally:
        close()
