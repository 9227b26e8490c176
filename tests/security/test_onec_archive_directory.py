"""An archive's list of members is judged from its last record before it is read (issue 21
follow-up): ``zipfile`` reads the whole central directory and makes one object per member
before anything can be counted, so a crafted archive whose directory lists hundreds of thousands
of members (a few dozen bytes each: 1.5 million in 70 MB, 589 MB of memory and a minute to
list) or whose end record claims gigabytes is refused from its end record (and a walk over the
entries' fixed headers that keeps nothing) by ``exchange.web.files.unpack``."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from exchange.web import files
from exchange.web.files import (
    MAX_ARCHIVE_MEMBERS,
    MAX_CENTRAL_DIRECTORY_BYTES,
    FileRefused,
    unpack,
)
from exchange.words import onec_words

ENTRY = struct.Struct("<4s6H3L5H2L")  # a member in the central directory (APPNOTE 4.3.12)


def directory(count: int) -> bytes:
    """``count`` central-directory entries named ``a`` (47 bytes each); no member data:
    listing an archive never reads it."""
    entry = ENTRY.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0)
    return (entry + b"a") * count


def end_record(entries: int, size: int, offset: int = 0) -> bytes:
    return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries, entries, size, offset, 0)


def zip64_end(entries: int, size: int, at: int) -> bytes:
    """The zip64 end record (at ``at``), its locator and the classic record pointing to it."""
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, 0)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at, 1)
    return record + locator + end_record(0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)


def refused_with_peak(archive: Path, tmp_path: Path) -> tuple[str, int]:
    tracemalloc.start()
    try:
        with pytest.raises(FileRefused) as refused:
            unpack(archive, tmp_path / "out", max_bytes=1 << 30, max_ratio=200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(refused.value), peak


def test_an_archive_whose_end_record_lists_too_many_members_is_refused_without_reading_them(
    tmp_path: Path,
) -> None:
    """A real directory of MAX_ARCHIVE_MEMBERS + 1 entries (9.4 MB) that the zip64 end record
    states honestly: refused from the last 98 bytes. Listed by ``zipfile`` it took 73.5 MB at its
    peak (tracemalloc); the bound, 1 MiB, leaves room for the end record's read and pytest."""
    cd = directory(MAX_ARCHIVE_MEMBERS + 1)
    archive = tmp_path / "v8.zip"
    archive.write_bytes(cd + zip64_end(MAX_ARCHIVE_MEMBERS + 1, len(cd), len(cd)))
    reason, peak = refused_with_peak(archive, tmp_path)
    assert reason == f"v8.zip holds more than {MAX_ARCHIVE_MEMBERS} files: not unpacked"
    assert peak < 1 << 20, peak
    assert onec_words(reason) == "В архиве v8.zip больше 200000 файлов: не распакован."


def test_an_end_record_that_claims_a_directory_of_gigabytes_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """Over the directory cap, whatever the file holds (here 3 GiB claimed in a few bytes)."""
    archive = tmp_path / "v8.zip"
    archive.write_bytes(directory(10) + zip64_end(10, 3 << 30, 470))
    reason, peak = refused_with_peak(archive, tmp_path)
    assert reason == (
        f"v8.zip's list of files is larger than {MAX_CENTRAL_DIRECTORY_BYTES} bytes: not unpacked"
    )
    assert peak < 1 << 20, peak
    assert onec_words(reason) == "Оглавление архива v8.zip больше 33554432 байт: не распакован."


def test_an_end_record_that_understates_the_count_does_not_hide_the_members(
    tmp_path: Path,
) -> None:
    """``zipfile`` lists what the directory's size spans, not the count the end record
    states: 300,000 entries (14 MB, under the size cap) behind a record that says 1 are counted
    as walked and refused. Listed by ``zipfile`` they took 110 MB and 8 s before nothing was
    unpacked; refused, 14 MB (the directory, read once) in 0.25 s."""
    cd = directory(300_000)
    archive = tmp_path / "v8.zip"
    archive.write_bytes(cd + end_record(1, len(cd)))
    with pytest.raises(FileRefused) as refused:
        unpack(archive, tmp_path / "out", max_bytes=1 << 30, max_ratio=200)
    assert str(refused.value) == f"v8.zip holds more than {MAX_ARCHIVE_MEMBERS} files: not unpacked"
    assert not (tmp_path / "out").exists()


def written_archive(count: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("offers.xml", b"<a/>")
        for n in range(count - 1):
            zf.writestr(f"import_files/{n}.jpg", b"")
    return buffer.getvalue()


@pytest.mark.parametrize("understated", [False, True])
def test_the_member_cap_counts_a_real_archive_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, understated: bool
) -> None:
    """With the cap at 1,000 (for speed): an archive ``zipfile`` wrote with 1,000 members is
    unpacked, one with 1,001 refused, whether its end record states the count or says 1
    (then the directory, ~55 bytes an entry, is walked)."""
    monkeypatch.setattr(files, "MAX_ARCHIVE_MEMBERS", 1_000)
    for count, refused in ((1_000, False), (1_001, True)):
        data = written_archive(count)
        if understated:
            data = data[:-22] + struct.pack("<4s4H", b"PK\x05\x06", 0, 0, 1, 1) + data[-10:]
        archive = tmp_path / f"{count}.zip"
        archive.write_bytes(data)
        out = tmp_path / f"out{count}"
        if refused:
            with pytest.raises(FileRefused, match="holds more than 1000 files"):
                unpack(archive, out, max_bytes=1 << 30, max_ratio=200)
        else:
            assert unpack(archive, out, max_bytes=1 << 30, max_ratio=200) == ["offers.xml"]
