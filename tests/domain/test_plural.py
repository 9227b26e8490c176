"""Russian plural forms (issue 24 item 4): «1 сообщение», «2 сообщения», «5 сообщений»."""

from __future__ import annotations

import pytest

from exchange.domain.plural import counted


@pytest.mark.parametrize(
    ("count", "said"),
    [
        (0, "0 сообщений"),
        (1, "1 сообщение"),
        (2, "2 сообщения"),
        (4, "4 сообщения"),
        (5, "5 сообщений"),
        (11, "11 сообщений"),
        (12, "12 сообщений"),
        (14, "14 сообщений"),
        (21, "21 сообщение"),
        (22, "22 сообщения"),
        (101, "101 сообщение"),
        (111, "111 сообщений"),
        (1002, "1002 сообщения"),
    ],
)
def test_a_count_takes_the_russian_form_of_its_noun(count: int, said: str) -> None:
    assert counted(count, "сообщение", "сообщения", "сообщений") == said
