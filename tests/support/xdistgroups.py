"""Which tests share an xdist worker (``--dist loadgroup``), as a pytest plugin: the suite
loads it from tests/conftest.py, and tests/test_xdist_groups.py runs it under ``-n 2``.

- Tests marked ``timing`` are one group ("timing"): no two of them run at once.
- The tests of a module that uses a module-scoped fixture are one group (the module's path): the
  fixture is made once per worker that runs a test of its module, so once, not once per worker
  (15 CLI processes of tests/cli/test_cli_config_errors.py, a wheel build, a Chromium).

xdist's loadgroup scheduler reads a test's group from a suffix of its node id
(``test_x.py::test_y@timing``). pytest-xdist (3.8) writes that suffix on its workers into
``item._nodeid``; pytest 9 keeps the id in ``item._id`` and ignores ``_nodeid``, so no group
ever held (the ``timing`` tests ran beside each other). ``name_groups`` writes the id pytest 9
reads, as xdist means it, until xdist does. Private attributes of both: the test fails when a
new version of either changes them.

``-n auto`` starts half as many workers again as the machine has cores (3 on two): the suite
waits as much as it computes (a shop's pace, a sign-in penalty, an outage of seconds: 118 % of
two cores busy under ``-n 2``), and a third worker fills those waits. Measured on two cores, the
same commit one run after the other: 10:22 → 8:54 of ``make test``, 736 → 749 s of CPU.
``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins, as in xdist.
"""

from __future__ import annotations

import os

import pytest

TIMING = "timing"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return workers_for(cores or 1)


def workers_for(cores: int) -> int:
    """Half as many again as there are cores, at least two."""
    return max(2, cores + cores // 2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(TIMING) is not None:
            item.add_marker(pytest.mark.xdist_group(TIMING))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    name_groups(config, items)


def name_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``test_y`` of group ``g`` becomes ``test_y@g`` on an xdist worker under loadgroup."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")  # type: ignore[attr-defined]


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())
