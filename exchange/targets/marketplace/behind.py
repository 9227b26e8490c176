"""A price in force waiting behind an older one a marketplace's price quarantine holds for its
good: Wildberries' (``targets.wildberries`` ``_behind_quarantine``) and Yandex Market's
(``targets.yandex_market`` ``_in_force``: a repeat refused "already set" while Yandex still
lists another price of the offer, review ym34). The held price must not be confirmed (it would
go live over this one). The phrase each marketplace's words of that wait carry, and its reading
(``waits_behind``): here, apart from the targets' clients (httpx), so that ``status`` and the
other reading commands tell such a wait (``ops.withheld_behind``) without importing one."""

from __future__ import annotations

BEHIND = "but its price quarantine still holds"


def waits_behind(detail: str | None) -> bool:
    """Whether a delivery's last words (a marketplace's ``behind_words``) say it waits behind a
    price the marketplace's quarantine holds for its good."""
    return detail is not None and f", {BEHIND} " in detail
