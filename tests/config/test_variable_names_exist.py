"""Issue 34 item 11: every ``EXCHANGE_…`` variable the code's messages and the documentation
name is one a person can set (a setting, or its ``_FILE`` twin): the 1C administrator copies
them literally, and an error once named ``EXCHANGE_ONEC_PRICE_TYPES``, which nothing reads."""

from __future__ import annotations

import re
from pathlib import Path

from exchange.config_doc import env_name
from exchange.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"EXCHANGE_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_]*(?:_\*|…|\*))")
# Named on purpose and not settings, each with what it is.
NOT_SETTINGS = {
    "EXCHANGE_CONFIG": "the configuration file's path, read before the settings",
    "EXCHANGE_FAILPOINTS": "the fault tests' crash points (exchange/failpoints.py)",
    "EXCHANGE_TEST_PG": "the tests' PostgreSQL server",
    "EXCHANGE_BENCH_PG": "the benchmarks' PostgreSQL server",
    "EXCHANGE_CRASH_RUNS": "scripts/crash-runs' count",
    "EXCHANGE_WORKBENCH_URL": "the old name of EXCHANGE_PUBLIC_URL, still read",
    "EXCHANGE_1C_SESSION": "the 1C session's cookie name",
    "EXCHANGE_X": "a placeholder in a docstring",
    "EXCHANGE_LANG": "the command line's language, read before the settings (exchange/i18n.py)",
}


def test_every_variable_named_in_the_code_and_the_docs_can_be_set() -> None:
    settable = {env_name(name) for name in Settings.model_fields}
    settable |= {f"{name}_FILE" for name in settable}
    places = [
        *(ROOT / "exchange").rglob("*.py"),
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "README.md",
        *(ROOT / "config").rglob("*.example"),
        *(ROOT / "config").rglob("*.toml"),
    ]
    unknown = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in places
        for name in NAMED.findall(path.read_text(encoding="utf-8"))
        if name not in settable and name not in NOT_SETTINGS
    }
    assert set() == unknown
