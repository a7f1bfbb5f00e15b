"""Files uploaded for an import: where they are kept, and how a ZIP of images is unpacked.

No ORM here. A ZIP is checked from its central directory before anything is written
(no absolute paths, no ``..``, no links or device files, no encrypted members, at most
``MAX_ZIP_MEMBERS`` members and ``MAX_ZIP_BYTES`` uncompressed), and again while it is
unpacked, counting the bytes actually written rather than trusting the sizes it declares.
The importer still checks every image it uses.
"""

from __future__ import annotations

import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import IO

MAX_ZIP_MEMBERS = 20_000
MAX_ZIP_BYTES = 2 * 1024 * 1024 * 1024
COPY_BLOCK = 1 << 20

# Loose: the extensions a format's files usually have. A format not listed accepts any of them.
FORMAT_EXTENSIONS: dict[str, frozenset[str]] = {
    "spiqa": frozenset({".json"}),
    "m3sciqa": frozenset({".json", ".jsonl"}),
    "scidqa": frozenset({".json", ".jsonl", ".xlsx"}),
    "qascore": frozenset({".json", ".jsonl", ".csv", ".tsv", ".xlsx"}),
    "qaextract": frozenset({".json", ".jsonl", ".csv", ".tsv", ".xlsx"}),
    "jsonl": frozenset({".jsonl", ".ndjson", ".json"}),
    "csv": frozenset({".csv", ".tsv", ".txt"}),
}
DATA_EXTENSIONS = frozenset().union(*FORMAT_EXTENSIONS.values())


class UploadRejected(Exception):
    """The upload cannot be used; the message says why in words an uploader understands."""


def extensions_for(source_format: str) -> frozenset[str]:
    return FORMAT_EXTENSIONS.get(source_format, DATA_EXTENSIONS)


def safe_file_name(name: str) -> str:
    """A plain file name to store an upload under, keeping its extension."""
    base = PurePosixPath(name.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", base).lstrip(".")
    return cleaned[-120:] or "upload"


def job_folder_create(root: Path) -> Path:
    """A fresh private folder for one job's files."""
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="job-", dir=root))


def save_chunks(chunks: Iterable[bytes], target: Path) -> Path:
    with target.open("xb") as handle:
        for chunk in chunks:
            handle.write(chunk)
    return target


def folder_remove(folder: Path, *, root: Path) -> None:
    """Remove a job folder, but never anything that is not strictly inside ``root``."""
    resolved = folder.resolve()
    if resolved != root.resolve() and resolved.is_relative_to(root.resolve()):
        shutil.rmtree(resolved, ignore_errors=True)


def zip_members_check(
    archive: zipfile.ZipFile, *, max_members: int = MAX_ZIP_MEMBERS, max_bytes: int = MAX_ZIP_BYTES
) -> list[zipfile.ZipInfo]:
    """The archive's files, if every member is safe to unpack; raises ``UploadRejected``."""
    members = archive.infolist()
    if len(members) > max_members:
        raise UploadRejected(f"the ZIP holds {len(members):,} entries; the limit is {max_members:,}")
    total = 0
    seen: set[str] = set()
    for member in members:
        _check_member(member)
        key = member.filename.rstrip("/")
        if key in seen:
            raise UploadRejected(f"the ZIP holds {member.filename!r} twice")
        seen.add(key)
        total += member.file_size
        if total > max_bytes:
            raise UploadRejected(f"the ZIP unpacks to more than {max_bytes:,} bytes")
    return [member for member in members if not member.is_dir()]


def _check_member(member: zipfile.ZipInfo) -> None:
    name = member.filename
    if "\x00" in name:
        raise UploadRejected("the ZIP holds a name with a NUL byte")
    posix = PurePosixPath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or posix.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise UploadRejected(f"the ZIP entry {name!r} is an absolute path; entries must be relative")
    if ".." in posix.parts:
        raise UploadRejected(f"the ZIP entry {name!r} contains '..' and could be unpacked outside its folder")
    # Unix file type bits, when the archiver recorded any (many record only permissions).
    file_type = stat.S_IFMT(member.external_attr >> 16)
    if file_type == stat.S_IFLNK:
        raise UploadRejected(f"the ZIP entry {name!r} is a symbolic link; links are not accepted")
    if file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise UploadRejected(f"the ZIP entry {name!r} is not a plain file or folder")
    if member.flag_bits & 0x1:
        raise UploadRejected(f"the ZIP entry {name!r} is encrypted")


def zip_check(source: IO[bytes] | Path) -> int:
    """Check an uploaded ZIP without unpacking it; returns how many files it holds."""
    try:
        with zipfile.ZipFile(source) as archive:
            return len(zip_members_check(archive))
    except zipfile.BadZipFile:
        raise UploadRejected("the images file is not a readable ZIP archive") from None


def zip_extract(
    source: Path,
    target: Path,
    *,
    max_members: int = MAX_ZIP_MEMBERS,
    max_bytes: int = MAX_ZIP_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Unpack a checked ZIP into the empty folder ``target``; returns the number of files.

    ``progress(done, total)`` is called every few hundred files.
    """
    try:
        with zipfile.ZipFile(source) as archive:
            members = zip_members_check(archive, max_members=max_members, max_bytes=max_bytes)
            for done, member in enumerate(members, start=1):
                _extract_member(archive, member, target)
                if progress is not None and (done % 500 == 0 or done == len(members)):
                    progress(done, len(members))
            return len(members)
    except zipfile.BadZipFile as error:
        raise UploadRejected(f"the images ZIP is damaged ({error})") from None


def _extract_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path) -> None:
    root = target.resolve()
    destination = (root / Path(*PurePosixPath(member.filename.replace("\\", "/")).parts)).resolve()
    if not destination.is_relative_to(root):
        raise UploadRejected(f"the ZIP entry {member.filename!r} would be unpacked outside its folder")
    destination.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    # A member may declare a small size and inflate to more. Capping each member at its
    # declared size keeps the total under the checked sum of declared sizes.
    with archive.open(member) as source, destination.open("xb") as handle:
        while block := source.read(COPY_BLOCK):
            written += len(block)
            if written > member.file_size:
                raise UploadRejected(f"the ZIP entry {member.filename!r} unpacks to more than it declares")
            handle.write(block)
