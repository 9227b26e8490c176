"""Wrong passwords are counted per serve process (issue 21 follow-up), and that is stated where
an operator reads it. Contract 9: an unauthenticated request changes nothing in the database
(anyone can send hundreds a second), so the sign-in throttle cannot keep its counts there,
where several serve processes on one database (or a restarted one) would share them; the
limit is per process, in ``exchange serve --help`` and docs/deployment.md, with the proxy's
bound for those who run several."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from sqlalchemy import inspect, text
from typer.testing import CliRunner
from web_helpers import USER, running, web_settings
from workbench_helpers import log_in

from exchange.cli import app
from exchange.db.engine import make_engine

ROOT = Path(__file__).resolve().parents[2]


def test_serve_help_and_the_deployment_guide_state_the_per_process_limit() -> None:
    shown = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "Wrong passwords are slowed per serve process" in said
    assert "Several serve processes on one database give a guesser that many times" in said
    guide = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "### Wrong passwords: counted per serve process" in guide
    assert "limit_req_zone" in guide.split("### Wrong passwords")[1].split("###")[0]


def counts(db_url: str) -> dict[str, int]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            return {
                table: connection.execute(text(f'SELECT count(*) FROM "{table}"')).scalar_one()
                for table in inspect(connection).get_table_names()
            }
    finally:
        engine.dispose()


@pytest.mark.timing  # each wrong password's answer is held its penalty (1 s, 2 s, ...)
def test_wrong_passwords_at_every_door_change_nothing_in_the_database(
    db_url: str, tmp_path: Path
) -> None:
    """Why the counts are not shared through the database: no row per wrong password, on
    either database; only the summary of refused sign-ins (contract 15: at most a row a minute
    per way in, never the name or address tried)."""
    wrong = base64.b64encode(f"{USER}:not-it".encode()).decode()
    with running(web_settings(db_url, tmp_path / "1c")) as base:
        before = counts(db_url)
        with httpx.Client(base_url=base, timeout=60) as client:
            signed = log_in(client, "admin", "not-it")
            assert signed.status_code == 401, signed.text[:200]
            onec = client.get(
                "/1c_exchange.php?type=catalog&mode=checkauth",
                headers={"Authorization": f"Basic {wrong}"},
            )
            assert onec.text.startswith("failure")
            intake = client.post(
                "/api/v1/intents", json={"intents": []}, headers={"Authorization": "Bearer x"}
            )
            assert intake.status_code in (401, 429)
        after = counts(db_url)
        summaries = after.pop("sign_in_refusals") - before.pop("sign_in_refusals")
        assert after == before
        assert summaries <= 3  # one per way in at most
