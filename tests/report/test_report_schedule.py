"""The scheduled report of ``exchange run`` (issue 3, item 2), on SQLite and on PostgreSQL:
written only when the quarantine changed, atomically, the newest N kept, the latest at a
fixed name. The export function is called directly; test_report_cli.py runs the service.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from reportdb import Built, add_refused_price
from reporttools import TOKEN, parse_csv, parse_html
from sqlalchemy import Engine

from exchange.dev.testing import fast_settings
from exchange.domain.clock import FakeClock, SystemClock
from exchange.errors import ConfigurationError
from exchange.report.schedule import (
    STATE_FILE,
    ExportConfig,
    ScheduledExport,
    fingerprint,
    latest_name,
    schedule,
    stamped_name,
    to_remove,
)
from exchange.settings import Settings


def exporter(
    settings: Settings, engine: Engine, clock: FakeClock, directory: Path, keep: int = 10
) -> ScheduledExport:
    config = ExportConfig.from_settings(
        settings.model_copy(update={"report_dir": directory, "report_keep": keep})
    )
    export = ScheduledExport(config, engine, clock)
    export.prepare()
    return export


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_the_first_export_writes_each_format_at_a_timestamped_and_at_the_fixed_name(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine: Built, tmp_path: Path
) -> None:
    export = exporter(settings, engine, clock, tmp_path / "reports")

    written = export.run()

    stamp = clock.now().strftime("%Y%m%dT%H%M%SZ")
    assert [f"quarantine-{stamp}.html", f"quarantine-{stamp}.csv"] == [p.name for p in written]
    directory = tmp_path / "reports"
    assert [
        STATE_FILE,
        f"quarantine-{stamp}.csv",
        f"quarantine-{stamp}.html",
        "quarantine-latest.csv",
        "quarantine-latest.html",
    ] == files(directory)
    latest = (directory / "quarantine-latest.html").read_bytes()
    assert latest == (directory / f"quarantine-{stamp}.html").read_bytes()
    assert quarantine.refused in parse_html(latest).all_text
    rows = parse_csv((directory / "quarantine-latest.csv").read_bytes(), ";").rows
    assert 6 == len(rows)  # Russian by default: ";" separated
    assert TOKEN not in (directory / "quarantine-latest.csv").read_text(encoding="utf-8-sig")


def test_an_unchanged_quarantine_writes_nothing_and_a_change_writes_again(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine: Built, tmp_path: Path
) -> None:
    directory = tmp_path / "reports"
    export = exporter(settings, engine, clock, directory)
    assert export.run()
    before = {name: (directory / name).stat().st_mtime_ns for name in files(directory)}

    clock.advance(3600)
    assert [] == export.run()
    assert before == {name: (directory / name).stat().st_mtime_ns for name in files(directory)}

    clock.advance(60)
    added = add_refused_price(engine, settings, clock, "SKU-NEW")
    written = export.run()
    assert 2 == len(written)
    assert added in (directory / "quarantine-latest.html").read_text(encoding="utf-8")
    assert 4 == len([n for n in files(directory) if n[11:12].isdigit()])


def test_a_restarted_service_remembers_the_last_export_and_a_deleted_latest_file_returns(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine: Built, tmp_path: Path
) -> None:
    directory = tmp_path / "reports"
    assert exporter(settings, engine, clock, directory).run()
    state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    assert {"fingerprint", "written_at", "entries"} == set(state)
    assert state["fingerprint"].startswith("6|")

    clock.advance(60)
    restarted = exporter(settings, engine, clock, directory)
    assert [] == restarted.run()

    (directory / "quarantine-latest.csv").unlink()
    assert 2 == len(restarted.run())
    assert (directory / "quarantine-latest.csv").is_file()


def test_rotation_keeps_the_newest_n_files_per_format_and_the_latest(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine: Built, tmp_path: Path
) -> None:
    directory = tmp_path / "reports"
    export = exporter(settings, engine, clock, directory, keep=2)
    (directory / "quarantine-notes.html").write_text("an operator's own file")
    stamps = []
    for i in range(4):
        clock.advance(3600)
        add_refused_price(engine, settings, clock, f"SKU-R{i}")
        export.run()
        stamps.append(clock.now().strftime("%Y%m%dT%H%M%SZ"))

    kept = [f"quarantine-{s}.{ext}" for s in stamps[-2:] for ext in ("csv", "html")]
    assert sorted(
        [
            *kept,
            STATE_FILE,
            "quarantine-latest.csv",
            "quarantine-latest.html",
            "quarantine-notes.html",
        ]
    ) == files(directory)
    newest = (directory / f"quarantine-{stamps[-1]}.csv").read_bytes()
    assert newest == (directory / "quarantine-latest.csv").read_bytes()
    assert not list(directory.glob(".*.tmp")), "a temporary file was left behind"


def test_a_change_of_formats_or_language_writes_the_report_anew(
    engine: Engine, settings: Settings, clock: FakeClock, quarantine: Built, tmp_path: Path
) -> None:
    directory = tmp_path / "reports"
    assert exporter(settings, engine, clock, directory).run()
    english = settings.model_copy(update={"report_lang": "en", "report_formats": ["xlsx", "json"]})

    clock.advance(60)
    written = exporter(english, engine, clock, directory).run()

    assert [".xlsx", ".json"] == [p.suffix for p in written]
    report = json.loads((directory / "quarantine-latest.json").read_text(encoding="utf-8"))
    assert "en" == report["lang"]


def schedule_for(scheduler: AsyncIOScheduler, settings: Settings, engine: Engine) -> Any:
    """As ``exchange run`` schedules it: the service's settings, database and clock."""
    return schedule(scheduler, settings, engine, clock=SystemClock(), stopping=lambda: False)


def test_schedule_adds_a_cron_job_only_when_a_report_directory_is_set(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    site = "http://127.0.0.1:9"
    plain = fast_settings(db_url, site)
    configured = fast_settings(
        db_url, site, report_dir=tmp_path / "r", report_cron="15 6 * * mon-fri"
    )
    scheduler = AsyncIOScheduler(timezone=UTC)
    assert schedule_for(scheduler, plain, engine) is None
    assert [] == scheduler.get_jobs()

    export = schedule_for(scheduler, configured, engine)

    assert export is not None and (tmp_path / "r").is_dir()
    job = scheduler.get_job("quarantine-report")
    assert isinstance(job.trigger, CronTrigger)
    after = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)  # a Friday noon
    assert datetime(2026, 3, 9, 6, 15, tzinfo=UTC) == job.trigger.get_next_fire_time(None, after)


def test_a_stop_during_the_export_still_finishes_the_report_and_logs_it_written(
    db_url: str, engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``exchange run`` stopping cancels the job while its thread writes the report: the thread
    finishes, and the log says the report was written (the operator reads the log)."""
    settings = fast_settings(db_url, "http://127.0.0.1:9", report_dir=tmp_path / "r")
    scheduler = AsyncIOScheduler(timezone=UTC)
    export = schedule_for(scheduler, settings, engine)
    assert export is not None
    started, go_on = threading.Event(), threading.Event()
    whole = export.run

    def slow_run() -> list[Path]:
        started.set()
        assert go_on.wait(30)
        return whole()

    export.run = slow_run  # type: ignore[method-assign]

    async def stop_during_the_export() -> None:
        job = asyncio.ensure_future(scheduler.get_job("quarantine-report").func())
        assert await asyncio.to_thread(started.wait, 30)
        job.cancel()  # the service stops: the job is cancelled, its thread is not
        await job
        go_on.set()  # asyncio.run waits for the thread before it returns

    with caplog.at_level(logging.INFO, logger="exchange.report.schedule"):
        asyncio.run(stop_during_the_export())

    assert (tmp_path / "r" / "quarantine-latest.html").is_file()
    assert any("quarantine report written" in r.getMessage() for r in caplog.records)


def test_a_report_directory_that_cannot_be_used_stops_the_service_at_start(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings = fast_settings(db_url, "http://127.0.0.1:9", report_dir=blocker / "reports")
    with pytest.raises(ConfigurationError, match="EXCHANGE_REPORT_DIR"):
        schedule_for(AsyncIOScheduler(timezone=UTC), settings, engine)


# -- pure pieces -------------------------------------------------------------------------------


def test_timestamped_names_sort_by_time_and_the_latest_name_is_fixed() -> None:
    morning = datetime(2026, 11, 30, 8, 0, 5, tzinfo=UTC)

    assert "quarantine-20261130T080005Z.html" == stamped_name(morning, "html")
    assert "quarantine-latest.xlsx" == latest_name("xlsx")


def test_rotation_removes_only_its_own_oldest_files_of_one_format() -> None:
    names = [
        "quarantine-20261130T080000Z.csv",
        "quarantine-20261130T090000Z.csv",
        "quarantine-20261130T070000Z.csv",
        "quarantine-20261130T070000Z.html",
        "quarantine-latest.csv",
        "quarantine-mine.csv",
        "quarantine-20261130T060000Z.csv.bak",
    ]

    assert ["quarantine-20261130T070000Z.csv"] == to_remove(names, "csv", 2)
    assert [] == to_remove(names, "html", 1)


def test_the_fingerprint_changes_with_the_quarantine_and_the_formats() -> None:
    config = ExportConfig(Path("r"), ("html",), 10, "ru")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [("a", at), ("b", at)]

    assert fingerprint(rows, config) == fingerprint(list(reversed(rows)), config)
    assert fingerprint(rows, config) != fingerprint([("a", at), ("c", at)], config)
    assert fingerprint(rows, config) != fingerprint([("a", at), ("b", at.replace(hour=1))], config)
    assert fingerprint(rows, config) != fingerprint(rows[:1], config)
    assert fingerprint(rows, config) != fingerprint(
        rows, ExportConfig(Path("r"), ("csv",), 10, "ru")
    )
