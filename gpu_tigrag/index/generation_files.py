"""The files of one index generation: each written once, its sha256 computed as it is written (never
read back), fsync'ed before the generation is committed.

A file identical to one of the generation the index was read from (same name, sha256 and size, and
verified when it was read) is hard-linked from there, where the filesystem allows: an array is then
never written again (`extend` rewrites no base array), a Parquet file (streamed to disk, never held
whole in memory) is replaced by the link, so the generations share its blocks. A method stage that was never read is carried
over file by file, unread, with its manifest entries: a damaged stage stays damaged (and says so
when its method uses it) but never blocks a write of the rest.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np

from .generations import Pin

#: hard-link unchanged files from the generation an index was read from (else write them again)
HARD_LINKS = True


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
        if not HARD_LINKS or index_dir != self.index_dir or name not in self.verified or not isinstance(entry, dict):
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


def _durable(file: Path, write: Callable[[_Tee], None]) -> dict[str, Any]:
    """Write `file` through `write(tee)`, fsync it; its manifest entry (sha256, bytes)."""
    with open(file, "xb") as handle:
        tee = _Tee(handle, str(file))
        write(tee)
        handle.flush()
        os.fsync(handle.fileno())
    return {"sha256": tee.digest.hexdigest(), "bytes": tee.size}


def _link(source: Path, target: Path) -> bool:
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES, errno.ENOENT):
            raise
        return False


def _npy_bytes(array: np.ndarray) -> int:
    """The size of `array` saved as `.npy` (header included)."""
    probe = _Tee(None, "")
    np.lib.format.write_array_header_1_0(probe, np.lib.format.header_data_from_array_1_0(array))
    return probe.size + array.nbytes


def write_npy(folder: Path, name: str, array: np.ndarray, source: Source | None, index_dir: str) -> dict[str, Any]:
    """`folder`/`name` holding `array` (no pickle); its manifest entry."""
    target = folder / name
    old = source.reusable(name, index_dir) if source is not None else None
    if old is not None and old.get("bytes") == _npy_bytes(array):
        probe = _Tee(None, str(target))
        np.save(probe, array, allow_pickle=False)
        if probe.digest.hexdigest() == old.get("sha256") and _link(source.folder / name, target):
            return {"sha256": old["sha256"], "bytes": old["bytes"]}
    return _durable(target, lambda tee: np.save(tee, array, allow_pickle=False))


def write_stream(folder: Path, name: str, fill: Callable[[Any], None]) -> dict[str, Any]:
    """`folder`/`name` holding what `fill(file)` writes to a write-only file object (e.g. FAISS's own
    format, written through a callback); its manifest entry, the sha256 computed as it is written."""
    return _durable(folder / name, fill)


def write_strings(folder: Path, name: str, column: str, values: list[str], source: Source | None,
                  index_dir: str) -> dict[str, Any]:
    """`folder`/`name`, a Parquet file of one string column; its manifest entry. It is streamed to
    disk (never whole in memory), and replaced by a link when it turns out identical to the old one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = folder / name
    entry = _durable(target, lambda tee: pq.write_table(pa.table({column: pa.array(values, type=pa.string())}), tee))
    old = source.reusable(name, index_dir) if source is not None else None
    if old is not None and (old.get("sha256"), old.get("bytes")) == (entry["sha256"], entry["bytes"]):
        shared = folder / f".{name}.link"
        if _link(source.folder / name, shared):
            os.replace(shared, target)
    return entry


def carry(folder: Path, name: str, source: Source) -> dict[str, Any] | None:
    """`source`'s file `name` linked (or copied) into `folder` as it is, unread; its manifest entry
    there (None when the manifest does not list it). A file that is missing stays missing: the stage
    it belongs to reports it when it is read."""
    entry = source.files.get(name)
    if not isinstance(entry, dict):
        return None
    origin, target = source.folder / name, folder / name
    if not (HARD_LINKS and _link(origin, target)):
        try:
            shutil.copyfile(origin, target, follow_symlinks=False)
        except FileNotFoundError:
            return dict(entry)
        with open(target, "rb") as handle:
            os.fsync(handle.fileno())
    return dict(entry)
