"""The bounds and checks the settings' groups share: how long a duration may be, what counts as
loopback, a CA bundle's TLS context, a setting's variable name.
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
import ssl
from pathlib import Path
from typing import Any

SUPPORTED_DIALECTS = ("sqlite", "postgresql")

# Bounds (issue 12 item 7). A duration is added to "now" (a lease's end, a retry's time, a gap's
# deadline): ten years keeps every such sum far inside what a datetime and the databases hold,
# and is longer than any wait that means something. Infinity and NaN are refused: "never" is
# written as the bound itself.
MAX_SECONDS = 315_360_000  # 10 years of 365 days
MAX_SECONDS_TEXT = "315360000 (10 years)"
# Counts that reach SQL as parameters of INTEGER columns stay far below 2**31.
MAX_ATTEMPTS = 1_000_000
# The width of every worker column (messages.locked_by, history.worker, workers.worker_id).
WORKER_ID_MAX = 200


def worker_live_within(lease_seconds: float, poll_interval: float) -> float:
    """``Settings.live_within`` of these two settings."""
    return max(lease_seconds, 3 * poll_interval)


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[-WORKER_ID_MAX:]


def _distinct_text(values: list[str]) -> list[str]:
    return list(dict.fromkeys(value.strip() for value in values if value.strip()))


def _finite_seconds(value: Any, *, most: float = MAX_SECONDS, unit: str = "seconds") -> Any:
    """Before pydantic's own checks: infinity, NaN and values past the bound are refused with a
    message that says what to write instead."""
    try:
        number = float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return value  # not a number at all: pydantic says so
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if number is None or isinstance(value, bool):
        return value
    if math.isnan(number):
        raise ValueError(f"must be a number of {unit}, not NaN")
    if math.isinf(number) or number > most:
        bound = MAX_SECONDS_TEXT if most == MAX_SECONDS else f"{most:.15g}"
        raise ValueError(
            f"must be a finite number of {unit} greater than 0 and at most {bound}; for "
            f"(practically) never, write {most:.15g}"
        )
    return value


def _variable(name: str, *, from_file: bool = False) -> str:
    """The environment variable of a setting, from its field name or the alias it was read
    under: ``onec_password``, ``1c_password`` and ``exchange_1c_password`` are all
    ``EXCHANGE_1C_PASSWORD`` (the one place that names a variable: errors, checks)."""
    name = name.lower().removeprefix("exchange_")
    if name.startswith("onec_"):
        name = "1c_" + name.removeprefix("onec_")
    return "EXCHANGE_" + name.upper() + ("_FILE" if from_file else "")


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost: a site on this machine, where plain http:// is safe."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_context(ca_bundle: Path) -> ssl.SSLContext:
    """A verifying TLS context that trusts the CAs in ``ca_bundle`` (PEM) and no others.

    Raises ValueError with one line when the file cannot be used.
    """
    if not ca_bundle.is_file():
        raise ValueError(f"CA bundle not found or not a file: {ca_bundle}")
    try:
        return ssl.create_default_context(cafile=str(ca_bundle))
    except OSError as exc:  # ssl.SSLError is an OSError too: not PEM, no certificate
        reason = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
        raise ValueError(f"CA bundle {ca_bundle} cannot be used: {reason}") from None
