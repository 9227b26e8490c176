"""Contract 5: what a site answer means (``classify.classify``, then ``retry.decide``)."""

# Assertions read `expected == actual`, as the tests are written against the contract.

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest

from exchange.domain.reasons import Reason
from exchange.domain.retry import RetryPolicy, decide
from exchange.domain.states import State
from exchange.domain.verdicts import Verdict
from exchange.targets.shop_api.answers import RECEIPT_CAP, classify
from exchange.targets.shop_api.client import Response, TransportFailure

VERSION = 184
NOW = datetime(2026, 8, 23, 7, 20, tzinfo=UTC)
POLICY = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=300.0)


def answer(status: int, body: object = b"", retry_after: str | None = None) -> Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Response(status, raw, retry_after)


def outcome(result: Response | TransportFailure) -> tuple[Verdict, State, str | None]:
    classification = classify(result, VERSION)
    decision = decide(classification, attempt=1, now=NOW, policy=POLICY, rng=random.Random(1))
    return classification.verdict, decision.to_state, decision.reason


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_is_delivered(status: int) -> None:
    assert (Verdict.DELIVERED, State.DELIVERED, None) == outcome(answer(status, {"ok": True}))


def test_2xx_with_receipt_stores_the_receipt() -> None:
    result = classify(answer(200, {"receipt": "R-000184", "other": 1}), VERSION)

    assert (Verdict.DELIVERED, "R-000184") == (result.verdict, result.receipt)


def test_2xx_with_structured_receipt_stores_it_as_json() -> None:
    result = classify(answer(200, {"receipt": {"id": 7, "at": "today"}}), VERSION)

    assert {"id": 7, "at": "today"} == json.loads(result.receipt or "")


def test_2xx_without_receipt_stores_the_whole_body() -> None:
    result = classify(answer(201, b'{"accepted": true}'), VERSION)

    assert (Verdict.DELIVERED, '{"accepted": true}') == (result.verdict, result.receipt)


def test_2xx_with_a_plain_text_body_stores_the_text() -> None:
    result = classify(answer(200, "принято".encode()), VERSION)

    assert "принято" == result.receipt


def test_2xx_whole_body_receipt_is_capped() -> None:
    body = b"x" * (RECEIPT_CAP * 3)

    result = classify(answer(200, body), VERSION)

    assert "x" * RECEIPT_CAP == result.receipt


def test_409_stale_with_the_message_version_is_delivered() -> None:
    stale = answer(409, {"error": "stale", "current_version": VERSION})

    assert (Verdict.DELIVERED, State.DELIVERED, None) == outcome(stale)
    assert VERSION == classify(stale, VERSION).site_version


@pytest.mark.parametrize("current", [VERSION + 1, VERSION + 1000])
def test_409_stale_with_a_greater_version_is_cancelled_stale_at_site(current: int) -> None:
    stale = answer(409, {"error": "stale", "current_version": current})

    assert (Verdict.STALE_AT_SITE, State.CANCELLED, Reason.STALE_AT_SITE) == outcome(stale)
    assert current == classify(stale, VERSION).site_version


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"conflict",
        {"error": "in-progress"},
        {"error": "stale"},
        {"error": "stale", "current_version": "185"},
        {"error": "stale", "current_version": True},
        {"error": "stale", "current_version": None},
        [{"error": "stale", "current_version": 185}],
    ],
    ids=[
        "empty",
        "text",
        "other-error",
        "stale-without-version",
        "version-as-string",
        "version-as-bool",
        "version-null",
        "not-an-object",
    ],
)
def test_any_other_409_is_temporary(body: object) -> None:
    assert (Verdict.TEMPORARY, State.DELAYED, None) == outcome(answer(409, body))


def test_other_409_honours_retry_after() -> None:
    classification = classify(answer(409, b"busy", retry_after="7"), VERSION)
    decision = decide(classification, attempt=1, now=NOW, policy=POLICY, rng=random.Random(1))

    assert 7.0 == decision.delay_s


@pytest.mark.parametrize("status", [400, 404, 410, 413, 422])
def test_terminal_status_is_quarantined_http_code(status: int) -> None:
    expected = (Verdict.TERMINAL, State.QUARANTINED, f"http-{status}")

    assert expected == outcome(answer(status, {"error": "bad"}))


