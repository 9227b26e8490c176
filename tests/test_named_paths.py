"""Every module and file the documentation names exists (issue 25 item 4): a dotted name of the
package (``exchange.dev.sitesim``, ``exchange.settings.mask_secrets``) imports and has that
attribute, and a path of the repository (``exchange/queue/lease.py``, ``bench/fastsite.py``)
is there, wherever they are named in docs/ (Markdown) and README.md, and in the docstrings of
exchange/, bench/, tests/ and migrations/. A move that leaves its old name behind fails here."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A dotted name of the project: not inside a path, a URL or a longer word (1c_exchange.php).
MODULE = re.compile(r"(?<![\w/.\-])(?:exchange|bench)(?:\.[A-Za-z_]\w*)+")
# A path of the repository: one of its top-level folders, then the rest of the path.
PATH = re.compile(
    r"(?<![\w/.\-~$])(?:exchange|tests|bench|docs|config|migrations|scripts)/[\w./\-]*\w"
)

# Spelled like the package but naming something else, each with what it names.
NOT_MODULES = {
    "exchange.exe": "the Windows build of the command",
    "exchange.service": "the systemd unit",
    "exchange.toml": "a configuration file's name",
    "exchange.intents": "a RabbitMQ queue's name in an example",
    "exchange.example.ru": "a host name in an example",
    "exchange.pot": "the gettext template's file name (exchange/locale/)",
    "exchange.po": "a gettext catalog's file name (exchange/locale/<lang>/LC_MESSAGES/)",
    "exchange.mo": "a compiled gettext catalog's file name",
}
NOT_PATHS = {
    "exchange/1c": "the 1C folder under the user's cache folder, made at run time",
    "exchange/_migrations": "where the wheel carries migrations/ (pyproject force-include)",
    "scripts/getorders": "a script of another repository (dbfun/1c-bitrix-exchange)",
}
# Stale names in files another change owns right now (issue 25 left them to it). Each must
# still be stale: once fixed there, its entry goes, so that the list cannot hide a new one.
ELSEWHERE: set[tuple[str, str]] = set()


def named() -> Iterator[tuple[str, str]]:
    """(file, text) for every Markdown document and every docstring."""
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield str(document.relative_to(ROOT)), document.read_text(encoding="utf-8")
    for top in ("exchange", "bench", "tests", "migrations"):
        for source in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(source.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    docstring = ast.get_docstring(node, clean=False)
                    if docstring:
                        yield str(source.relative_to(ROOT)), docstring


def resolves(name: str) -> bool:
    """The longest prefix of ``name`` that is a module, then attributes for the rest."""
    parts = name.split(".")
    for count in range(len(parts), 0, -1):
        module = ".".join(parts[:count])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            continue
        try:
            value: object = importlib.import_module(module)
        except ImportError:  # an optional dependency (bench's psutil): the module is there
            return True
        for attribute in parts[count:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def stale_names() -> set[tuple[str, str]]:
    stale: set[tuple[str, str]] = set()
    for where, text in named():
        for match in MODULE.finditer(text):
            name = match.group(0)
            if name not in NOT_MODULES and not resolves(name):
                stale.add((where, name))
        for match in PATH.finditer(text):
            path = match.group(0)
            if path not in NOT_PATHS and not (ROOT / path).exists():
                stale.add((where, path))
    return stale


@pytest.fixture(scope="module")
def stale() -> set[tuple[str, str]]:
    return stale_names()


def test_every_module_and_path_named_in_the_docs_and_docstrings_exists(
    stale: set[tuple[str, str]],
) -> None:
    assert [] == sorted(stale - ELSEWHERE), "named but not there (file, name)"


def test_the_names_left_to_other_changes_are_still_stale(stale: set[tuple[str, str]]) -> None:
    assert [] == sorted(ELSEWHERE - stale), "fixed: remove from ELSEWHERE"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the threaded exchange.sitesim", {"exchange.sitesim"}),
        ("see ``exchange.report_mask``", {"exchange.report_mask"}),
        ("(`exchange/site.py`)", {"exchange/site.py"}),
        ("``exchange.settings.mask_secrets`` and exchange/queue/lease.py", set()),
        ("sqlite:///exchange.db, 1c_exchange.php, https://exchange.shop.local", set()),
    ],
)
def test_the_check_finds_an_old_name_and_passes_a_present_one(
    text: str, expected: set[str]
) -> None:
    found = {m.group(0) for m in MODULE.finditer(text) if not resolves(m.group(0))}
    found |= {m.group(0) for m in PATH.finditer(text) if not (ROOT / m.group(0)).exists()}
    assert expected == found
