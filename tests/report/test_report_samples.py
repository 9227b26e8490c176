"""The sample reports in docs/samples/ are made by a script from synthetic data: the script
must keep running as the code moves (it once imported modules that had been moved away), and
the JSON sample in the repository must be what it makes today."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "samples" / "make_samples.py"


def test_the_sample_script_runs_and_the_json_sample_is_current(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for fmt in ("csv", "xlsx", "html", "json"):
        assert (tmp_path / f"quarantine-sample.{fmt}").stat().st_size > 0
    made = json.loads((tmp_path / "quarantine-sample.json").read_text(encoding="utf-8"))
    kept = json.loads((ROOT / "docs/samples/quarantine-sample.json").read_text(encoding="utf-8"))
    assert made == kept, "docs/samples/ is stale: run docs/samples/make_samples.py"
