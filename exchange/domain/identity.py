"""Message identity: the one formula for ``message_id`` (contract 2).

    message_id = "<kind>.<aggregate>.v<version>.<hash>"

- ``kind`` and ``aggregate`` with every character outside ``A-Z a-z 0-9 _ -`` replaced by
  ``_``, cut to 60 and 80 characters: they are there for people reading logs and reports;
- ``hash`` = the first 24 hex digits of SHA-256 over the UTF-8 bytes of
  ``kind + "\\n" + aggregate + "\\n" + str(version)``: it makes the id unique even when the
  readable part is cut or folded (``SKU 17`` and ``SKU_17`` differ here).

The result is ASCII, at most 60+1+80+2+20+1+24 = 188 characters, safe in an HTTP header, and
depends on nothing but (kind, aggregate, version): the same however many times a row is taken.

A quarantine record of a rejected staging row has an id of its own, ``rejected-<staging id>``:
the derived id may already belong to the real message.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _readable(value: str, limit: int) -> str:
    return _UNSAFE.sub("_", value)[:limit] or "_"


def message_id(kind: str, aggregate: str, version: int) -> str:
    digest = hashlib.sha256(f"{kind}\n{aggregate}\n{version}".encode()).hexdigest()[:24]
    return f"{_readable(kind, 60)}.{_readable(aggregate, 80)}.v{version}.{digest}"


def rejected_id(staging_id: int) -> str:
    return f"rejected-{staging_id}"


MAX_VERSION = 2**63 - 1  # an aggregate version is a positive BIGINT (contract 1)
# The versions 1C and other senders may write (the staging table, the JSON intake) are below
# this; the numbers from it up to MAX_VERSION are the 1C packages' (contract 1, 9a), so that a
# package, numbered above every version before it, always gets a number a BIGINT holds.
PACKAGE_VERSIONS_FROM = 2**62


def is_version(value: object) -> bool:
    """A valid aggregate version: an int (not a bool) from 1 to MAX_VERSION."""
    return type(value) is int and 1 <= value <= MAX_VERSION
