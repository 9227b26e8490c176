"""Each exchange's files in a folder of its own: names that may not leave it, uploads capped,
archives unpacked under the same rules (no ``..``, absolute paths or links; the unpacked size
and the compression ratio capped)."""

from __future__ import annotations

import re
import shutil
import stat
import time
import zipfile
from pathlib import Path, PurePosixPath

from exchange.intake.commerceml.publish import WORK_SUFFIXES

SESSION = re.compile(r"^[0-9a-f]{32}$")
UNPACKED_MARK = ".unpacked"


class FileRefused(ValueError):
    """A name, a size or an archive the exchange refuses; the message is one line."""


def safe_relative(name: str) -> PurePosixPath:
    """The relative path ``name`` names inside an exchange's folder, or FileRefused."""
    text = name.replace("\\", "/")
    if not text or "\x00" in text or len(text) > 400:
        raise FileRefused(f"file name {name[:100]!r} is not allowed")
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        raise FileRefused(f"file name {name[:100]!r} is an absolute path: not allowed")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts:
        raise FileRefused(f"file name {name[:100]!r} names no file")
    if ".." in parts:
        raise FileRefused(f"file name {name[:100]!r} leaves the exchange's folder: not allowed")
    if parts[-1].endswith((*WORK_SUFFIXES, ".part", UNPACKED_MARK)):  # the service's own files
        raise FileRefused(f"file name {name[:100]!r} is reserved")
    return PurePosixPath(*parts)


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, checked to stay inside ``folder`` once resolved (links included)."""
    target = folder / safe_relative(name)
    root = folder.resolve()
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise FileRefused(f"file name {name[:100]!r} leaves the exchange's folder: not allowed")
    return target


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def unpack(archive: Path, folder: Path, *, max_bytes: int, max_ratio: int) -> list[str]:
    """Unpack ``archive`` into ``folder``; return the names written. Refuses links, names that
    leave the folder, a member whose ratio exceeds ``max_ratio`` and more than ``max_bytes``
    in all (counted as written, not as the archive claims)."""
    written: list[str] = []
    total = 0
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    raise FileRefused(f"archive member {info.filename!r} is a link: not allowed")
                if info.is_dir():
                    continue
                target = inside(folder, info.filename)
                if info.compress_size and info.file_size / info.compress_size > max_ratio:
                    raise FileRefused(
                        f"archive member {info.filename!r} expands more than {max_ratio} times"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                member_total = 0
                with zf.open(info) as source, target.open("wb") as out:
                    while block := source.read(1 << 20):
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
    return written


def sweep(root: Path, keep_seconds: float) -> int:
    """Remove exchange folders untouched for ``keep_seconds`` (a 1C that never completed)."""
    removed = 0
    if not root.is_dir():
        return 0
    limit = time.time() - keep_seconds
    for child in root.iterdir():
        if child.is_dir() and SESSION.match(child.name) and child.stat().st_mtime < limit:
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed
