"""The shape of the house (docs/architecture.md) cannot drift back: the import-linter
contracts in pyproject.toml hold for the package as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_layer_imports_only_the_layers_below_it() -> None:
    linter = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run(
        [linter, "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "0 broken" in done.stdout
