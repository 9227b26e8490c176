"""Words 38 item 7: before ``ym_apply_timeout`` a Yandex Market read-back that shows an
earlier update of the offer instead of this one does not know why: that one may have landed
after it, or Yandex's price quarantine may hold this one (a rise), listed a little later and
``withheld`` then. The interim words said «landed after it» as a fact; they say both causes
now, in English and Russian; the words once the timeout has passed keep their cause."""

from __future__ import annotations

from decimal import Decimal

from exchange.targets.yandex_market.target import _Accepted, _landed_late, _Read
from exchange.words import error_words


def _accepted() -> _Accepted:
    return _Accepted(
        offer="Y-1",
        fields={"value": Decimal(130)},
        accepted_at=0.0,
        earlier=[{"value": Decimal(100)}],
    )


def test_the_interim_words_do_not_assert_a_cause_not_known_yet() -> None:
    seen = _Read(found=True, shown={"value": Decimal(100)})
    said = _landed_late(seen, _accepted(), known=False)
    assert said is not None
    assert "landed after it:" not in said and "may have landed after it" in said, said
    assert "may be holding this one in its price quarantine" in said, said
    assert "value=130" in said and "value=100" in said, said
    words = f"{said}; read back in 6 s, sent again if not shown within ym_apply_timeout"
    ru = error_words(words, "ru")
    assert ru != words and "могло примениться после него" in ru, ru
    assert "карантине цен" in ru and "проверка через 6 с" in ru, ru
    # once ym_apply_timeout has passed, unlisted by the quarantine: the cause stands
    late = _landed_late(seen, _accepted())
    assert late is not None and "landed after it: Yandex Market shows that" in late, late
