"""The wheel that the Dockerfile installs carries Alembic's migrations inside the package.

``exchange migrate`` finds them at ``exchange/_migrations`` when installed (see
``exchange.db.migrate.script_location``); pyproject's hatch ``force-include`` puts them there.
A wheel without them installs fine and fails only at ``migrate``, on the customer's server.
scripts/check-wheel.sh goes further: it installs the wheel and runs it.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    wheels = list(out.glob("exchange-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


@pytest.mark.slow
def test_the_wheel_carries_every_migration_inside_the_package(wheel: Path) -> None:
    inside = names(wheel)
    assert "exchange/_migrations/env.py" in inside
    assert "exchange/_migrations/script.py.mako" in inside
    revisions = {
        f"exchange/_migrations/versions/{p.name}"
        for p in (REPO / "migrations/versions").glob("*.py")
    }
    assert revisions, "the checkout has no migrations to compare with"
    assert set() == revisions - inside


@pytest.mark.slow
def test_the_wheel_carries_the_workbench_templates_and_stylesheet(wheel: Path) -> None:
    """Contract 11: the workbench ships inside the wheel, nothing to build at install."""
    inside = names(wheel)
    shipped = {
        f"exchange/web/{p.relative_to(REPO / 'exchange/web').as_posix()}"
        for folder in ("templates", "static")
        for p in (REPO / "exchange/web" / folder).iterdir()
    }
    assert "exchange/web/templates/base.html" in shipped
    assert set() == shipped - inside


@pytest.mark.slow
def test_the_wheel_carries_the_compiled_catalogs(wheel: Path) -> None:
    """Contract 15 ("Words"): the compiled gettext catalogs ship in the wheel, nothing to
    compile at install (tests/test_i18n.py checks they match their .po files)."""
    inside = names(wheel)
    for lang in ("ru", "en"):
        assert f"exchange/locale/{lang}/LC_MESSAGES/exchange.mo" in inside
        assert f"exchange/locale/{lang}/LC_MESSAGES/exchange.po" in inside


@pytest.mark.slow
def test_the_wheel_has_the_command_and_nothing_outside_the_package(wheel: Path) -> None:
    inside = names(wheel)
    assert "exchange/cli/__init__.py" in inside
    entry_points = next(n for n in inside if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "exchange = exchange.cli:main" in archive.read(entry_points).decode()
    top_level = {n.split("/", 1)[0] for n in inside}
    assert {"exchange"} == {t for t in top_level if not t.endswith(".dist-info")}
