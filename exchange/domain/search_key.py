"""What search compares a beginning against: a text with its case folded.

Neither database folds the case of every script: SQLite's LIKE and ``lower()`` fold only
Latin letters, PostgreSQL's ``lower()`` folds what the database's locale says (nothing but
Latin under ``C``). So the folded text is written beside the original when a row is written
(the ``*_key`` columns, migration 0017) and searched through its own prefix index, and the
term is folded here the same way: «art-0» finds ``ART-0001``, «арт» finds ``АРТ-7``.
"""

from __future__ import annotations


def search_key(text: str) -> str:
    """``text`` as search compares it: ``str.casefold`` (every script's case, ``ß`` as
    ``ss``). A beginning of a text folds to a beginning of its key."""
    return text.casefold()


def search_key_or_none(text: str | None) -> str | None:
    return None if text is None else search_key(text)
