"""Each exchange's files in a folder of its own: names that may not leave it, uploads capped,
archives unpacked under the same rules (no ``..``, absolute paths or links; the unpacked size,
the compression ratio, the number of members and the size of the archive's list of them
capped, the last two before the list is read).

Names are compared without regard to case where the service gives them a meaning (``.zip``,
its own working files), because the folder may live on a file system that ignores case
(Windows, macOS): ``X.ZIP`` is an archive and ``offers.xml.SPOOL`` is the spool's name."""

from __future__ import annotations

import errno
import lzma
import os
import re
import secrets
import shutil
import stat
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import IO, BinaryIO

from exchange.intake.commerceml.publish import WORK_SUFFIXES

SESSION = re.compile(r"^[0-9a-f]{32}$")
UNPACKED_MARK = ".unpacked"  # beside an archive once unpacked: the names it wrote, one a line
ARCHIVE = ".zip"
XML = ".xml"
# At most this many files are unpacked from one archive. Only its XML files are unpacked (1C's
# archive holds the catalogue and offers files, a few or a few dozen when 1C splits them, and
# the products' images, which are dropped unread: contract 9a), so the cap bounds the files an
# archive can create, whatever the size of the shop's catalogue.
MAX_UNPACKED = 1_000
# At most this many members in one archive, whatever they are, and at most this many bytes in
# its central directory (the list of members, read whole and turned into one object per member
# by ``zipfile`` before anything else can be judged): checked from the archive's last record
# before the list is read (``_central_directory``). 100,000 images and their catalogue list in
# about 60 MB; 200,000 members is twice that, the most one exchange's archive may cost.
MAX_ARCHIVE_MEMBERS = 200_000
# 200,000 members under names of about 110 bytes (``import_files/ab/<guid>_<guid>.jpg``).
MAX_CENTRAL_DIRECTORY_BYTES = 32 * 1024 * 1024
# Bytes in one folder or file name: file systems refuse more than 255, and the service writes
# its own files beside an upload under the upload's name and a suffix (.part, .spool, ...).
MAX_NAME_BYTES = 200
# The endings of the names the service writes beside an upload, reserved in every part of a name.
RESERVED_SUFFIXES = (*WORK_SUFFIXES, ".part", UNPACKED_MARK)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class FileRefused(ValueError):
    """A name, a size or an archive the exchange refuses; the message is one line."""


def safe_relative(name: str) -> PurePosixPath:
    """The relative path ``name`` names inside an exchange's folder, or FileRefused."""
    text = name.replace("\\", "/")
    if not text or len(text) > 400:
        raise FileRefused(f"file name {name[:100]!r} is not allowed")
    if _CONTROL.search(text):  # CR/LF would split a line of the answer or the log
        raise FileRefused(f"file name {name[:100]!r} holds a control character: not allowed")
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        raise FileRefused(f"file name {name[:100]!r} is an absolute path: not allowed")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts:
        raise FileRefused(f"file name {name[:100]!r} names no file")
    if ".." in parts:
        raise FileRefused(f"file name {name[:100]!r} leaves the exchange's folder: not allowed")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in parts):
        raise FileRefused(
            f"file name {name[:100]!r} is too long: a folder or file name may hold at most "
            f"{MAX_NAME_BYTES} bytes"
        )
    # The service's own names, as a file's name or a folder's: a folder ``v8.zip.unpacked`` or
    # ``offers.xml.spool`` would stand where the service writes its mark or its spool.
    if any(part.lower().rstrip(". ").endswith(RESERVED_SUFFIXES) for part in parts):
        raise FileRefused(f"file name {name[:100]!r} is reserved")
    return PurePosixPath(*parts)


@dataclass(frozen=True, slots=True)
class Spelling:
    """Which names the file system of the exchanges' folder takes for one file, beyond what
    ``safe_relative`` already makes one (``./x.xml``, ``a//b``, ``a\\b``)."""

    folds_case: bool = False  # Windows, macOS: "Offers.XML" is "offers.xml"
    folds_unicode: bool = False  # macOS: "é" composed (NFC) or not (NFD) is one name
    drops_trailing: bool = False  # Windows: "offers.xml." and "offers.xml " are "offers.xml"

    def key(self, relative: PurePosixPath) -> str:
        """One string for every spelling of ``relative`` this file system takes as one file."""
        parts = []
        for part in relative.parts:
            if self.drops_trailing:
                part = part.rstrip(". ") or part
            if self.folds_unicode:
                part = unicodedata.normalize("NFC", part)
            if self.folds_case:
                part = part.casefold()
            parts.append(part)
        return "/".join(parts)


