"""Each exchange's folder: whatever name 1C (or anyone) sends, the path is inside the folder or
the name is refused with one line."""

from __future__ import annotations

import errno
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exchange.web.files import FileRefused, inside, unpack

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


@pytest.mark.parametrize(
    "name",
    [
        "offers.xml.spool",
        "offers.xml.rows.db",
        "goods/a.xml.rows.db",
        "v8.zip.unpacked/offers.xml",  # a folder where the archive's mark goes
        "offers.xml.SPOOL/a.xml",
        "offers.xml.rows.db/a.xml",
        "x.xml.part./a.xml",
    ],
)
def test_the_names_of_an_imports_own_files_are_refused(tmp_path: Path, name: str) -> None:
    """1C may not upload over the spool or the scratch rows an import writes beside a file,
    nor make a folder of their names (nor of an archive's mark) for them to fail on."""
    with pytest.raises(FileRefused, match="reserved"):
        inside(tmp_path, name)


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buffer.getvalue()


def _damaged() -> bytes:
    """Its member's deflate stream broken after the headers (the CRC never gets checked)."""
    data = bytearray(_zip([("offers.xml", b"<x>" + b"price " * 1000 + b"</x>")]))
    start = 30 + len("offers.xml")
    data[start : start + 8] = b"\xff" * 8
    return bytes(data)


@pytest.mark.parametrize(
    ("archive", "reason"),
    [
        pytest.param(_damaged, "is damaged", id="damaged"),
        pytest.param(
            lambda: _zip([("a.xml", b"<a/>"), ("a.xml/b.xml", b"<b/>")]),
            "its name is taken",
            id="folder-is-a-file",
        ),
        pytest.param(
            lambda: _zip([("d.xml/b.xml", b"<b/>"), ("d.xml", b"<a/>")]),
            "its name is taken",
            id="file-is-a-folder",
        ),
    ],
)
def test_an_archive_that_does_not_unpack_is_refused_with_a_reason_and_no_server_path(
    tmp_path: Path, archive: Callable[[], bytes], reason: str
) -> None:
    """What 1C is answered (contract 9a): one line, the reason, never the server's folder."""
    path = tmp_path / "v8.zip"
    path.write_bytes(archive())
    with pytest.raises(FileRefused, match=reason) as refused:
        unpack(path, tmp_path, max_bytes=10_000_000, max_ratio=1_000)
    assert str(tmp_path) not in str(refused.value)
    assert "\n" not in str(refused.value)


class _FullDisk(io.BytesIO):
    def write(self, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["read", "write"])
def test_a_disk_error_while_unpacking_stays_the_servers_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A member whose data does not decompress is the sender's fault (FileRefused); a disk
    that fails (EIO reading the archive, ENOSPC writing) is the server's: it is not answered
    as a bad archive."""
    path = tmp_path / "v8.zip"
    path.write_bytes(_zip([("offers.xml", b"<x/>")]))
    if where == "read":

        def broken(self: object, n: int = -1) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(zipfile.ZipExtFile, "read", broken)
    else:
        monkeypatch.setattr("exchange.web.files._created", lambda target, member: _FullDisk())
    with pytest.raises(OSError) as failed:
        unpack(path, tmp_path, max_bytes=10_000_000, max_ratio=1_000)
    assert failed.value.errno in (errno.EIO, errno.ENOSPC)
