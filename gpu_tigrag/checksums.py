"""sha256 of files, for index manifests, dataset provenance and downloads."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

#: digests `sha256_file_once` computed in this process, by the file's identity and change stamps
_KNOWN: dict[tuple[int, ...], str] = {}
_KNOWN_LOCK = threading.Lock()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    with open(path, "rb") as handle:
        return _sha256_handle(handle, chunk)


def _sha256_handle(handle: Any, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    while block := handle.read(chunk):
        digest.update(block)
    return digest.hexdigest()


def _stamps(stat: os.stat_result) -> tuple[int, ...]:
    """What changes when a file's content changes: any write sets ctime to now, and no call can set it back."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def sha256_file_once(path: str | Path) -> str:
    """`sha256_file`, computed once per process while the file keeps its device, inode, size, mtime and ctime.

    For files that are only read while in use, a model's weights and tokenizer: one encoder load checks the same
    files from several call sites (resolving the model, the runtime's weights check), and hashing the 470 MB of
    converted e5 weights again finds nothing the first hash did not (0.8 s of a 1.9 s load). A file changed since
    has another ctime, so it is hashed again; a digest is remembered only when the file's stamps are the same
    before and after it was read."""
    key = _stamps(os.stat(path))
    with _KNOWN_LOCK:
        known = _KNOWN.get(key)
    if known is not None:
        return known
    with open(path, "rb") as handle:
        before = _stamps(os.fstat(handle.fileno()))
        digest = _sha256_handle(handle)
        if _stamps(os.fstat(handle.fileno())) == before:
            with _KNOWN_LOCK:
                _KNOWN[before] = digest
    return digest


def sha256_json(value: Any) -> str:
    """sha256 of a JSON value in canonical form (sorted keys, no spaces), e.g. a stored config."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
