"""The shop site of contract 5 and 5b: one model behind every fake of the shop API.

Three front ends put it on a wire and add what a wire has (faults, capacity, bookkeeping); none
decides anything about an update on its own:

    exchange.dev.testing.FakeSite    an httpx transport handler, in process
    exchange.dev.sitesim             real HTTP/1.1, faults and capacity (tests, ``exchange demo``)
    bench/fastsite.py                aiohttp, no faults (the benchmarks' site)

``tests/dev/test_site_conformance.py`` runs one table of cases against all three.

Written from the contract (../CONTRACT.md sections 1, 2, 5 and 5b), never from the service's
client. What the contract says the site promises:

- the same ``Idempotency-Key`` with the same body creates no second effect and answers as the
  first time (the stored answer, byte for byte);
- 409 ``{"error": "stale", "current_version": N}`` for a version at or below the one it holds,
  per (kind, aggregate), for every kind (``check_versions=False``: a site that keeps only the
  first promise, applies any version and shows the last one applied);
- a batch ``{"items": [...]}`` answers 200 ``{"results": [...]}``, one result per item, in order,
  each with the meaning of the single answer; at most one item per aggregate;
- ``GET /api/v1/health`` is 200 with the token, 401 without, and has no effect.

"The same body" is compared as values (contract 1: two payloads whose prices are equal as
decimals are the same payload): key order and whitespace do not count; every JSON number is
compared as a decimal (``1.0`` = ``1.00`` = ``1``), and so is a price written as a string
(``"840.0"`` = ``"840.00"`` = ``840``); ``true`` is not ``1``; other strings are text; and
``created_at`` is compared as the instant it names (``07:20:00Z`` = ``10:20:00+03:00``).

Where the contract leaves the site's answer open, the model chooses (the table checks it):

    400 {"error": <why>}             not an update: not UTF-8 JSON, NaN or Infinity literals
                                     (not JSON), a key twice in one object, a missing or
                                     mistyped field, a version outside 1..2^63-1, ``created_at``
                                     not an RFC 3339 date-time with its offset, no
                                     ``Idempotency-Key`` or one other than the body's
                                     ``message_id``; a batch that is not ``{"items": [...]}``
                                     or names one aggregate twice (the whole request)
    422 {"error": "invalid-payload", "detail": ...}
                                     a ``price`` payload that breaks contract 1: ``sku`` 1..100
                                     characters, ``price`` a plain decimal (a string or a JSON
                                     number, no exponent), finite, 0 <= price < 10^12, at most 4
                                     decimal places, ``currency`` three upper-case letters (RUB
                                     when absent), ``price_type`` non-empty (retail when absent),
                                     no other field. Other kinds: any JSON object.
    422 {"error": "idempotency-key-reuse"}
                                     a key already applied, with another body: nothing applied
    404 {"error": "unknown-sku", "sku": S}
                                     a price for a SKU outside ``catalog`` (None: every SKU)

The order of checks for one update (a batch item takes the same steps, without the header):

    1. the body: JSON, the envelope, the key header              400
    2. the payload's rules                                       422 invalid-payload
    3. the key: answered 200 before -> that answer again (no effect, no fault); applied with
       another body -> 422 idempotency-key-reuse
    4. the front end's faults for a fresh key (``gate``)          its answer, nothing applied
    5. the catalogue                                             404 unknown-sku
    6. the version                                               409 stale
    7. the effect: held version := version, 200 ``{"receipt": "R-<n>"}``, the answer stored

A test device, not a claim about any real site (contract 5 has no such answer): with
``withhold_drops`` set, a price that falls to that share of the price the site shows, or below,
is taken and withheld from buyers, as a marketplace's price quarantine does (contract 13,
``withheld``): step 7 answers 202 ``{"receipt": "W-<n>", "withheld": true}`` and keeps the
version (a lower one is 409 stale) but applies no effect; ``GET /api/v1/withheld/<message_id>``
answers ``{"state": "withheld" | "live" | "replaced"}`` (404 for a key never withheld) and
``POST /api/v1/withheld/<message_id>/release`` applies it (200 ``{"state": "live"}``; 409 with
its state when it is no longer withheld). A newer update of the aggregate replaces a withheld
one. ``confirm(message_id)`` is the seller confirming it elsewhere (the marketplace's cabinet).

Only an applied update's answer is stored: a key refused before (409, 422, a fault) is judged
afresh when it comes again, so a stale key asked again is 409 again, with the version held now.

Not thread-safe: a front end calls it under its own lock (or from one event loop).
"""

from __future__ import annotations

import collections
import hmac
import json
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Final

UPDATES_PATH: Final = "/api/v1/updates"
BATCH_PATH: Final = "/api/v1/updates:batch"
HEALTH_PATH: Final = "/api/v1/health"
WITHHELD_PATH: Final = "/api/v1/withheld"  # the withholding test device (module docstring)
MAX_VERSION: Final = 2**63 - 1  # a BIGINT: the largest version any table of the contract holds
MAX_PRICE: Final = Decimal(10) ** 12
MAX_PRICE_DECIMALS: Final = 4
MAX_SKU: Final = 100
PRICE_FIELDS: Final = frozenset({"sku", "price", "currency", "price_type"})
_PLAIN = re.compile(r"-?[0-9]+(\.[0-9]+)?", re.ASCII)
_CURRENCY = re.compile(r"[A-Z]{3}", re.ASCII)
# RFC 3339 section 5.6, date-time (its ABNF is case-insensitive: "t" and "z" too).
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)


# -- answers -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: its status, its JSON body as bytes, extra headers."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def json(self) -> Any:
        return json.loads(self.body)


def reply(status: int, document: Mapping[str, Any], *headers: tuple[str, str]) -> Reply:
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Reply(status, body, tuple(headers))


HEALTHY: Final = reply(200, {"status": "ok"})
UNAUTHORIZED: Final = reply(401, {"error": "unauthorized"}, ("WWW-Authenticate", "Bearer"))
NO_BATCH: Final = reply(404, {"error": "not found"})
KEY_REUSE: Final = reply(422, {"error": "idempotency-key-reuse"})


def refuse_token(expected: str | None, authorization: str | None) -> Reply | None:
    """401 unless ``Authorization`` is ``Bearer <expected>`` (``expected`` None: any or none)."""
    if expected is None:
        return None
    wanted = f"Bearer {expected}".encode()
    if authorization is None or not hmac.compare_digest(authorization.encode(), wanted):
        return UNAUTHORIZED
    return None


# -- reading a request ---------------------------------------------------------------------------


class BadRequest(ValueError):
    """Not an update (400): the message is the answer's ``error``."""


class _Invalid(ValueError):
    """An update whose payload breaks contract 1 (422)."""


class _Exponent(Decimal):
    """A JSON number written with an exponent: a posting may hold one, a price may not."""


def _number(text: str) -> Decimal:
    return _Exponent(text) if "e" in text or "E" in text else Decimal(text)


