"""What 1C may write (contract 1): one staging row -> an accepted message or a rejection.

Pure: no database, no clock. Money is read as ``Decimal`` straight from the JSON text, never
through a float; a financial payload keeps every number's exact decimal value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from exchange.domain.identity import MAX_VERSION, PACKAGE_VERSIONS_FROM, message_id
from exchange.domain.policy import Policy
from exchange.domain.prices import DEFAULT_CURRENCY
from exchange.domain.reasons import Reason

MAX_PRICE = Decimal(10) ** 12
MAX_PRICE_DECIMALS = 4
SUPPORTED_SCHEMAS = frozenset({"1"})
# Matched whole (``fullmatch``): "$" would let a trailing newline through, and Decimal() itself
# accepts spaces, "+", "_" and any Unicode digit, none of which is plain notation.
_PLAIN_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", re.ASCII)
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Contract 1: no payload nests deeper. Checked on the text, without recursion, before anything
# parses it, so that a staging row and a JSON intent get the same verdict however deep they go.
MAX_NESTING = 64
# A JSON string (skipped whole, so that brackets inside it do not count), a run of opening
# brackets, a run of closing ones, or a run of commas and colons (each parts one value or key
# from the next). Possessive, and a string still open at the end of the text runs to its end
# (it is not JSON; the parse says so): every match succeeds where it starts and
# no character is read twice, so one pass is linear in the text. (A closing quote required,
# as before R3-1, made an open string of ``\\"`` rescan the rest of the text from each quote.)
_STRUCTURE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?|[\[{]++|[\]}]++|[,:]++', re.DOTALL)
# A version is a BIGINT in every table (contract 1): 1 to 2^63 - 1. A number outside that range,
# from staging or from the site, is never a version and is never written to the database.
# Contract 1's limits of the staging table's text columns. A DBA may have widened a column (or
# 1C created the table itself): the row is then held to the contract here, quarantined with the
# column and its limit named, instead of failing the insert of its whole intake chunk.
STAGING_TEXT_LIMITS: dict[str, int] = {
    "kind": 64,
    "aggregate": 200,
    "schema_version": 32,
    "source_ref": 500,
}
# Contract 1's limits of the price payload's names (``sku``, ``price_type``).
NAME_CHARS = 100


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with «…» at the cut, where it is longer (contract
    15: a package's own source_ref, a file name; an over-long id kept on its record)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# 1C's "empty date" (Дата(1, 1, 1)): what 1C writes into a date it did not fill in. It is no
# time at all; intake treats it as a missing created_at (the time the row was taken is used).
EMPTY_1C_DATE = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class StagingRow:
    id: int
    kind: str
    aggregate: str
    aggregate_version: int
    payload: str
    schema_version: str
    source_ref: str | None
    created_at: datetime
    # What in the row breaks the table's own types (SQLite keeps whatever it is given: text in
    # the version column, bytes that are not UTF-8); such a row is rejected, invalid-contract.
    defect: str | None = None
    # A row a 1C package staged (its version is a package's number, recorded in cml_packages):
    # only such a row may carry a version from PACKAGE_VERSIONS_FROM up.
    package: bool = False
    # The product's name (contract 1): for people, never sent; ``product_name`` made it text.
    name: str | None = None
    # A package row whose aggregate a later offer of the same 1C package maps to as well: that
    # offer's payload, which wins (contract 15; ``cml_package_repeats``).
    later_offer: str | None = None
    # How many characters the row's ``name`` had as written (``name`` is cut to NAME_LIMIT for
    # people): contract 15 holds it to NAME_LIMIT where the table does not (SQLite).
    name_chars: int = 0


@dataclass(frozen=True, slots=True)
class Accepted:
    row: StagingRow
    message_id: str
    payload: str  # canonical JSON: what is compared for duplicates and sent to the site
    # A price's (sku, price_type), as validation read them from the payload: intake fixes its
    # aggregate's identity with them without parsing the payload again. None: not a price,
    # or not known (a verdict made elsewhere): then it is read from ``payload``.
    price: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    row: StagingRow
    reason: Reason
    detail: str


class ContractError(ValueError):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _ExponentDecimal(Decimal):
    """A JSON number written with an exponent (allowed in postings, not in prices)."""


def _parse_float(text: str) -> Decimal:
    return _ExponentDecimal(text) if "e" in text or "E" in text else Decimal(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number the contract allows")


class DuplicateKey(ValueError):
    """A JSON object names one key twice (JSON parsers differ on which value wins); ``key`` is
    that key, cut to 40 characters."""

    def __init__(self, key: str) -> None:
        self.key = key[:40]
        super().__init__(f"key {self.key!r} appears twice in one object")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: an object, or DuplicateKey."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


@dataclass(frozen=True, slots=True)
class Shape:
    """What a JSON text holds, measured on its text before any parsing: how deep it nests, how
    many arrays and objects it opens, how many commas and colons part its values (a count of
    values and keys, bar one per container). A count stops growing past its limit."""

    depth: int
    containers: int
    values: int


def measure(text: str, max_containers: int | None = None, max_values: int | None = None) -> Shape:
    """The ``Shape`` of the JSON ``text``, read without recursion and without parsing: brackets,
    commas and colons inside strings do not count. Not JSON is not judged here (the parse says
    so). With limits, the scan stops as soon as a count passes its limit (the cost is then
    bounded by the limits, not by the text); the counts returned are then past the limit and
    the depth is what was seen so far."""
    containers = text.count("{") + text.count("[")  # an upper bound: strings hold some
    values = text.count(",") + text.count(":")
    if (  # every flat price, every body within its limits: no scan at all
        containers <= MAX_NESTING
        and (max_values is None or values <= max_values)
        and (max_containers is None or containers <= max_containers)
    ):
        return Shape(0, containers, values)
    top_containers = containers + 1 if max_containers is None else max_containers
    top_values = values + 1 if max_values is None else max_values
    depth = deepest = containers = values = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token[0] in "[{":
            depth += len(token)
            containers += len(token)
            deepest = max(deepest, depth)
            if containers > top_containers:
                break
        elif token[0] in "]}":
            depth -= len(token)
        elif token[0] in ",:":
            values += len(token)
            if values > top_values:
                break
    return Shape(deepest, containers, values)


def nesting(text: str) -> int:
    """How deep the JSON ``text`` nests its objects and arrays (``{}`` is 1); see ``measure``."""
    return measure(text).depth


def check_nesting(text: str) -> None:
    """ContractError when ``text`` nests deeper than contract 1 allows."""
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise ContractError(
            Reason.INVALID_CONTRACT,
            f"payload nests {depth} levels deep; the contract allows at most {MAX_NESTING}",
        )


def parse_json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(
            text,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
            object_pairs_hook=unique_keys,
        )
    except (ValueError, RecursionError) as exc:
        raise ContractError(Reason.INVALID_CONTRACT, f"payload is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ContractError(
            Reason.INVALID_CONTRACT, f"payload must be a JSON object, not {type(value).__name__}"
        )
    return value


class _HasDecimal(Exception):
    pass


def _no_decimals(value: Any) -> Any:
    raise _HasDecimal


_CANONICAL = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=_no_decimals
)


def dump_json(value: Any) -> str:
    """Canonical compact JSON, keys sorted; decimals written exactly as their value."""
    try:  # the fast path: no JSON numbers with a fraction (every price payload)
        return _CANONICAL.encode(value)
    except _HasDecimal:
        return _encode(value)


def _encode(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted(value.items())
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_encode(v)}" for k, v in items)
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


_PRICE_FIELDS = frozenset({"sku", "price", "currency", "price_type"})
_PLAIN_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant)


# The rules of the price fields, used by ``PriceV1`` and by the fast path (``_plain_price``).
def _check_text(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def _check_name(value: str) -> str:  # sku, price_type
    if not value.strip() or len(value) > NAME_CHARS:
        raise ValueError(f"must be 1 to {NAME_CHARS} characters")
    return value


def _check_currency(value: str) -> str:
    if not _CURRENCY.match(value):
        raise ValueError("must be three upper-case letters, e.g. RUB")
    return value


def _check_price(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise ValueError('must be a decimal string such as "840.00" or a JSON number')
    if isinstance(value, _ExponentDecimal):
        raise ValueError("must be written without an exponent")
    if isinstance(value, str):
        if not _PLAIN_DECIMAL.fullmatch(value):
            raise ValueError(
                f'must be a plain decimal such as "840.00" (ASCII digits and at most one point; '
                f"no spaces, line breaks, '+' or other characters), not {value[:40]!r}"
            )
        try:
            value = Decimal(value)
        except InvalidOperation:
            raise ValueError("must be a plain decimal") from None
    amount = Decimal(value)
    if not amount.is_finite():
        raise ValueError("must be finite")
    if amount < 0 or amount >= MAX_PRICE:
        raise ValueError("must be at least 0 and below 10^12")
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_PRICE_DECIMALS:
        raise ValueError(f"must have at most {MAX_PRICE_DECIMALS} decimal places")
    # -0.00 is zero: sent as 0.00 (same scale), so that the site never sees a signed zero and
    # "-0.00" and "0.00" of one version are the same payload.
    return amount.copy_abs() if amount.is_zero() else amount


def price_fields_problem(sku: str, price: str, currency: str, price_type: str) -> str | None:
    """Why intake will refuse a price with these fields (``PriceV1``'s rules, the same checks),
    or None: for a source that tells its sender before intake runs (the 1C exchange counts such
    a price among the not-sent in its answer)."""
    for name, value in (("sku", sku), ("price_type", price_type)):
        try:
            _check_name(_check_text(value))
        except ValueError as exc:
            return f"{name}: {exc}"
    try:
        _check_currency(_check_text(currency))
    except ValueError as exc:
        return f"currency: {exc}"
    try:
        _check_price(price)
    except ValueError as exc:
        return f"price: {exc}"
    return None


def _price_wire(sku: str, price: Decimal, currency: str, price_type: str) -> dict[str, Any]:
    return {"sku": sku, "price": format(price, "f"), "currency": currency, "price_type": price_type}


class PriceV1(BaseModel):
    """The ``price`` payload, schema 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sku: str
    price: Decimal
    currency: str = DEFAULT_CURRENCY
    price_type: str = "retail"

    @field_validator("sku", "currency", "price_type", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _check_text(value)

    @field_validator("sku", "price_type")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        return _check_currency(value)

    @field_validator("price", mode="before")
    @classmethod
    def _price(cls, value: Any) -> Decimal:
        return _check_price(value)

    def wire(self) -> dict[str, Any]:
        return _price_wire(self.sku, self.price, self.currency, self.price_type)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "is not a field of this schema"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _plain_price(row: StagingRow) -> str | None:
    """The canonical payload of an ordinary price row, or None: then the full path decides
    (``_plain_price_parts``, without the sku and price type)."""
    parts = _plain_price_parts(row)
    return None if parts is None else parts[0]


def _plain_price_parts(row: StagingRow) -> tuple[str, str, str] | None:
    """The canonical payload of an ordinary price row with its sku and price type, or None:
    then the full path decides.

    Ordinary: a flat JSON object without escapes or control characters, of string values,
    each a field of PriceV1 written once, passing PriceV1's rules. Anything else (and every
    rejection) goes the full way, so both paths give the same verdict; it spares the
    pure-Python JSON hooks and the model for the millions of plain prices.
    """
    text = row.payload
    if "\\" in text or _CONTROL.search(text):
        return None
    try:
        data = _PLAIN_DECODER.decode(text)
    except (ValueError, RecursionError):  # deep nesting: the full path rejects it, by name
        return None
    if type(data) is not dict or not data.keys() <= _PRICE_FIELDS:
        return None
    # Without escapes a quoted key cannot hide inside a string: a key written twice (which
    # json.loads would silently merge) shows as two occurrences.
    if any(text.count(f'"{key}"') != 1 for key in data):
        return None
    sku = data.get("sku")
    price = data.get("price")
    currency = data.get("currency", DEFAULT_CURRENCY)
    price_type = data.get("price_type", "retail")
    if not isinstance(sku, str) or not all(
        type(value) is str for value in (sku, price, currency, price_type)
    ):
        return None
    if row.aggregate != sku and row.aggregate != f"{sku}/{price_type}":
        return None
    try:
        _check_name(sku)
        _check_name(price_type)
        _check_currency(currency)
        amount = _check_price(price)
    except ValueError:
        return None
    # dump_json(_price_wire(...)) written out: keys sorted, compact, and no value needs an
    # escape (the text holds no backslash, so no quote inside a string, and no control
    # character), which the encoder's per-call setup cost more than the rest of this check.
    price_text = format(amount, "f")
    return (
        f'{{"currency":"{currency}","price":"{price_text}",'
        f'"price_type":"{price_type}","sku":"{sku}"}}',
        sku,
        price_type,
    )


def price_aggregate(sku: str, price_type: str) -> str:
    """The documented name of the aggregate of one price: ``<sku>/<price_type>``."""
    return f"{sku}/{price_type}"


def _canonical_payload(row: StagingRow) -> str:
    return _canonical(row)[0]


def _canonical(row: StagingRow) -> tuple[str, tuple[str, str] | None]:
    """The row's canonical payload, and a price's (sku, price_type)."""
    plain = _plain_price_parts(row) if row.kind == "price" else None
    if plain is not None:
        return plain[0], (plain[1], plain[2])
    return _full(row)


def _full_payload(row: StagingRow) -> str:
    return _full(row)[0]


def _full(row: StagingRow) -> tuple[str, tuple[str, str] | None]:
    data = parse_json_object(row.payload)
    if row.kind == "price":
        try:
            price = PriceV1.model_validate(data)
        except ValidationError as exc:
            raise ContractError(
                Reason.INVALID_CONTRACT, f"price payload: {_describe(exc)}"
            ) from None
        if row.aggregate not in (price.sku, price_aggregate(price.sku, price.price_type)):
            raise ContractError(
                Reason.INVALID_CONTRACT,
                f"price payload: sku {price.sku!r}, price_type {price.price_type!r} does not "
                f"belong to aggregate {row.aggregate!r}: one aggregate is one price, named "
                f"<sku>/<price_type> ({price_aggregate(price.sku, price.price_type)!r}), "
                "or the sku alone where a store has one price type",
            )
        return dump_json(price.wire()), (price.sku, price.price_type)
    # postings and configured kinds: passed through, values unchanged
    return dump_json(data), None


def same_payload(kind: str, stored: str, given: str) -> bool:
    """Two canonical payloads of one version carry the same message. A price's canonical JSON
    keeps the price's digits as 1C wrote them (it is sent so), and two prices equal as decimals
    (``"840.0"``, ``"840.00"``, the JSON number 840) are one price (contract 1): compared by
    value. Every other payload is compared as its canonical text, exactly."""
    if stored == given:
        return True
    if kind != "price":
        return False
    try:
        old, new = json.loads(stored), json.loads(given)
        return bool(
            old.keys() == new.keys()
            and Decimal(old.pop("price")) == Decimal(new.pop("price"))
            and old == new
        )
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError):
        return False


REPEATED_IN_PACKAGE = "повтор в пакете"


def _check_later_offer(row: StagingRow, payload: str) -> None:
    """Within one 1C package the later offer of an aggregate wins (contract 15): an earlier
    one of another price is ``invalid-contract``; of the same price it is the same message (a
    duplicate, or the message the later one duplicates)."""
    later = row.later_offer
    if later is None:
        return
    try:
        theirs: str | None = _canonical_payload(replace(row, payload=later, later_offer=None))
    except (ContractError, ValueError, TypeError, RecursionError):
        theirs = None  # the later offer is refused itself: it still wins, and this one is not sent
    if theirs is None or not same_payload(row.kind, theirs, payload):
        raise ContractError(
            Reason.INVALID_CONTRACT,
            f"{REPEATED_IN_PACKAGE}: a later offer of the same 1C package maps to aggregate "
            f"{row.aggregate!r} too, with another price; the later one in the document wins and "
            "this one is not sent (two goods sharing one Артикул, or one Ид twice)",
        )


def _encodable(name: str, value: str | None) -> None:
    # JSON may escape a lone UTF-16 surrogate ("\\ud800"): valid JSON, but no text a database
    # or the site can store. Refuse it here rather than fail the whole chunk (or, in the JSON
    # intake, the whole request) later.
    if value is None or value.isascii():  # only a non-ASCII text can hold a surrogate
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ContractError(
            Reason.INVALID_CONTRACT, f"{name} contains an unpaired UTF-16 surrogate"
        ) from None


NAME_LIMIT = 500  # staging_intents.name


def product_name(value: Any) -> str | None:
    """A staging row's ``name`` as the service keeps it: text, printable, at most 500
    characters; anything else is no name. A name is for people only, so it never rejects
    the row it comes with (a price is not quarantined for its label)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    shown = " ".join(_CONTROL.sub(" ", value).split())[:NAME_LIMIT]
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate
        return None
    return shown or None


def _check_columns(row: StagingRow) -> None:
    """The row's columns hold contract 1's types and lengths, whatever the table allows."""
    for name, limit in STAGING_TEXT_LIMITS.items():
        value = getattr(row, name)
        if value is None and name == "source_ref":
            continue
        if not isinstance(value, str):
            raise ContractError(
                Reason.INVALID_CONTRACT, f"{name} must be text, not {type(value).__name__}"
            )
        if len(value) > limit:
            raise ContractError(
                Reason.INVALID_CONTRACT,
                f"{name} is too long: {len(value)} characters, the contract allows at most "
                f"{limit} (VARCHAR({limit}))",
            )
    if row.name_chars > NAME_LIMIT:
        raise ContractError(
            Reason.INVALID_CONTRACT,
            f"name is too long: {row.name_chars} characters, the contract allows at most "
            f"{NAME_LIMIT} (VARCHAR({NAME_LIMIT}))",
        )
    if not isinstance(row.payload, str):
        raise ContractError(
            Reason.INVALID_CONTRACT, f"payload must be text, not {type(row.payload).__name__}"
        )
    for name in ("kind", "aggregate", "schema_version", "source_ref"):
        _encodable(name, getattr(row, name))
    version = row.aggregate_version
    if type(version) is not int or version > MAX_VERSION:
        raise ContractError(
            Reason.INVALID_CONTRACT,
            f"aggregate_version {str(version)[:40]} is not a whole number from 1 to 2^63-1 "
            "(BIGINT)",
        )
    if version >= PACKAGE_VERSIONS_FROM and not row.package:
        raise ContractError(
            Reason.INVALID_CONTRACT,
            f"aggregate_version {version} is not below 2^62 ({PACKAGE_VERSIONS_FROM}): the "
            "numbers from 2^62 up are kept for the 1C exchange's packages",
        )


def validate(row: StagingRow, kinds: dict[str, Policy]) -> Accepted | Rejected:
    """Decide what one staging row becomes. Never raises for bad data."""
    try:
        if row.defect is not None:
            raise ContractError(Reason.INVALID_CONTRACT, f"unreadable staging row: {row.defect}")
        _check_columns(row)
        if row.kind not in kinds:
            raise ContractError(Reason.UNKNOWN_KIND, f"kind {row.kind!r} is not configured")
        if not row.aggregate or not row.aggregate.strip() or _CONTROL.search(row.aggregate):
            raise ContractError(
                Reason.INVALID_CONTRACT, "aggregate must be non-empty printable text"
            )
        if row.source_ref is not None and "\x00" in row.source_ref:
            # PostgreSQL cannot store it at all; SQLite would keep only the text before it.
            raise ContractError(Reason.INVALID_CONTRACT, "source_ref must not contain NUL bytes")
        if row.aggregate_version < 1:
            raise ContractError(
                Reason.INVALID_CONTRACT,
                f"aggregate_version must be 1 or more, not {row.aggregate_version}",
            )
        if row.schema_version not in SUPPORTED_SCHEMAS:
            raise ContractError(
                Reason.UNSUPPORTED_SCHEMA,
                f"schema_version {row.schema_version!r} of kind {row.kind!r} is not supported "
                f"(supported: {', '.join(sorted(SUPPORTED_SCHEMAS))})",
            )
        check_nesting(row.payload)
        payload, price = _canonical(row)
        _encodable("payload", payload)
        _check_later_offer(row, payload)
    except ContractError as exc:
        return Rejected(row, exc.reason, exc.detail[:1000])
    except (ValueError, TypeError, RecursionError) as exc:
        # A check that did not expect this data (the fast path once let RecursionError out):
        # the row still becomes a quarantine record, and the rows behind it go on.
        detail = f"the row could not be checked: {type(exc).__name__}: {exc}"
        return Rejected(row, Reason.INVALID_CONTRACT, detail[:1000])
    return Accepted(row, message_id(row.kind, row.aggregate, row.aggregate_version), payload, price)
