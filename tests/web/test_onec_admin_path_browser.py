"""The 1C administrator's path (issue 24 item 13), as docs/1c.ru.md numbers it, run for real:
`exchange migrate` → `exchange serve` (which prints where the workbench and the 1C exchange
answer) → 1C's exchange to the printed address → `exchange run` → `exchange operator add` →
the workbench's «Обмены 1С» shows the file and its outcome. Every command runs as a process;
each outcome is a screenshot in docs/img/ (1c-*.png, with WORKBENCH_SCREENSHOTS=1): the
commands' own output in a terminal-like page, the workbench as it is."""

from __future__ import annotations

import html
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import new_page, shot
from workbench_helpers import PASSWORD

from exchange.dev.cml_gen import CmlOffer, CmlPrice, CmlType, Package, offers_xml
from exchange.dev.onec_client import OneCClient
from exchange.dev.sitesim import SiteSimulator

EXCHANGE = [sys.executable, "-m", "exchange"]
ONEC_USER, ONEC_PASSWORD = "obmen", "obmen-password-1"


def terminal(page: Any, name: str, command: str, output: str) -> None:
    """A command's real output, as a terminal shows it, for the docs."""
    page.set_viewport_size({"width": 1000, "height": 320})
    page.set_content(
        "<pre style='margin:0;padding:16px;min-height:288px;background:#1e1e1e;color:#e0e0e0;"
        "font:14px/1.45 monospace;white-space:pre-wrap'>"
        f"<span style='color:#8ae234'>$</span> {html.escape(command)}\n{html.escape(output)}</pre>"
    )
    shot(page, name)


def offers() -> bytes:
    retail = CmlType("t-retail", "Розничная", "руб")
    purchase = CmlType("t-purchase", "Закупочная", "руб")
    return offers_xml(
        Package(
            types=[retail, purchase],
            offers=[
                CmlOffer(sku, [CmlPrice("t-retail", price, "руб"), CmlPrice("t-purchase", "1")])
                for sku, price in (("SKU-0001", "1290.00"), ("SKU-0002", "349.90"))
            ],
            generated_at="2026-12-01T10:00:00",
        )
    )


@pytest.mark.timeout(180)
def test_the_1c_administrators_checklist_ends_on_the_exchanges_page(
    browser: Any, site: SiteSimulator, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_DATABASE_URL": f"sqlite:///{tmp_path / 'exchange.db'}",
            "EXCHANGE_1C_USER": ONEC_USER,
            "EXCHANGE_1C_PASSWORD": ONEC_PASSWORD,
            "EXCHANGE_1C_PRICE_TYPES": '{"Розничная": "retail"}',
            "EXCHANGE_1C_DIR": str(tmp_path / "1c"),
            "EXCHANGE_HTTP_PORT": "0",
            "EXCHANGE_SITE_URL": site.url,
            "EXCHANGE_SITE_TOKEN": "test-token",
            "EXCHANGE_POLL_INTERVAL": "0.2",
            "EXCHANGE_DISPLAY_TZ": "UTC",
        }
    )
    page = new_page(browser)

    # 1. migrate
    migrated = subprocess.run([*EXCHANGE, "migrate"], env=env, capture_output=True, text=True)
    assert 0 == migrated.returncode, migrated.stderr
    assert "migrated" in migrated.stdout
    terminal(page, "1c-1-migrate", "exchange migrate", migrated.stdout)

    # 2. serve: it says where the workbench and the 1C exchange answer (the JSON intake has no
    # token here: closed, so no address for it; contract 15)
    serving = subprocess.Popen(
        [*EXCHANGE, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        printed: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while "1C exchange" not in printed and time.monotonic() < deadline:
            line = serving.stdout.readline() if serving.stdout else ""
            if ":" in line and line.split(":", 1)[0] in ("workbench", "1C exchange", "JSON intake"):
                what, address = line.split(":", 1)
                printed[what] = address.strip()
        assert {"workbench", "1C exchange"} == set(printed), printed
        base = printed["workbench"].rstrip("/")
        shown = "\n".join(f"{what + ':':<13} {address}" for what, address in printed.items())
        terminal(page, "1c-2-serve", "exchange serve", shown)

        # What 1C does when its administrator presses «Выполнить обмен» on the exchange node
        # whose address is the printed one.
        assert printed["1C exchange"].endswith("/1c_exchange.php")
        onec = OneCClient(base, ONEC_USER, ONEC_PASSWORD, use_zip=False)
        try:
            log = onec.exchange([("offers.xml", offers())])
        finally:
            onec.close()
        assert "success" == log.answers["offers.xml"].status, log.answers

        # 3. run: the prices reach the site
        ran = subprocess.run(
            [*EXCHANGE, "run", "--until-idle", "--max-seconds", "60"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert 0 == ran.returncode, ran.stdout + ran.stderr
        assert site.held_versions(), "the site holds the prices"
        terminal(page, "1c-3-run", "exchange run --until-idle", (ran.stdout + ran.stderr)[-1500:])

        # 4. an operator for the workbench
        added = subprocess.run(
            [*EXCHANGE, "operator", "add", "admin", "--role", "operator"],
            env=env,
            input=PASSWORD + "\n",
            capture_output=True,
            text=True,
        )
        assert 0 == added.returncode, added.stderr
        terminal(page, "1c-4-operator", "exchange operator add admin --role operator", added.stdout)
        page.set_viewport_size({"width": 1366, "height": 768})
        page.goto(printed["workbench"])
        assert page.url.endswith("/login")
        page.fill("input[name=name]", "admin")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit].primary")
        page.wait_for_url(f"{base}/")
        shot(page, "1c-4-dashboard")

        # 5. «Обмены 1С»: the file and its outcome
        page.goto(f"{base}/exchanges")
        text = page.inner_text("main")
        assert "offers.xml" in text and "цены приняты" in text, text
        assert "Принято цен: 2 (предложений: 2)" in text, "the outcome in Russian"
        shot(page, "1c-5-exchanges")
    finally:
        serving.send_signal(signal.SIGTERM)
        serving.communicate(timeout=30)