def spelling(folder: Path) -> Spelling:
    """How ``folder``'s file system spells names, asked of it: a probe file is made, looked for
    under other spellings and removed. Unknown (the probe cannot be made): nothing folded, as on
    Linux, so that two files are never taken for one."""
    probe = folder / f".spelling-{secrets.token_hex(4)}-\u00c9a"  # "Éa", É composed
    try:
        probe.touch(exist_ok=False)
    except OSError:
        return Spelling()
    try:
        return Spelling(
            folds_case=probe.with_name(probe.name.lower()).exists(),
            folds_unicode=probe.with_name(unicodedata.normalize("NFD", probe.name)).exists(),
            drops_trailing=probe.with_name(probe.name + ".").exists(),
        )
    finally:
        probe.unlink(missing_ok=True)


def is_archive(path: PurePath | str) -> bool:
    return str(path).lower().endswith(ARCHIVE)


def is_xml(path: PurePath | str) -> bool:
    return str(path).lower().endswith(XML)


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, checked to stay inside ``folder`` once resolved (links included)."""
    target = folder / safe_relative(name)
    try:
        root = folder.resolve()
        resolved = target.resolve()
    except OSError as exc:  # a name the file system refuses (too long, not valid there)
        raise FileRefused(
            f"file name {name[:100]!r} is not allowed: {os.strerror(exc.errno or errno.EINVAL)}"
        ) from None
    if resolved != root and root not in resolved.parents:
        raise FileRefused(f"file name {name[:100]!r} leaves the exchange's folder: not allowed")
    return target


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def unpack(archive: Path, folder: Path, *, max_bytes: int, max_ratio: int) -> list[str]:
    """Unpack ``archive``'s XML files into ``folder``; return the names written. Refuses links,
    names that leave the folder, a member whose ratio exceeds ``max_ratio``, more than
    ``max_bytes`` in all (counted as written, not as the archive claims) and more than
    ``MAX_UNPACKED`` files. Other members (images) are checked and dropped unread."""
    written: list[str] = []
    total = 0
    try:
        _central_directory(archive)
        with zipfile.ZipFile(archive) as zf:
            _names_once(archive, zf.infolist())
            for info in zf.infolist():
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise FileRefused(f"archive member {info.filename!r} is a link: not allowed")
                if info.is_dir():
                    continue
                if not is_xml(safe_relative(info.filename)):
                    # Dropped unread (an image): its name is checked as a name, never resolved
                    # on disk, so that an archive of 100,000 images is listed in a moment.
                    continue
                target = inside(folder, info.filename)
                if len(written) >= MAX_UNPACKED:
                    raise FileRefused(
                        f"{archive.name} holds more than {MAX_UNPACKED} XML files: not unpacked"
                    )
                if info.compress_size and info.file_size / info.compress_size > max_ratio:
                    raise FileRefused(
                        f"archive member {info.filename!r} expands more than {max_ratio} times"
                    )
                _readable(info)
                member_total = 0
                with zf.open(info) as source, _created(target, info.filename) as out:
                    while block := _unpacked_block(source, archive):
                        total += len(block)
                        member_total += len(block)
                        if total > max_bytes:
                            raise FileRefused(f"the archive unpacks to more than {max_bytes} bytes")
                        if member_total > max_ratio * max(info.compress_size, 1):
                            raise FileRefused(
                                f"archive member {info.filename!r} expands more than "
                                f"{max_ratio} times"
                            )
                        out.write(block)
                written.append(info.filename)
    except zipfile.BadZipFile as exc:
        raise FileRefused(f"{archive.name} is not a zip archive: {exc}") from None
    except UnicodeDecodeError:  # a name flagged UTF-8 (bit 11) that is not
        raise FileRefused(f"{archive.name} holds a file name that is not valid UTF-8") from None
    except (zlib.error, EOFError, lzma.LZMAError):
        raise FileRefused(f"{archive.name} is damaged: its data does not unpack") from None
    return written


def _names_once(archive: Path, members: list[zipfile.ZipInfo]) -> None:
    """Each member's name once, compared as 1C's Windows compares them (without case, NFC):
    two ``offers.xml`` (or ``offers.xml`` and ``Offers.XML``) would leave on disk whichever
    came last, a package 1C never meant; the archive is refused naming the file."""
    seen: set[str] = set()
    for info in members:
        if info.is_dir():
            continue
        name = unicodedata.normalize("NFC", info.filename.replace("\\", "/")).casefold()
        if name in seen:
            raise FileRefused(
                f"{archive.name} holds the file {info.filename[:100]!r} twice "
                "(names compared without case): not unpacked"
            )
        seen.add(name)


def _unpacked_block(source: IO[bytes], archive: Path) -> bytes:
    """The next block of a member, FileRefused when its data does not decompress: ``bz2``
    says so by an OSError without an errno («Invalid data stream»), the other methods by
    their own errors (caught in ``unpack``). An OSError with an errno is the disk's, the
    server's problem, and stays one."""
    try:
        return source.read(1 << 20)
    except OSError as exc:
        if exc.errno is not None:
            raise
        raise FileRefused(f"{archive.name} is damaged: its data does not unpack") from None


