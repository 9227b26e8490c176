"""Bad options (contract 6): exit 2, a message naming the problem, never a traceback.

Option parsing needs no database: each case runs once. The commands are independent, so they
are started together (a module fixture) and each test reads its own result.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Cli, Result, assert_clean, assert_usage_error

BAD_OPTIONS = {
    "unknown-option": (["status", "--no-such-option"], "--no-such-option"),
    "once-and-until-idle": (["run", "--once", "--until-idle"], "--until-idle"),
    "max-seconds-without-until-idle": (["run", "--max-seconds", "5"], "--max-seconds"),
    "retry-without-ids-or-filter": (["quarantine", "retry"], "filter"),
    "cancel-without-note": (["quarantine", "cancel", "SOME-ID"], "--note"),
    "since-not-a-date": (["quarantine", "list", "--since", "notadate"], "notadate"),
    "export-pdf": (
        ["quarantine", "export", "--format", "pdf", "--output", "report.pdf"],
        "pdf",
    ),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("options")


@pytest.fixture(scope="module")
def outcomes(workdir: Path) -> dict[str, Result]:
    results = Cli(workdir, process=True).many(
        [args for args, _ in BAD_OPTIONS.values()], check=False
    )
    return dict(zip(BAD_OPTIONS, results, strict=True))


@pytest.mark.parametrize("case", [c for c in BAD_OPTIONS if c != "export-pdf"])
def test_a_bad_option_exits_2_naming_the_problem_without_a_traceback(
    outcomes: dict[str, Result], workdir: Path, case: str
) -> None:
    result = outcomes[case]
    assert_clean(result)
    assert_usage_error(result, BAD_OPTIONS[case][1])
    assert not (workdir / "exchange.db").exists(), "a refused command touched the database"


def test_quarantine_export_in_an_unknown_format_exits_2_naming_the_formats(
    outcomes: dict[str, Result], workdir: Path
) -> None:
    result = outcomes["export-pdf"]
    assert_clean(result)
    assert_usage_error(result, "pdf", "csv", "xlsx", "html", "json")
    assert not (workdir / "report.pdf").exists()
