"""Russian plural forms: «1 сообщение», «2 сообщения», «5 сообщений» (and 11–14 take the
third form). The one place every Russian text with a number gets its noun's form from."""

from __future__ import annotations


def plural(count: int, one: str, few: str, many: str) -> str:
    """The form of a noun after ``count``: ``one`` (1, 21, 101), ``few`` (2–4, 22–24) or
    ``many`` (0, 5–20, 11–14, 25–30)."""
    n = abs(count)
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many


def counted(count: int, one: str, few: str, many: str) -> str:
    """``count`` and its noun: «2 сообщения»."""
    return f"{count} {plural(count, one, few, many)}"
