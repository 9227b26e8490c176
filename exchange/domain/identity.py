"""Message identity: the one formula for ``message_id`` (contract 2).

    message_id = "<kind>.<aggregate>.v<version>.<hash>"

- ``kind`` and ``aggregate`` with Cyrillic letters transliterated (``_LATIN``: GOST 7.79-2000
  system B without its marks, which are outside the id's letters: «Кофе-1» is
  ``Kofe-1``), then every character outside ``A-Z a-z 0-9 _ -`` replaced by ``_``, cut to 60
  and 80 characters: they are there for people reading logs and reports;
- ``hash`` = the first 24 hex digits of SHA-256 over the UTF-8 bytes of
  ``kind + "\\n" + aggregate + "\\n" + str(version)``: it makes the id unique even when the
  readable part is cut or folded (``SKU 17`` and ``SKU_17`` differ here).

The result is ASCII, at most 60+1+80+2+20+1+24 = 188 characters, safe in an HTTP header, and
depends on nothing but (kind, aggregate, version): the same however many times a row is taken.

A quarantine record of a rejected staging row has an id of its own, ``rejected-<staging id>``:
the derived id may already belong to the real message.

Before 2026-12 the readable part was not transliterated (a Cyrillic aggregate read as
underscores): ``legacy_message_id``. An intent whose message was made then keeps that id for
good (intake looks for it: ``staging_store.settle_ids``), so a row sent again is still its
duplicate and a retry still carries the same Idempotency-Key; only new intents get the new
form. The table is the project's own, never a library's, so that no upgrade of anything can
change the id of an intent.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# GOST 7.79-2000 system B (Russian, Ukrainian, Belarusian letters), without its marks (the
# backquote of ъ, ь and э, the apostrophe of ы: outside the id's letters). Frozen: a change
# here changes the id of every intent that holds the letter (see ``legacy_message_id``).
_GOST_B = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "yo", "ж": "zh",
    "з": "z", "и": "i", "й": "j", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
    "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "x", "ц": "cz",
    "ч": "ch", "ш": "sh", "щ": "shh", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu",
    "я": "ya", "є": "ye", "і": "i", "ї": "yi", "ґ": "g", "ў": "u",
}  # fmt: skip
_LATIN = str.maketrans(
    {**_GOST_B, **{letter.upper(): latin.capitalize() for letter, latin in _GOST_B.items()}}
)


def _readable(value: str, limit: int) -> str:
    return _UNSAFE.sub("_", value.translate(_LATIN))[:limit] or "_"


def _digest(kind: str, aggregate: str, version: int) -> str:
    return hashlib.sha256(f"{kind}\n{aggregate}\n{version}".encode()).hexdigest()[:24]


def message_id(kind: str, aggregate: str, version: int) -> str:
    digest = _digest(kind, aggregate, version)
    return f"{_readable(kind, 60)}.{_readable(aggregate, 80)}.v{version}.{digest}"


def legacy_message_id(kind: str, aggregate: str, version: int) -> str:
    """The id the formula gave before 2026-12 (no transliteration): a message made then
    keeps it. The same as ``message_id`` unless kind or aggregate holds a Cyrillic letter."""
    digest = _digest(kind, aggregate, version)
    legacy = (_UNSAFE.sub("_", kind)[:60] or "_", _UNSAFE.sub("_", aggregate)[:80] or "_")
    return f"{legacy[0]}.{legacy[1]}.v{version}.{digest}"


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
