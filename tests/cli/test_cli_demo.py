"""``exchange demo`` (contract 6): the main job on the embedded default, nothing to configure."""

from __future__ import annotations

import json

from clitools import Cli, assert_one_line_error, describe


def test_demo_runs_to_idle_prints_a_summary_and_writes_its_database_and_report(cli: Cli) -> None:
    directory = cli.cwd / "demo"

    # 50 SKUs keep the demo's poisoned and refused SKUs (SKU-0013, SKU-0042) and a third of
    # its rows: the shop takes 150 requests/s, so 200 SKUs were 6 s of waiting in the loop.
    result = cli("demo", "--dir", str(directory), "--skus", "50", timeout=120)

    assert result.returncode == 0, describe(result)
    assert "delivered" in result.stdout, describe(result)
    assert "quarantined" in result.stdout, describe(result)
    assert (directory / "demo.db").is_file()
    report = json.loads((directory / "quarantine.json").read_text(encoding="utf-8"))
    assert report["entries"]
    assert report["summary"]["by_reason"]
    assert sum(report["summary"]["by_reason"].values()) == len(report["entries"])


def test_demo_into_a_directory_that_cannot_be_created_exits_2_with_one_error_line(
    cli: Cli,
) -> None:
    (cli.cwd / "occupied").write_text("a file, not a directory", encoding="utf-8")

    result = cli("demo", "--dir", "occupied/demo", "--skus", "5")

    assert_one_line_error(result, "occupied")
