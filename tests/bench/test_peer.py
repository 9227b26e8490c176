"""The peer (bench/peer.py, issue 35 item 7) does the service's job as procrastinate would: one
job per SKU, each POSTing that SKU's latest price with the service's message identity as its
Idempotency-Key, once; so its rate is set against a like delivery."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.peer import price_message
from exchange.targets.shop_api.client import body

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "peer-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.timeout(180)
def test_procrastinate_delivers_each_skus_latest_version_once(empty_pg_url: str) -> None:
    site = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fastsite.py"), "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert site.stdout is not None
        found = re.search(r"http://\S+", site.stdout.readline())
        assert found, "fastsite did not start"
        url = found.group(0)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.peer",
                "--database-url",
                empty_pg_url,
                "--site-url",
                url,
                "--token",
                TOKEN,
                "--jobs",
                "12",
                "--versions",
                "3",
                "--concurrency",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
            cwd=ROOT,
        )
        assert 0 == out.returncode, out.stderr[-500:]
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        assert {"succeeded": 12} == figures["statuses"]
        with httpx.Client(base_url=url, timeout=30) as client:
            stats = client.get("/bench/stats").json()
            # version 3 is what the site holds: the same SKU at version 2 is stale
            older = price_message(0, 2)
            stale = client.post(
                "/api/v1/updates",
                content=body(older),
                headers={**AUTH, "Idempotency-Key": older.message_id},
            )
            # and the key the peer sent is the service's: the same body again is a replay
            latest = price_message(0, 3)
            replay = client.post(
                "/api/v1/updates",
                content=body(latest),
                headers={**AUTH, "Idempotency-Key": latest.message_id},
            )
            replays = client.get("/bench/stats").json()["replays"]
        assert (12, 12, 1) == (
            stats["effects"],
            stats["distinct_effect_keys"],
            stats["max_effects_per_key"],
        )
        assert (409, 3) == (stale.status_code, stale.json()["current_version"])
        assert (200, 1) == (replay.status_code, replays)
    finally:
        site.terminate()
        site.wait(timeout=30)
        if site.stdout is not None:
            site.stdout.close()
