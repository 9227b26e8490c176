"""Masking what the report must not show (contract 8): pure, no database, no settings.

- Payload fields named in ``EXCHANGE_REPORT_MASK_FIELDS`` are replaced by ``***`` wherever they
  occur in the JSON payload, at any depth, whatever their value (a nested object included).
  Names match case-insensitively: 1C configurations spell ``INN`` and ``inn`` alike.
- The values those fields held are then scrubbed from every other text of the same entry
  (the site may echo a payload in its error body, an operator may paste one into a note).
- Known secrets (the site token, the database password) are scrubbed from every text, in any
  quoting (``exchange.secrets.secret_forms``: repr, JSON, percent-encoded, HTML), by the
  one rule of every output (``exchange.secrets.mask_secrets``: never inside a word). The
  report never reads settings; the caller hands these in, so that a token 1C wrote into a
  payload by mistake does not travel on in a report either.

A payload that is not JSON (a rejected staging row) cannot be walked; its ``"field": value``
pairs are masked by pattern instead, which catches the usual cases of broken JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from exchange.secrets import mask_secrets, secret_forms

MASK = "***"
# Shorter payload values would blank out ordinary words and numbers all over the report (a
# masked "12" would hide every standalone 12). Secrets are masked whatever their length.
MIN_SCRUBBED_LENGTH = 6


class _Number(str):
    """A JSON number kept as its source text: money keeps its exact digits when re-written."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its pairs, in order, duplicates kept: re-written as 1C wrote it."""


def _load(text: str) -> Any:
    return json.loads(
        text,
        parse_float=_Number,
        parse_int=_Number,
        parse_constant=_Number,
        object_pairs_hook=_Object,
    )


def _dump(value: Any) -> str:
    if isinstance(value, _Object):
        return "{" + ", ".join(f"{_dump(k)}: {_dump(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=False)


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, _Object):
        for _, v in value:
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str):
        yield str.__str__(value)


class Redactor:
    def __init__(self, mask_fields: Iterable[str] = (), secrets: Iterable[str | None] = ()):
        self.fields = frozenset(name.casefold() for name in mask_fields if name)
        self.secrets = tuple(dict.fromkeys(form for s in secrets if s for form in secret_forms(s)))
        self._pairs = (
            re.compile(
                r'("(?:'
                + "|".join(re.escape(name) for name in sorted(self.fields))
                + r')"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]\s]+)',
                re.IGNORECASE,
            )
            if self.fields
            else None
        )

    def payload(self, text: str) -> tuple[str, tuple[str, ...]]:
        """The payload with masked fields and secrets, and the values it hid."""
        if not self.fields:
            return self.text(text), ()
        try:
            masked, hidden, changed = self._mask(_load(text))
            shown = _dump(masked) if changed else text  # untouched payloads stay verbatim
        except (ValueError, RecursionError):  # not JSON, or nested beyond reason
            hidden = [m.group(2).strip('"') for m in self._pattern().finditer(text)]
            shown = self._pattern().sub(lambda m: f'{m.group(1)}"{MASK}"', text)
        found = _scrubbable(hidden)
        return self.text(shown, found), found

    def text(self, value: str, hidden: Sequence[str] = ()) -> str:
        """``value`` with every secret and every hidden payload value replaced by ``***``."""
        return mask_secrets(value, (*self.secrets, *hidden))

    def optional(self, value: str | None, hidden: Sequence[str] = ()) -> str | None:
        return None if value is None else self.text(value, hidden)

    def _pattern(self) -> re.Pattern[str]:
        assert self._pairs is not None
        return self._pairs

    def _mask(self, value: Any) -> tuple[Any, list[str], bool]:
        if isinstance(value, _Object):
            pairs, hidden, changed = _Object(), list[str](), False
            for key, inner in value:
                if key.casefold() in self.fields:
                    pairs.append((key, MASK))
                    hidden.extend(_leaves(inner))
                    changed = True
                else:
                    masked, found, was_changed = self._mask(inner)
                    pairs.append((key, masked))
                    hidden.extend(found)
                    changed = changed or was_changed
            return pairs, hidden, changed
        if isinstance(value, list):
            items, hidden, changed = list[Any](), list[str](), False
            for inner in value:
                masked, found, was_changed = self._mask(inner)
                items.append(masked)
                hidden.extend(found)
                changed = changed or was_changed
            return items, hidden, changed
        return value, [], False


def _scrubbable(values: Iterable[str]) -> tuple[str, ...]:
    # Longest first: a secret that contains another is replaced whole.
    unique = {v for v in values if len(v) >= MIN_SCRUBBED_LENGTH and v != MASK}
    return tuple(sorted(unique, key=lambda v: (-len(v), v)))
