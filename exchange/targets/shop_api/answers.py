"""Site answer or transport error -> what it means (contract 5). Pure; the one place that reads
site answers.

    2xx                          DELIVERED (receipt = body's "receipt", else the body, capped)
    409 {"error": "stale", N}    N == version: DELIVERED;  N > version: STALE_AT_SITE
    409 otherwise                TEMPORARY (the site is still processing that key)
    400 404 410 413 422          TERMINAL (quarantine http-<code>)
    401 403                      PAUSE (nobody is charged; delivery waits for the site)
    408 425 429 500 502 503 504  TEMPORARY (Retry-After honoured)
    timeouts, connection errors  TEMPORARY (result unknown when the request may have arrived)
    a certificate not trusted    PAUSE, naming the certificate error
    anything else                UNKNOWN (quarantine unknown-response: never guessed temporary)

Everything but the 409 is the table every target shares (exchange/targets/wire.py).

Not in contract 5, read only from the site simulator's withholding switch (a test device,
exchange/dev/sitemodel.py ``withhold_drops``; no real site is known to say it): 202 with
``{"withheld": true}`` is WITHHELD, and ``GET /api/v1/withheld/<message_id>`` answers
``{"state": "live" | "withheld"}`` (``shown``). Any other 2xx stays DELIVERED.
"""

from __future__ import annotations

import json

from exchange.domain.identity import is_version
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import Release, Shown
from exchange.targets.shop_api.client import Response, TransportFailure
from exchange.targets.wire import STATUSES, TLS_ERROR, transport_verdict
from exchange.targets.wire import TERMINAL_STATUSES as TERMINAL_STATUSES  # (ops.metrics)

RECEIPT_CAP = 2000


def classify(result: Response | TransportFailure, version: int) -> Classification:
    if isinstance(result, TransportFailure):
        if result.error_class == TLS_ERROR:
            judged = transport_verdict(result)
            judged.detail = _storable(judged.detail)
            return judged
        return Classification(
            Verdict.TEMPORARY,
            detail=_storable(result.detail),
            error_class=result.error_class,
            result_unknown=result.maybe_sent,
        )
    status = result.status
    if result.body_error is not None:
        return Classification(
            Verdict.UNKNOWN,
            f"HTTP {status} with a body that cannot be read: {_storable(result.body_error)}",
            http_status=status,
            error_class="UnreadableBody",
        )
    if status == 202 and _withheld(result.body):
        return Classification(
            Verdict.WITHHELD,
            "HTTP 202: the site took the price and withholds it from buyers",
            http_status=status,
            receipt=_receipt(result.body),
        )
    if 200 <= status < 300:
        return Classification(
            Verdict.DELIVERED, f"HTTP {status}", http_status=status, receipt=_receipt(result.body)
        )
    if status == 409:  # the shop API's own reading (contract 5), before the shared table
        return _classify_conflict(result, version)
    verdict = STATUSES.verdict(status)
    if verdict is Verdict.PAUSE:
        return Classification(
            Verdict.PAUSE, f"HTTP {status}: the site refused the token", http_status=status
        )
    return Classification(
        verdict,
        f"HTTP {status}: {_snippet(result.body)}",
        http_status=status,
        retry_after=result.retry_after if verdict is Verdict.TEMPORARY else None,
    )


def _classify_conflict(result: Response, version: int) -> Classification:
    body = _json_object(result.body)
    current = body.get("current_version") if body else None
    if (
        body
        and body.get("error") == "stale"
        and isinstance(current, int)
        and not isinstance(current, bool)
    ):
        if not is_version(current):
            # 2^63 and beyond, 0, -1: no version any table holds. Recording it would fail the
            # whole batch's transaction (PostgreSQL) or store a float (SQLite), and it cannot
            # be compared with ours: an answer the service does not understand. (A version
            # that is no integer at all, "185" or null, is "any other 409", as before.)
            return Classification(
                Verdict.UNKNOWN,
                f"HTTP 409 stale, but current_version {str(current)[:40]} is not a version "
                "(1 to 2^63-1)",
                http_status=409,
            )
        if current == version:
            return Classification(
                Verdict.DELIVERED,
                f"HTTP 409: the site already holds version {current}",
                http_status=409,
                receipt=_receipt(result.body),
                site_version=current,
            )
        if current > version:
            return Classification(
                Verdict.STALE_AT_SITE,
                f"HTTP 409: the site holds newer version {current}",
                http_status=409,
                site_version=current,
            )
        return Classification(
            Verdict.UNKNOWN,
            f"HTTP 409 stale, but the site holds older version {current} than {version}",
            http_status=409,
            site_version=current,
        )
    return Classification(
        Verdict.TEMPORARY,
        f"HTTP 409: the site is still processing this key: {_snippet(result.body)}",
        http_status=409,
        retry_after=result.retry_after,
    )


def _withheld(body: bytes) -> bool:
    parsed = _json_object(body)
    return parsed is not None and parsed.get("withheld") is True


def shown(result: Response | TransportFailure) -> Shown:
    """What the simulator's ``/api/v1/withheld/<id>`` says buyers see (see the docstring);
    anything else is UNKNOWN (asked again later)."""
    if isinstance(result, TransportFailure) or result.status != 200:
        return Shown.UNKNOWN
    parsed = _json_object(result.body)
    state = parsed.get("state") if parsed else None
    if state == "live":
        return Shown.LIVE
    return Shown.WITHHELD if state == "withheld" else Shown.UNKNOWN


def released(result: Response | TransportFailure) -> Release:
    """The simulator's answer to a release (see the docstring)."""
    if isinstance(result, TransportFailure):
        return Release(False, f"the site did not answer: {_storable(result.detail)}")
    seen = shown(result)
    if seen is Shown.LIVE:
        return Release(True, f"HTTP {result.status}: the site shows it to buyers", seen)
    return Release(False, f"HTTP {result.status}: {_snippet(result.body)}", seen)


def _json_object(body: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _receipt(body: bytes) -> str:
    parsed = _json_object(body)
    if parsed is not None and "receipt" in parsed:
        receipt = parsed["receipt"]
        text = receipt if isinstance(receipt, str) else json.dumps(receipt, ensure_ascii=False)
    else:
        text = body.decode("utf-8", errors="replace")
    return _storable(text[:RECEIPT_CAP])


def _snippet(body: bytes, limit: int = 300) -> str:
    text = _storable(body.decode("utf-8", errors="replace").replace("\n", " ").strip())
    return (text[:limit] + "…") if len(text) > limit else (text or "(empty body)")


def _storable(text: str) -> str:
    """What the site wrote, as text every database stores: PostgreSQL refuses NUL in text
    (and in JSON), so one NUL in an answer failed the recording of the whole batch, cycle
    after cycle. It becomes U+FFFD, the character for what could not be kept."""
    return text.replace("\x00", "\ufffd")