@pytest.mark.parametrize("status", [401, 403])
def test_401_403_pause_delivery_without_charging_or_quarantine(status: int) -> None:
    classification = classify(answer(status), VERSION)
    decision = decide(classification, attempt=5, now=NOW, policy=POLICY, rng=random.Random(1))

    assert Verdict.PAUSE == classification.verdict
    # The fifth attempt is not charged: four were, so the message waits as delayed, due at once.
    assert (State.DELAYED, False, None) == (decision.to_state, decision.charged, decision.reason)


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_temporary_status_is_delayed(status: int) -> None:
    assert (Verdict.TEMPORARY, State.DELAYED, None) == outcome(answer(status, b"try later"))


@pytest.mark.parametrize("status", [429, 503])
def test_temporary_status_carries_retry_after(status: int) -> None:
    result = classify(answer(status, retry_after="120"), VERSION)

    assert "120" == result.retry_after


@pytest.mark.parametrize(
    "status",
    [
        *(100, 101, 199, 300, 301, 302, 303, 304, 307, 308),  # 1xx, 3xx
        *(402, 405, 406, 411, 415, 418, 451, 499),  # other 4xx
        *(501, 505, 511, 599),  # 5xx the table does not name
    ],
)
def test_anything_else_is_unknown_and_quarantined_unknown_response(status: int) -> None:
    expected = (Verdict.UNKNOWN, State.QUARANTINED, Reason.UNKNOWN_RESPONSE)

    assert expected == outcome(answer(status, b"?"))


@pytest.mark.parametrize("status", [200, 409, 500])
def test_unreadable_body_is_unknown(status: int) -> None:
    unreadable = Response(status, b'{"rece', None, body_error="RemoteProtocolError: cut off")

    expected = (Verdict.UNKNOWN, State.QUARANTINED, Reason.UNKNOWN_RESPONSE)
    assert expected == outcome(unreadable)


def test_unknown_is_never_retried_even_on_the_first_attempt() -> None:
    decision = decide(
        classify(answer(418), VERSION), attempt=1, now=NOW, policy=POLICY, rng=random.Random(1)
    )

    assert (State.QUARANTINED, None) == (decision.to_state, decision.next_try_at)


def test_transport_failure_that_may_have_been_sent_is_temporary_result_unknown() -> None:
    failure = TransportFailure("ReadTimeout", "timed out", maybe_sent=True)

    classification = classify(failure, VERSION)
    decision = decide(classification, attempt=1, now=NOW, policy=POLICY, rng=random.Random(1))

    assert (Verdict.TEMPORARY, True) == (classification.verdict, classification.result_unknown)
    assert (State.DELAYED, True) == (decision.to_state, decision.result_unknown)
    assert "ReadTimeout" == decision.error_class


def test_transport_failure_never_sent_is_temporary_not_result_unknown() -> None:
    failure = TransportFailure("ConnectError", "connection refused", maybe_sent=False)

    classification = classify(failure, VERSION)

    assert (Verdict.TEMPORARY, False) == (classification.verdict, classification.result_unknown)
    assert "ConnectError" == classification.error_class


@pytest.mark.parametrize(
    "result",
    [
        answer(200, b'{"receipt": "R-\\u0000-1"}'),
        answer(200, b'{"receipt": {"id": "\\u0000"}}'),
        answer(200, b"plain\x00text"),
        answer(409, {"error": "stale", "current_version": VERSION, "receipt": "R\u0000"}),
        answer(500, b"boom\x00boom"),
        answer(400, b"bad\x00request"),
        answer(418, b"\x00"),
        TransportFailure("ReadError", "peer said \x00", maybe_sent=True),
    ],
    ids=["receipt", "structured-receipt", "body", "409", "500", "400", "418", "transport"],
)
def test_nothing_the_site_says_reaches_the_database_with_a_nul(
    result: Response | TransportFailure,
) -> None:
    """PostgreSQL refuses NUL in text: one such answer failed the record of its whole batch."""
    classification = classify(result, VERSION)
    decision = decide(classification, attempt=1, now=NOW, policy=POLICY, rng=random.Random(1))
    for text in (classification.detail, classification.receipt, decision.detail, decision.receipt):
        assert "\x00" not in (text or "")
    # Written again as JSON, a structured receipt escapes the NUL itself ("\u0000", six
    # characters); everywhere else it becomes U+FFFD.
    kept = classification.receipt or classification.detail
    assert "\ufffd" in kept or '"\\u0000"' in kept
