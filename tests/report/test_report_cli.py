"""The report from the command line, as operators and the service run it: ``exchange
quarantine export`` in each format, and ``exchange run`` writing the scheduled report.
Real subprocesses (``python -m exchange``), with a controlled environment.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import openpyxl
import pytest
from reportdb import PASSWORD, Built
from reporttools import TOKEN, parse_csv, parse_html
from sqlalchemy.engine import make_url

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def environment(db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        EXCHANGE_DATABASE_URL=db_url,
        EXCHANGE_SITE_TOKEN=TOKEN,
        EXCHANGE_REPORT_MASK_FIELDS='["api_key", "password"]',
        **extra,
    )
    return env


def with_password(db_url: str) -> str:
    """The URL with a password (PostgreSQL here trusts local users and ignores it)."""
    url = make_url(db_url)
    if url.get_backend_name() != "postgresql":
        return db_url
    return url.set(password=PASSWORD).render_as_string(hide_password=False)


def start(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "exchange", *args],
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=timeout)
    shown = f"{process.args!r}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}"
    assert "Traceback" not in stdout + stderr, shown
    assert TOKEN not in stdout + stderr, shown
    assert PASSWORD not in stdout + stderr, shown
    return process.returncode, stdout, stderr


def test_quarantine_export_writes_every_format_from_the_command_line(
    db_url: str, quarantine: Built, tmp_path: Path
) -> None:
    env = environment(with_password(db_url))
    runs = {
        "report.csv": ["--format", "csv"],  # labels in Russian: the default
        "report.xlsx": ["--format", "xlsx", "--lang", "en"],
        "report.html": [],  # the format from the file's suffix
        "out/report.json": ["--format", "json", "--reason", "http-422"],
    }
    processes = {
        name: start(["quarantine", "export", "--output", name, *extra], env, tmp_path)
        for name, extra in runs.items()
    }
    outputs = {name: finish(process) for name, process in processes.items()}

    for name, (code, stdout, stderr) in outputs.items():
        assert 0 == code, f"{name}: {stdout}{stderr}"
        data = (tmp_path / name).read_bytes()
        assert TOKEN.encode() not in data and PASSWORD.encode() not in data, name
    assert "wrote 6 entries to report.csv (csv)" in outputs["report.csv"][1]

    csv_report = parse_csv((tmp_path / "report.csv").read_bytes(), ";")
    assert {quarantine.superseded, quarantine.refused, quarantine.posting} < {
        row["ID сообщения"] for row in csv_report.rows
    }
    book = openpyxl.load_workbook(io.BytesIO((tmp_path / "report.xlsx").read_bytes()))
    assert ["Summary", "Quarantine", "History"] == book.sheetnames
    assert 7 == book["Quarantine"].max_row
    page = parse_html((tmp_path / "report.html").read_bytes())
    assert "ru" == page.named("html")[0]["lang"] and len(page.named("svg")) == 2
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert {"http-422": 3} == report["summary"]["by_reason"]
    assert "http-422" == report["filters"]["reason"]
    posting = next(e for e in report["entries"] if e["message_id"] == quarantine.posting)
    assert '"api_key": "***"' in posting["payload"]


@SQLITE_ONLY
def test_exchange_run_writes_the_scheduled_report_and_stops_cleanly(
    db_url: str, quarantine: Built, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    env = environment(
        db_url,
        EXCHANGE_SITE_URL="http://127.0.0.1:9",  # nothing is staged: the site is never called
        EXCHANGE_POLL_INTERVAL="0.2",
        EXCHANGE_REPORT_DIR=str(reports),
        EXCHANGE_REPORT_FORMATS='["html", "csv", "xlsx"]',
    )
    process = start(["run"], env, tmp_path)
    try:
        deadline = time.monotonic() + 30
        wanted = [reports / f"quarantine-latest.{ext}" for ext in ("html", "csv", "xlsx")]
        while not all(p.exists() for p in wanted) and process.poll() is None:
            assert time.monotonic() < deadline, "no scheduled report within 30 s"
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
    code, _, stderr = finish(process)

    assert 0 == code, stderr
    assert quarantine.refused in (reports / "quarantine-latest.html").read_text(encoding="utf-8")
    stamped = sorted(p.name for p in reports.glob("quarantine-2*"))
    assert 3 == len(stamped), stamped
    assert "quarantine report written" in stderr


@SQLITE_ONLY
def test_a_bad_report_schedule_stops_exchange_run_with_one_line(
    db_url: str, tmp_path: Path
) -> None:
    env = environment(
        db_url,
        EXCHANGE_SITE_URL="http://127.0.0.1:9",
        EXCHANGE_REPORT_DIR=str(tmp_path / "reports"),
        EXCHANGE_REPORT_CRON="61 * * * *",
    )

    code, stdout, stderr = finish(start(["run"], env, tmp_path))

    assert 2 == code, stdout + stderr
    lines = stderr.splitlines()
    assert 1 == len(lines), stderr
    assert lines[0].startswith("error: ") and "EXCHANGE_REPORT_CRON" in lines[0]
    assert not (tmp_path / "reports").exists()
