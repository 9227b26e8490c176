"""Each exchange's folder: whatever name 1C (or anyone) sends, the path is inside the folder or
the name is refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.web.files import FileRefused, inside

parts = st.sampled_from(
    ["..", ".", "", "a", "goods", "1", "prices.xml", "C:", "~", "\\..", "x\x00"]
)


@settings(max_examples=500, deadline=None)
@given(
    name=st.one_of(
        st.lists(parts, max_size=6).map("/".join),
        st.lists(parts, max_size=6).map("\\\\".join),
        st.text(max_size=40),
    )
)
def test_any_name_stays_inside_the_folder_or_is_refused(
    tmp_path_factory: object, name: str
) -> None:
    folder = Path("/tmp/exchange-files-property/session")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = inside(folder, name)
    except FileRefused as exc:
        assert "\n" not in str(exc)
        return
    resolved = path.resolve()
    assert folder.resolve() in resolved.parents


@pytest.mark.parametrize("name", ["offers.xml.spool", "offers.xml.rows.db", "goods/a.xml.rows.db"])
def test_the_names_of_an_imports_own_files_are_refused(tmp_path: Path, name: str) -> None:
    """1C may not upload over the spool or the scratch rows an import writes beside a file."""
    with pytest.raises(FileRefused, match="reserved"):
        inside(tmp_path, name)
