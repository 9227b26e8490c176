"""The report from the command line, as operators and the service run it: ``exchange
quarantine export`` in each format, and ``exchange run`` writing the scheduled report.

The commands run in the test's process (tests/support/clitools.py: ``Cli``, with a controlled
environment, no traceback and no token in what they print); a real ``python -m exchange`` only
where the binary is the point: a bad schedule stops the service at its start with exit 2 and
one line on stderr, which is what a service manager shows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import openpyxl
import pytest
from clitools import Cli, Result, describe, until_stopped
from reportdb import PASSWORD, Built
from reporttools import TOKEN, parse_csv, parse_html
from sqlalchemy.engine import make_url

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
# What the reports' commands see besides the database (the token is the site's, so
# that Cli's check looks for this one in what a command prints).
REPORT_ENV = {
    "EXCHANGE_SITE_TOKEN": TOKEN,
    "EXCHANGE_REPORT_MASK_FIELDS": '["api_key", "password"]',
}


def with_password(db_url: str) -> str:
    """The URL with a password (PostgreSQL here trusts local users and ignores it)."""
    url = make_url(db_url)
    if url.get_backend_name() != "postgresql":
        return db_url
    return url.set(password=PASSWORD).render_as_string(hide_password=False)


def no_secrets(result: Result) -> Result:
    """Neither the database's password nor the token in what a command printed (Cli checks
    the token and tracebacks; the password is this module's)."""
    assert PASSWORD not in result.stdout + result.stderr, describe(result)
    return result


def test_quarantine_export_writes_every_format_from_the_command_line(
    db_url: str, quarantine: Built, tmp_path: Path
) -> None:
    runs = {
        "report.csv": ["--format", "csv"],  # labels in Russian: the default
        "report.xlsx": ["--format", "xlsx", "--lang", "en"],
        "report.html": [],  # the format from the file's suffix
        "out/report.json": ["--format", "json", "--reason", "http-422"],
    }
    results = Cli(tmp_path).many(
        [["quarantine", "export", "--output", name, *extra] for name, extra in runs.items()],
        db=with_password(db_url),
        env=REPORT_ENV,
    )
    outputs = dict(zip(runs, map(no_secrets, results), strict=True))

    for name, result in outputs.items():
        assert 0 == result.returncode, f"{name}: {describe(result)}"
        data = (tmp_path / name).read_bytes()
        assert TOKEN.encode() not in data and PASSWORD.encode() not in data, name
    assert "wrote 6 entries to report.csv (csv)" in outputs["report.csv"].stdout

    csv_report = parse_csv((tmp_path / "report.csv").read_bytes(), ";")
    assert {quarantine.superseded, quarantine.refused, quarantine.posting} < {
        row["Код сообщения"] for row in csv_report.rows
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
    wanted = [reports / f"quarantine-latest.{ext}" for ext in ("html", "csv", "xlsx")]

    # The first report is written when the scheduler starts (under a second here, idle);
    # 30 s (times the load) is the margin of a machine whose cores are all taken.
    result = until_stopped(
        Cli(tmp_path),
        "run",
        stop_when=lambda: all(p.exists() for p in wanted),
        seconds=30,
        what="the scheduled report in html, csv and xlsx",
        db=db_url,
        env={
            **REPORT_ENV,
            "EXCHANGE_SITE_URL": "http://127.0.0.1:9",  # nothing is staged: never called
            "EXCHANGE_POLL_INTERVAL": "0.2",
            "EXCHANGE_REPORT_DIR": str(reports),
            "EXCHANGE_REPORT_FORMATS": '["html", "csv", "xlsx"]',
        },
    )

    no_secrets(result)
    assert 0 == result.returncode, describe(result)
    assert quarantine.refused in (reports / "quarantine-latest.html").read_text(encoding="utf-8")
    stamped = sorted(p.name for p in reports.glob("quarantine-2*"))
    assert 3 == len(stamped), stamped
    assert "quarantine report written" in result.stderr


@SQLITE_ONLY
def test_a_bad_report_schedule_stops_exchange_run_with_one_line(
    db_url: str, tmp_path: Path
) -> None:
    """A real process: what the service manager shows of a service that cannot start is its
    exit code and what it wrote on stderr, nothing else."""
    done = Cli(tmp_path, process=True)(
        "run",
        db=db_url,
        env={
            **REPORT_ENV,
            "EXCHANGE_SITE_URL": "http://127.0.0.1:9",
            "EXCHANGE_REPORT_DIR": str(tmp_path / "reports"),
            "EXCHANGE_REPORT_CRON": "61 * * * *",
        },
    )
    code, stdout, stderr = done.returncode, done.stdout, done.stderr

    assert 2 == code, stdout + stderr
    lines = stderr.splitlines()
    assert 1 == len(lines), stderr
    assert lines[0].startswith("error: ") and "EXCHANGE_REPORT_CRON" in lines[0]
    assert not (tmp_path / "reports").exists()