def _created(target: Path, member: str) -> BinaryIO:
    """``target`` opened for writing, its folders made: FileRefused, without the server's path,
    when its folder is a file (the archive itself: ``v8.zip/offers.xml``, or an XML unpacked
    before) or its name a folder."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return target.open("wb")
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        raise FileRefused(
            f"archive member {member!r} cannot be unpacked: its name is taken by another file "
            "or folder of the exchange"
        ) from None


# The compression methods ``zipfile`` reads (1C writes Deflate).
_METHODS = {
    zipfile.ZIP_STORED: "stored",
    zipfile.ZIP_DEFLATED: "Deflate",
    zipfile.ZIP_BZIP2: "BZIP2",
    zipfile.ZIP_LZMA: "LZMA",
}


def _readable(info: zipfile.ZipInfo) -> None:
    """Refuses a member ``zipfile`` cannot read (FileRefused with the reason): encrypted (no
    password is ever given) or compressed by a method it lacks (e.g. 99, AES)."""
    if info.flag_bits & 0x1:
        raise FileRefused(
            f"archive member {info.filename!r} is encrypted: send the archive without a password"
        )
    if info.compress_type not in _METHODS:
        raise FileRefused(
            f"archive member {info.filename!r} is compressed by method {info.compress_type}, "
            f"which is not supported (use {_METHODS[zipfile.ZIP_DEFLATED]})"
        )


_EOCD = struct.Struct("<4s4H2LH")  # the end of central directory record, 22 bytes
_EOCD64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes, right before the record
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # 56 bytes, right before the locator
# A member's entry in the central directory: 46 bytes, then its name, extra field and comment,
# whose lengths are at its byte 28.
_CENTRAL_ENTRY_SIZE = 46
_CENTRAL_LENGTHS = struct.Struct("<3H")
_MAX_COMMENT = 0xFFFF


def _central_directory(archive: Path) -> None:
    """Refuses ``archive`` (FileRefused) when its central directory holds more than
    ``MAX_ARCHIVE_MEMBERS`` members or ``MAX_CENTRAL_DIRECTORY_BYTES`` bytes, from the end
    record (zip64 too) and a walk over the entries' fixed headers that creates nothing per
    member: ``zipfile`` bounds its own reading by the directory's size, not by the count the
    end record states, so the count is checked as walked. A list of members said to lie past
    the end record is refused as damaged (``zipfile`` would seek before the file's start).
    What is not a zip is left for ``zipfile`` to say."""
    with archive.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        tail_start = max(0, size - _EOCD.size - _MAX_COMMENT)
        f.seek(tail_start)
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06", 0, max(0, len(tail) - _EOCD.size + 4))
        if at < 0:
            return  # no end record: zipfile refuses it ("File is not a zip file")
        _, _, _, _, entries, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
        end = tail_start + at
        locator = end - _EOCD64_LOCATOR.size
        if locator >= 0:  # zipfile takes a zip64 record whenever its locator is there
            f.seek(locator)
            head = f.read(_EOCD64_LOCATOR.size)
            if head[:4] == b"PK\x06\x07" and locator - _EOCD64.size >= 0:
                f.seek(locator - _EOCD64.size)
                record = _EOCD64.unpack(f.read(_EOCD64.size))
                if record[0] == b"PK\x06\x06":
                    entries, cd_size, cd_offset = record[7], record[8], record[9]
                    end = locator - _EOCD64.size
        if entries > MAX_ARCHIVE_MEMBERS:
            raise FileRefused(
                f"{archive.name} holds more than {MAX_ARCHIVE_MEMBERS} files: not unpacked"
            )
        if cd_size > MAX_CENTRAL_DIRECTORY_BYTES:
            raise FileRefused(
                f"{archive.name}'s list of files is larger than {MAX_CENTRAL_DIRECTORY_BYTES} "
                "bytes: not unpacked"
            )
        if cd_offset + cd_size > end:
            # zipfile takes the difference for data prepended to the archive and adds it to
            # every member's offset: negative, it seeks before the file's start (EINVAL).
            raise FileRefused(f"{archive.name} is damaged: its list of files lies past its end")
        if cd_size < _CENTRAL_ENTRY_SIZE * (MAX_ARCHIVE_MEMBERS + 1):
            return  # too small to hold too many members, whatever the count says
        # Where zipfile reads the directory: right before the end record(s).
        f.seek(end - cd_size)
        directory = f.read(cd_size)
    count, at, lengths = 0, 0, _CENTRAL_LENGTHS.unpack_from
    while at + _CENTRAL_ENTRY_SIZE <= len(directory):
        if not directory.startswith(b"PK\x01\x02", at):
            return  # zipfile refuses it ("Bad magic number for central directory")
        count += 1
        if count > MAX_ARCHIVE_MEMBERS:
            raise FileRefused(
                f"{archive.name} holds more than {MAX_ARCHIVE_MEMBERS} files: not unpacked"
            )
        name, extra, comment = lengths(directory, at + 28)
        at += _CENTRAL_ENTRY_SIZE + name + extra + comment


def _mark(archive: Path) -> Path:
    return archive.with_name(archive.name + UNPACKED_MARK)


def unpack_archives(folder: Path, *, max_bytes: int, max_ratio: int) -> None:
    """Unpack the archives of ``folder`` not unpacked yet; each leaves a mark naming what it
    wrote (so that the archive sent again takes it away: ``start_afresh``). ``max_bytes``
    bounds the folder as a whole."""
    if not folder.is_dir():
        return
    for archive in sorted(p for p in folder.iterdir() if is_archive(p) and p.is_file()):
        mark = _mark(archive)
        if mark.exists():
            continue
        budget = max_bytes - folder_size(folder) + archive.stat().st_size
        written = unpack(archive, folder, max_bytes=max(budget, 0), max_ratio=max_ratio)
        mark.write_text("".join(f"{name}\n" for name in written), encoding="utf-8")


def unpacked(archive: Path) -> bool:
    return _mark(archive).exists()


def start_afresh(folder: Path, target: Path) -> None:
    """``target`` is sent anew: the old file goes, and, for an archive already unpacked, what
    was unpacked from it and its mark."""
    mark = _mark(target)
    if mark.exists():
        for name in mark.read_text(encoding="utf-8").splitlines():
            try:
                inside(folder, name).unlink(missing_ok=True)
            except (FileRefused, OSError):  # e.g. a folder by now: what can go still goes
                continue
        mark.unlink()
    target.unlink(missing_ok=True)


def private_folder(root: Path) -> None:
    """Make ``root`` (the exchange's folder) if need be, readable by this user only (0700):
    1C's uploads are the shop's prices. A folder another user owns is refused: that user
    could read or replace them."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = root.stat()
    if hasattr(os, "getuid") and status.st_uid != os.getuid():
        raise FileRefused(f"{root} belongs to another user (uid {status.st_uid})")
    if stat.S_IMODE(status.st_mode) != 0o700:
        root.chmod(0o700)


def sweep(root: Path, keep_seconds: float, now: float) -> int:
    """Remove exchange folders untouched for ``keep_seconds`` before ``now`` (seconds since the
    epoch, as the folders' times are): a 1C that never completed."""
    removed = 0
    if not root.is_dir():
        return 0
    limit = now - keep_seconds
    for child in root.iterdir():
        if child.is_dir() and SESSION.match(child.name) and child.stat().st_mtime < limit:
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed
