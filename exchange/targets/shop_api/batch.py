"""The batch API (contract 5b): a claimed batch in chunks, and the site's batch answer read back
as one answer per item, so that ``classify`` judges every item exactly as a single answer.

This is the one place that reads the shape of a batch answer; what an answer *means* stays in
classify.py. What each item gets from the answer to the whole request:

    transport failure (timeout, reset, ...)   that failure: temporary, result unknown if sent
    404                                       nothing: ``endpoint_missing`` -- the site has no
                                              batch endpoint, the worker sends singles instead
    2xx, a results document                   its own result: Response(status, body bytes,
                                              Retry-After from the result or the whole answer)
      an item with no result, two results,    Response(<status of the whole>, body_error=...):
      or a result without a valid status      unknown-response, never guessed delivered
    2xx, anything else (bad JSON, cut off)    the same unknown answer, for every item
    any other answer (5xx, 401/403, 3xx, ...) that answer, as if each item had received it

A results document is ``{"results": [{"message_id": str, "status": int, "body": any}, ...]}``;
``body`` may be absent (an empty body), results for messages not in the request are ignored,
and a result may carry ``"retry_after"`` (seconds or an HTTP date, like the header), which
wins over the whole answer's ``Retry-After`` header.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from decimal import Decimal
from typing import Protocol, TypeVar

from exchange.targets.shop_api.client import BODY_CAP, Response, SiteResult

NOT_FOUND = 404


class _Addressed(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def aggregate(self) -> str: ...


M = TypeVar("M", bound=_Addressed)


def chunks(messages: Sequence[M], size: int) -> list[list[M]]:
    """The messages in order, in chunks of at most ``size`` with at most one per aggregate.

    A claim holds one message per aggregate, so these are plain slices; should it ever hold
    two, the second goes to a later chunk rather than into the same request (contract 5b).
    """
    if size < 1:
        raise ValueError(f"chunk size must be 1 or more, not {size}")
    groups: list[list[M]] = []
    seen: list[set[Hashable]] = []
    for message in messages:
        key = (message.kind, message.aggregate)
        for group, keys in zip(groups, seen, strict=True):
            if len(group) < size and key not in keys:
                group.append(message)
                keys.add(key)
                break
        else:
            groups.append([message])
            seen.append({key})
    return groups


def endpoint_missing(result: SiteResult) -> bool:
    """A 404 to the batch request: the site has no batch endpoint (contract 5b)."""
    return isinstance(result, Response) and result.status == NOT_FOUND


def split(result: SiteResult, message_ids: Sequence[str]) -> dict[str, SiteResult]:
    """The answer each item got, by message_id, from the answer to the whole batch request."""
    if not isinstance(result, Response) or not 200 <= result.status < 300:
        return dict.fromkeys(message_ids, result)
    if result.body_error is not None:
        return dict.fromkeys(message_ids, result)

    def unknown(why: str) -> Response:
        return Response(result.status, b"", body_error=why)

    entries = _results(result.body)
    if isinstance(entries, str):
        return dict.fromkeys(message_ids, unknown(f"the batch answer {entries}"))
    wanted = set(message_ids)
    found: dict[str, list[dict[str, object]]] = {}
    for entry in entries:
        message_id = entry.get("message_id")
        if isinstance(message_id, str) and message_id in wanted:
            found.setdefault(message_id, []).append(entry)
    answers: dict[str, SiteResult] = {}
    for message_id in message_ids:
        matches = found.get(message_id, [])
        if not matches:
            answers[message_id] = unknown("the batch answer has no result for this message")
        elif len(matches) > 1:
            answers[message_id] = unknown("the batch answer has two results for this message")
        else:
            answers[message_id] = _item(matches[0], result) or unknown(
                "the batch answer's result for this message has no valid status"
            )
    return answers


def _results(body: bytes) -> list[dict[str, object]] | str:
    """The result objects of a results document, or what is wrong with it."""
    try:
        # Decimals, so that a number in an item's body keeps its exact text (e.g. a receipt).
        document = json.loads(body, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "is not JSON"
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        return 'is not a results document ({"results": [...]})'
    return [entry for entry in results if isinstance(entry, dict)]


def _item(entry: dict[str, object], whole: Response) -> Response | None:
    status = entry.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        return None
    try:
        body = b"" if "body" not in entry else _dump(entry["body"]).encode("utf-8")
    except RecursionError:
        return None
    retry_after = entry.get("retry_after")
    if isinstance(retry_after, int) and not isinstance(retry_after, bool):
        retry_after = str(retry_after)
    return Response(
        status,
        body[:BODY_CAP],  # the single answer's cap, per item
        retry_after if isinstance(retry_after, str) else whole.retry_after,
    )


# json.dumps(value, ensure_ascii=False), without building an encoder on every call.
_text = json.JSONEncoder(ensure_ascii=False).encode
_PLAIN = frozenset({str, int, bool, type(None)})  # written by json as they were read


def _dump(value: object) -> str:
    """JSON text of a parsed value, decimals written as they were read."""
    if isinstance(value, dict):
        if all(type(v) in _PLAIN for v in value.values()):  # e.g. {"receipt": "R-1"}
            return _text(value)
        items = (f"{_text(k)}: {_dump(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return _text(value)