def _no_constant(name: str) -> Any:
    raise BadRequest(f"malformed JSON: {name} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise BadRequest(f"malformed JSON: key {twice[:40]!r} appears twice in one object")
    return result


# One decoder for every body (json.loads with options builds a new one per call).
_DECODER: Final = json.JSONDecoder(
    parse_float=_number, parse_constant=_no_constant, object_pairs_hook=_unique
)


def parse_json(raw: bytes) -> Any:
    """The body as JSON, every fraction an exact Decimal (money is never a float)."""
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body is not UTF-8: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise BadRequest(f"malformed JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise BadRequest("malformed JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        if isinstance(exc, BadRequest):
            raise
        raise BadRequest(f"malformed JSON: {str(exc)[:80]}") from None


def parse_created_at(value: Any) -> datetime:
    """An RFC 3339 date-time with its offset, as an aware datetime; else BadRequest."""
    found = _DATE_TIME.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise BadRequest("created_at must be an RFC 3339 date-time with its offset")
    fraction, sign, off_hours, off_minutes = found.group(7, 8, 9, 10)
    if fraction is None:  # the common form, read in C (the pattern has vouched for it)
        try:
            return datetime.fromisoformat(value.upper())
        except ValueError:
            raise BadRequest("created_at must be an RFC 3339 date-time with its offset") from None
    year, month, day, hour, minute, second = (int(found.group(n)) for n in range(1, 7))
    micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
    zone = UTC
    try:
        if sign is not None:
            offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
            zone = timezone(-offset if sign == "-" else offset)
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)
    except ValueError:  # 30 February, hour 25, an offset of a day or more
        raise BadRequest("created_at must be an RFC 3339 date-time with its offset") from None


@dataclass(frozen=True, slots=True)
class Update:
    """One well-formed update (contract 5's body)."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    payload: dict[str, Any]
    created_at: datetime
    document: dict[str, Any]  # the whole body as read

    def fingerprint(self) -> Hashable:
        """The body as compared for a replay (see the module docstring). Computed only when
        a key comes again: the first request of a key, by far the most, never needs it."""
        return _fingerprint(self.document, self.created_at)


def parse_update(document: Any, key: str | None, *, in_batch: bool = False) -> Update:
    """A well-formed update, else BadRequest. ``key`` is the Idempotency-Key header (a single
    request must carry it, equal to the body's message_id; a batch item has none)."""
    if not isinstance(document, dict):
        raise BadRequest("the body must be a JSON object")
    for name in ("message_id", "kind", "aggregate", "version", "payload", "created_at"):
        if name not in document:
            raise BadRequest(f"missing field: {name}")
    for name in ("message_id", "kind", "aggregate"):
        if not isinstance(document[name], str) or not document[name]:
            raise BadRequest(f"{name} must be a non-empty string")
    version = document["version"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MAX_VERSION:
        raise BadRequest(f"version must be an integer from 1 to {MAX_VERSION}")
    if not isinstance(document["payload"], dict):
        raise BadRequest("payload must be a JSON object")
    created_at = parse_created_at(document["created_at"])
    if not in_batch:
        if key is None:
            raise BadRequest("missing header: Idempotency-Key")
        if key != document["message_id"]:
            raise BadRequest("Idempotency-Key must equal the body's message_id")
    return Update(
        message_id=document["message_id"],
        kind=document["kind"],
        aggregate=document["aggregate"],
        version=version,
        payload=document["payload"],
        created_at=created_at,
        document=document,
    )


def check_payload(update: Update) -> None:
    """Contract 1's rules for a ``price`` payload (schema 1); any object for other kinds."""
    if update.kind != "price":
        return
    payload = update.payload
    unknown = sorted(set(payload) - PRICE_FIELDS)
    if unknown:
        raise _Invalid(f"{unknown[0][:40]}: is not a field of a price")
    sku = payload.get("sku")
    if not isinstance(sku, str) or not 1 <= len(sku) <= MAX_SKU:
        raise _Invalid(f"sku: must be a string of 1 to {MAX_SKU} characters")
    if "price" not in payload:
        raise _Invalid("price: missing")
    _price(payload["price"])
    currency = payload.get("currency", "RUB")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise _Invalid("currency: must be three upper-case letters, e.g. RUB")
    price_type = payload.get("price_type", "retail")
    if not isinstance(price_type, str) or not price_type:
        raise _Invalid("price_type: must be a non-empty string")


def _price(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise _Invalid('price: must be a decimal string such as "840.00" or a JSON number')
    if isinstance(value, _Exponent):
        raise _Invalid("price: must be written without an exponent")
    if isinstance(value, str):
        if not _PLAIN.fullmatch(value):
            raise _Invalid(f"price: must be a plain decimal such as 840.00, not {value[:40]!r}")
        value = Decimal(value)
    amount = Decimal(value)
    if not amount.is_finite():
        raise _Invalid("price: must be finite")
    if amount < 0 or amount >= MAX_PRICE:
        raise _Invalid("price: must be at least 0 and below 10^12")
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_PRICE_DECIMALS:
        raise _Invalid(f"price: must have at most {MAX_PRICE_DECIMALS} decimal places")
    return amount


def _plain(value: Any) -> Any:
    """``value`` with every number read from an exponent as a plain ``Decimal`` (the marker
    class is for the price check only; an effect's payload holds what JSON said, as decimals)."""
    if isinstance(value, _Exponent):
        return Decimal(value)
    if isinstance(value, dict):
        return {name: _plain(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _fingerprint(document: dict[str, Any], created_at: datetime) -> Hashable:
    payload = document["payload"]
    price_text = payload.get("price") if document["kind"] == "price" else None
    fields: list[tuple[str, Hashable]] = []
    for name, value in document.items():
        if name == "created_at":
            fields.append((name, ("t", created_at)))
        elif name == "payload" and isinstance(price_text, str) and _PLAIN.fullmatch(price_text):
            # A price is a decimal however it is written: "840.0", "840.00" and 840 are one.
            rest = {k: v for k, v in payload.items() if k != "price"}
            fields.append(
                (name, ("o", frozenset([*_items(rest), ("price", ("n", Decimal(price_text)))])))
            )
        else:
            fields.append((name, _value(value)))
    return frozenset(fields)


def _items(document: dict[str, Any]) -> list[tuple[str, Hashable]]:
    return [(name, _value(value)) for name, value in document.items()]


def _value(value: Any) -> Hashable:
    # Every number as its decimal value: Decimal("1.0") == Decimal("1.00") == 1, and they hash
    # alike. A bool is tagged before: True == 1 in Python, never in JSON.
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, Decimal)):
        return ("n", value)
    if isinstance(value, dict):
        return ("o", frozenset(_items(value)))
    if isinstance(value, list):
        return ("a", tuple(_value(v) for v in value))
    if value is None:
        return ("z",)
    return ("s", value)


# -- the site ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Effect:
    """One update the site applied."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    payload: dict[str, Any]
    receipt: str


@dataclass(frozen=True, slots=True)
class Result:
    """The model's answer to one update, and whether it applied an effect."""

    reply: Reply
    applied: bool = False
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class BatchResult:
    reply: Reply  # 200 {"results": [...]}
    statuses: tuple[int, ...]  # each item's status, in order
    applied: int  # effects applied by this batch
    replayed: int  # items answered from a stored answer


@dataclass(frozen=True, slots=True)
class _Stored:
    update: Update
    reply: Reply


# A front end's faults for a fresh key (step 4): an answer refuses the update, None lets it on.
Gate = Callable[[Update], Reply | None]


class SiteModel:
    """The site's state and every decision about an update; see the module docstring."""

    def __init__(
        self,
        *,
        check_versions: bool = True,
        catalog: Iterable[str] | None = None,
        withhold_drops: Decimal | None = None,
    ) -> None:
        self.check_versions = check_versions
        # The test device of the module docstring: None, nothing is withheld.
        self.withhold_drops = withhold_drops
        self.shown_prices: dict[tuple[str, str], Decimal] = {}  # what buyers see, per price
        self.withheld: dict[str, tuple[Update, str]] = {}  # message_id -> (update, state)
        self._withheld_of: dict[tuple[str, str], str] = {}  # aggregate -> its withheld key
        self.catalog: frozenset[str] | None = None if catalog is None else frozenset(catalog)
        self.effects: list[Effect] = []
        self.effect_counts: collections.Counter[str] = collections.Counter()
        self.held: dict[tuple[str, str], int] = {}  # what the site shows: the last one applied
        self.top: dict[tuple[str, str], int] = {}  # the highest version applied
        self.stale_writes: list[Effect] = []  # applied below a version applied before
        self.received_keys: set[str] = set()  # message_ids of well-formed updates
        self.replays = 0
        self._answers: dict[str, _Stored] = {}

    # -- one update ----------------------------------------------------------------------------

    def single(self, raw: bytes, key: str | None, gate: Gate | None = None) -> Result:
        """``POST /api/v1/updates``: the body as read, the Idempotency-Key header."""
        try:
            update = parse_update(parse_json(raw), key)
        except BadRequest as exc:
            return Result(reply(400, {"error": str(exc)}))
        return self.process(update, gate)

    def process(self, update: Update, gate: Gate | None = None) -> Result:
        """Steps 2 to 7 for a well-formed update."""
        self.received_keys.add(update.message_id)
        try:
            check_payload(update)
        except _Invalid as exc:
            return Result(reply(422, {"error": "invalid-payload", "detail": str(exc)}))
        stored = self._answers.get(update.message_id)
        if stored is not None:
            if stored.update.fingerprint() == update.fingerprint():
                self.replays += 1
                return Result(stored.reply, replayed=True)
            return Result(KEY_REUSE)
        if gate is not None:
            refused = gate(update)
            if refused is not None:
                return Result(refused)
        if update.kind == "price" and self.catalog is not None:
            sku = update.payload["sku"]
            if sku not in self.catalog:
                return Result(reply(404, {"error": "unknown-sku", "sku": sku}))
        aggregate = (update.kind, update.aggregate)
        held = self.held.get(aggregate)
        if self.check_versions and held is not None and update.version <= held:
            return Result(reply(409, {"error": "stale", "current_version": held}))
        if self._withholds(update, aggregate):
            return Result(self._withhold(update, aggregate))
        return Result(self._apply(update, aggregate), applied=True)

    def _apply(self, update: Update, aggregate: tuple[str, str]) -> Reply:
        receipt = f"R-{len(self.effects) + 1}"
        self._replace_withheld(aggregate)
        self._effect(update, aggregate, receipt)
        self.held[aggregate] = update.version
        answer = Reply(200, b'{"receipt":"%s"}' % receipt.encode())
        self._answers[update.message_id] = _Stored(update, answer)
        return answer

    def _effect(self, update: Update, aggregate: tuple[str, str], receipt: str) -> None:
        effect = Effect(
            update.message_id,
            update.kind,
            update.aggregate,
            update.version,
            # A valid price holds no number written with an exponent (the check refused it).
            update.payload if update.kind == "price" else _plain(update.payload),
            receipt,
        )
        self.effects.append(effect)
        self.effect_counts[update.message_id] += 1
        top = self.top.get(aggregate)
        if top is not None and update.version < top:
            self.stale_writes.append(effect)
        self.top[aggregate] = max(update.version, top or 0)
        if self.withhold_drops is not None and update.kind == "price":
            self.shown_prices[aggregate] = _price(update.payload["price"])

    # -- the withholding test device (module docstring) ----------------------------------------

    def _withholds(self, update: Update, aggregate: tuple[str, str]) -> bool:
        if self.withhold_drops is None or update.kind != "price":
            return False
        shown = self.shown_prices.get(aggregate)
        return shown is not None and _price(update.payload["price"]) <= shown * self.withhold_drops

    def _withhold(self, update: Update, aggregate: tuple[str, str]) -> Reply:
        self._replace_withheld(aggregate)
        self.withheld[update.message_id] = (update, "withheld")
        self._withheld_of[aggregate] = update.message_id
        self.held[aggregate] = update.version
        self.top[aggregate] = max(update.version, self.top.get(aggregate, 0))
        answer = reply(202, {"receipt": f"W-{len(self.withheld)}", "withheld": True})
        self._answers[update.message_id] = _Stored(update, answer)
        return answer

    def _replace_withheld(self, aggregate: tuple[str, str]) -> None:
        key = self._withheld_of.pop(aggregate, None)
        if key is not None:
            self.withheld[key] = (self.withheld[key][0], "replaced")

    def withheld_state(self, message_id: str) -> Reply:
        """``GET /api/v1/withheld/<message_id>``."""
        found = self.withheld.get(message_id)
        if found is None:
            return reply(404, {"error": "not withheld here"})
        return reply(200, {"state": found[1]})

    def release(self, message_id: str) -> Reply:
        """``POST /api/v1/withheld/<message_id>/release``: buyers see it from now on."""
        found = self.withheld.get(message_id)
        if found is None:
            return reply(404, {"error": "not withheld here"})
        update, state = found
        if state != "withheld":
            return reply(409, {"state": state})
        aggregate = (update.kind, update.aggregate)
        self._withheld_of.pop(aggregate, None)
        self.withheld[message_id] = (update, "live")
        self._effect(update, aggregate, f"R-{len(self.effects) + 1}")
        return reply(200, {"state": "live"})

    def withheld_route(self, method: str, path: str) -> Reply | None:
        """The test device's answer to ``method`` ``path`` (None: not its path), for the
        front ends."""
        if not path.startswith(WITHHELD_PATH + "/"):
            return None
        from urllib.parse import unquote

        rest = path[len(WITHHELD_PATH) + 1 :]
        if method == "POST" and rest.endswith("/release"):
            return self.release(unquote(rest.removesuffix("/release")))
        if method == "GET" and "/" not in rest:
            return self.withheld_state(unquote(rest))
        return None

    def confirm(self, message_id: str) -> None:
        """The seller confirms a withheld price elsewhere (a marketplace's cabinet)."""
        self.release(message_id)

    # -- a batch (5b) --------------------------------------------------------------------------

    def read_batch(self, raw: bytes) -> list[Any]:
        """The items of ``POST /api/v1/updates:batch``, else BadRequest (the whole request)."""
        document = parse_json(raw)
        if not isinstance(document, dict) or not isinstance(document.get("items"), list):
            raise BadRequest('a batch must be {"items": [...]}')
        items: list[Any] = document["items"]
        seen: set[tuple[str, str]] = set()
        for item in items:
            if not isinstance(item, dict):
                continue
            kind, aggregate = item.get("kind"), item.get("aggregate")
            if isinstance(kind, str) and isinstance(aggregate, str):
                if (kind, aggregate) in seen:
                    raise BadRequest(
                        f"a batch holds at most one item per aggregate: {kind} {aggregate[:80]}"
                    )
                seen.add((kind, aggregate))
        return items

    def answer_batch(self, items: list[Any], gate: Gate | None = None) -> BatchResult:
        """One result per item, in order, each the single answer for that update."""
        parts: list[bytes] = []
        statuses: list[int] = []
        applied = replayed = 0
        for item in items:
            try:
                result = self.process(parse_update(item, None, in_batch=True), gate)
            except BadRequest as exc:
                result = Result(reply(400, {"error": str(exc)}))
            applied += result.applied
            replayed += result.replayed
            statuses.append(result.reply.status)
            message_id = item.get("message_id") if isinstance(item, dict) else None
            name = json.dumps(
                message_id if isinstance(message_id, str) else None, ensure_ascii=False
            ).encode("utf-8")
            parts.append(
                b'{"message_id":%s,"status":%d,"body":%s}'
                % (name, result.reply.status, result.reply.body)
            )
        body = b'{"results":[' + b",".join(parts) + b"]}"
        return BatchResult(Reply(200, body), tuple(statuses), applied, replayed)

    # -- a site that forgets ---------------------------------------------------------------------

    def forget_keys(self) -> None:
        """Forget every stored answer (the site's key retention ran out)."""
        self._answers.clear()

    def forget_versions(self) -> None:
        """Forget the versions held (a site restored from an old backup): no 409 until a new
        effect."""
        self.held.clear()

    def stored(self, message_id: str) -> bool:
        """Whether a stored answer would replay ``message_id``."""
        return message_id in self._answers
