"""``exchange demo --channels`` says how each marketplace's withheld price is released (review
mpadvice item 9): Yandex Market's with ``exchange withheld release``; Wildberries' by the
seller in its cabinet (research §2.4: its API releases nothing), never with the command."""

from __future__ import annotations

import io

from rich.console import Console

from exchange.dev.demo_channels import _print_summary


def _shop(name: str, target: str) -> dict[str, object]:
    return {
        "name": name,
        "target": target,
        "failing": False,
        "first": 0.5,
        "last": 1.0,
        "newest": 39,
        "skus": 40,
        "twice": 0,
        "older": 0,
        "holds": True,
        "particular": lambda lang: [],
        "withheld": [{"message_id": f"m-{name}", "sku": "SKU-0000", "price": "250", "said": "x"}],
        "withheld_elsewhere": 0,
        "states": {},
    }


def test_each_marketplaces_release_is_said_its_own_way() -> None:
    summary = {
        "seconds": 5.0,
        "refused": 3,
        "failing": "site",
        "outage": 2.0,
        "shops": [_shop("wildberries", "wildberries"), _shop("yandex-market", "yandex-market")],
        "healthy_in_time": True,
        "caught_up": True,
    }
    for lang in ("en", "ru"):
        buffer = io.StringIO()
        _print_summary(Console(file=buffer, width=400), summary, lang)
        printed = buffer.getvalue()
        assert "withheld release m-wildberries" not in printed, printed
        assert "withheld release m-yandex-market --channel yandex-market" in printed, printed
        assert "Карантин цен" in printed, printed
