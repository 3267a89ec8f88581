"""The files of one index generation: each written once, its sha256 computed as it is written (never
read back), fsync'ed and made read-only (write bits cleared) before the generation is committed.

No two generations share an inode, so an in-place edit of any file of one generation (`np.save`
over it, `open(..., "r+b")`; root ignores the read-only mode) never changes a byte of another. A
file identical to one of the generation the index was read from (same name, sha256 and size, and
verified when it was read) is cloned from there where the filesystem shares blocks copy-on-write
(a reflink, `FICLONE`: btrfs, XFS, bcachefs, ...), else written again: an array from memory, a
Parquet file as it was streamed to disk (never held whole in memory). A method stage that was never
read is carried over file by file, unread, with its manifest entries (cloned, else copied): a
damaged stage stays damaged (and says so when its method uses it) but never blocks a write of the
rest. `HARD_LINKS` restores the hard links of before (measured in bench/results/generations.md).
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hashlib
import os
import shutil
import stat
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np

from .generations import Pin

#: hard-link unchanged files from the generation an index was read from: no copy, but the generations
#: then share the inode, and an in-place edit of the old one's file changes the new one too
HARD_LINKS = False
#: clone unchanged files copy-on-write (a reflink) where the filesystem can (else write them again)
REFLINKS = True
#: clear the write bits of every file once written (a guard against in-place edits; root ignores it)
READ_ONLY = True
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
#: what a filesystem, or a folder on another one, answers to a link or a clone it cannot make
_CANNOT = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOTTY, errno.EINVAL,
           errno.ENOSYS, errno.EACCES, errno.EBADF)


@dataclasses.dataclass
class Source:
    """The generation an Index was read from: its index directory, the folder of its files, the
    manifest's file entries, the pin that keeps the folder, and the files whose checksum was verified."""

    index_dir: str
    folder: Path
    files: dict[str, Any]
    pin: Pin | None
    verified: set[str] = dataclasses.field(default_factory=set)

    def reusable(self, name: str, index_dir: str) -> dict[str, Any] | None:
        """The manifest entry of `name` when it may be linked into a new generation of `index_dir`
        (the same index directory, and a file whose checksum was verified when it was read)."""
        entry = self.files.get(name)
        if not (HARD_LINKS or REFLINKS) or index_dir != self.index_dir or name not in self.verified or not isinstance(entry, dict):
            return None
        return entry


class _Tee:
    """A write-only file object that hashes and counts what goes through it to `handle`."""

    def __init__(self, handle: BinaryIO | None, label: str) -> None:
        self.handle, self.label = handle, label
        self.digest, self.size = hashlib.sha256(), 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.size += view.nbytes
        return self.handle.write(view) if self.handle is not None else view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        if self.handle is not None:
            self.handle.flush()

    closed = False

    def close(self) -> None:  # pyarrow closes what it wrote to; the file is `_durable`'s to close
        pass

    def __str__(self) -> str:
        return self.label


def _seal(fd: int) -> None:
    """Clear the write bits of the open file `fd` (its read bits stay as the umask made them)."""
    if READ_ONLY:
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~0o222)


def _durable(file: Path, write: Callable[[_Tee], None]) -> dict[str, Any]:
    """Write `file` through `write(tee)`, fsync it, make it read-only; its manifest entry (sha256, bytes)."""
    with open(file, "xb") as handle:
        tee = _Tee(handle, str(file))
        write(tee)
        handle.flush()
        os.fsync(handle.fileno())
        _seal(handle.fileno())
    return {"sha256": tee.digest.hexdigest(), "bytes": tee.size}


def _link(source: Path, target: Path) -> bool:
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except OSError as exc:
        if exc.errno not in (*_CANNOT, errno.ENOENT):
            raise
        return False


def _clone(source: Path, target: Path) -> bool:
    """Create `target` as a copy-on-write clone of `source` (it shares the blocks until either is
    written, which then changes that one only), fsync'ed and read-only; False, and no `target`,
    where the filesystem cannot clone (ext4, tmpfs, another filesystem) or `source` is gone."""
    if not REFLINKS:
        return False
    try:
        origin = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno not in (*_CANNOT, errno.ENOENT, errno.ELOOP):
            raise
        return False
    try:
        clone = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.ioctl(clone, FICLONE, origin)
            os.fsync(clone)
            _seal(clone)
        except OSError as exc:
            os.close(clone)
            os.unlink(target)
            if exc.errno not in _CANNOT:
                raise
            return False
        os.close(clone)
        return True
    finally:
        os.close(origin)


def _share(source: Path, target: Path) -> bool:
    """`target` holding `source`'s bytes without writing them: a hard link where `HARD_LINKS` asks for
    one, else a clone; False, and no `target`, where neither can be made, or where `source` is not a regular
    file (a link planted in a generation: a hard link to it would be that link again)."""
    try:
        if not stat.S_ISREG(os.lstat(source).st_mode):
            return False
    except FileNotFoundError:
        return False
    return _link(source, target) if HARD_LINKS else _clone(source, target)


def _npy_bytes(array: np.ndarray) -> int:
    """The size of `array` saved as `.npy` (header included)."""
    probe = _Tee(None, "")
    np.lib.format.write_array_header_1_0(probe, np.lib.format.header_data_from_array_1_0(array))
    return probe.size + array.nbytes


def write_npy(folder: Path, name: str, array: np.ndarray, source: Source | None, index_dir: str) -> dict[str, Any]:
    """`folder`/`name` holding `array` (no pickle); its manifest entry."""
    target = folder / name
    old = source.reusable(name, index_dir) if source is not None else None
    if old is not None and old.get("bytes") == _npy_bytes(array) and _share(source.folder / name, target):
        probe = _Tee(None, str(target))  # the array's checksum, never the file's: it may be edited meanwhile
        np.save(probe, array, allow_pickle=False)
        if probe.digest.hexdigest() == old.get("sha256"):
            return {"sha256": old["sha256"], "bytes": old["bytes"]}
        os.unlink(target)  # the same size, other values: written below
    return _durable(target, lambda tee: np.save(tee, array, allow_pickle=False))


def write_stream(folder: Path, name: str, fill: Callable[[Any], None]) -> dict[str, Any]:
    """`folder`/`name` holding what `fill(file)` writes to a write-only file object (e.g. FAISS's own
    format, written through a callback); its manifest entry, the sha256 computed as it is written."""
    return _durable(folder / name, fill)


def write_strings(folder: Path, name: str, column: str, values: list[str], source: Source | None,
                  index_dir: str) -> dict[str, Any]:
    """`folder`/`name`, a Parquet file of one string column; its manifest entry. It is streamed to
    disk (never whole in memory), and replaced by a clone (or a hard link, `HARD_LINKS`) of the old one
    when it turns out identical to it, so that the generations share its blocks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = folder / name
    entry = _durable(target, lambda tee: pq.write_table(pa.table({column: pa.array(values, type=pa.string())}), tee))
    old = source.reusable(name, index_dir) if source is not None else None
    if old is not None and (old.get("sha256"), old.get("bytes")) == (entry["sha256"], entry["bytes"]):
        shared = folder / f".{name}.link"
        if _share(source.folder / name, shared):
            os.replace(shared, target)
    return entry


def carry(folder: Path, name: str, source: Source) -> dict[str, Any] | None:
    """`source`'s file `name` cloned (else copied; hard-linked with `HARD_LINKS`) into `folder` as it is,
    unread, and made read-only; its manifest entry
    there (None when the manifest does not list it). A file that is missing stays missing: the stage
    it belongs to reports it when it is read. So does one that is not a regular file (a link, a FIFO or a
    folder put in its place): a link is never followed, so nothing outside the index is read or sealed."""
    entry = source.files.get(name)
    if not isinstance(entry, dict):
        return None
    origin, target = source.folder / name, folder / name
    if not _share(origin, target):
        try:
            fd = os.open(origin, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO does not block
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ELOOP):
                raise
            return dict(entry)  # missing, or a link planted in its place (never followed): reported when read
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return dict(entry)  # a FIFO or a folder in its place: left behind, reported when read
            _durable(target, lambda tee: shutil.copyfileobj(handle, tee))
    return dict(entry)
