"""Checksummed checkpoints of a streaming build's work directory.

Every checkpoint's sha256 is appended to `checksums.jsonl` once the file is in place (the
last entry of a name wins; a torn last line is ignored). A resumed build first checks every
file of the work directory against it: an unlisted file (a temporary, or a checkpoint whose
write was interrupted), a truncated or an altered one is deleted and recomputed, so stale or
damaged data never reaches the index.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_path, describe_os_error
from ..checksums import sha256_file
from ..errors import OutputError, TigragError

log = logging.getLogger(__name__)

LEDGER = "checksums.jsonl"
BUILD = "build.json"


class Ledger:
    """sha256 of the checkpoints of work directory `work`."""

    def __init__(self, work: Path):
        self.work = work
        self.sums: dict[str, str] = {}
        self._lock = threading.Lock()  # the encoder's and the NER thread's checkpoints are recorded from two threads

    def load(self) -> None:
        """Read the recorded checksums (unreadable lines are skipped: their files get recomputed)."""
        self.sums = {}
        path = self.work / LEDGER
        if not path.is_file():
            return
        for line in path.read_bytes().splitlines():
            try:
                entry = json.loads(line)
                self.sums[str(entry["file"])] = str(entry["sha256"])
            except (ValueError, KeyError, TypeError):
                continue

    def record(self, file: Path, sha256: str | None = None) -> None:
        """Note that checkpoint `file` is complete, with its sha256 (computed when not given)."""
        digest = sha256 or sha256_file(file)
        with self._lock:
            self._append(file, digest)

    def _append(self, file: Path, digest: str) -> None:
        self.sums[file.name] = digest
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with open(os.open(self.work / LEDGER, flags, 0o666), "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"file": file.name, "sha256": digest}) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:  # the checkpoint stays unlisted, so a resume recomputes it
            if exc.errno == errno.ELOOP:  # a planted link: never followed
                raise TigragError(f"{self.work / LEDGER}: a symbolic link, not the build's ledger; delete "
                                  f"{self.work} to start over") from None
            raise OutputError(f"{self.work / LEDGER}: cannot write ({describe_os_error(exc)}); the build can "
                              "continue with --resume once there is room") from None

    def validate(self) -> int:
        """Delete every file of the work directory that is not a recorded, intact checkpoint;
        returns how many were deleted (they are recomputed by the build)."""
        self.load()
        dropped: list[str] = []
        for file in sorted(self.work.iterdir()):
            if file.name in (LEDGER, BUILD):
                continue
            want = self.sums.get(file.name)
            if want is not None and file.is_file() and sha256_file(file) == want:
                continue
            dropped.append(f"{file.name} ({'checksum mismatch' if want else 'unfinished'})")
            shutil.rmtree(file) if file.is_dir() and not file.is_symlink() else file.unlink()
            self.sums.pop(file.name, None)
        if dropped:
            log.info("%d checkpoint(s) of %s will be recomputed: %s", len(dropped), self.work, ", ".join(dropped))
        return len(dropped)


def save_npz(path: Path, **arrays: Any) -> str:
    """Write arrays to `path` atomically; returns the file's sha256."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)
        digest = sha256_file(tmp)
    return digest


def save_npy(path: Path, array: np.ndarray) -> str:
    """Write one array to `path` atomically; returns the file's sha256."""
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, array, allow_pickle=False)
        digest = sha256_file(tmp)
    return digest


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the .npz file at `path`, read whole (no pickled objects)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
