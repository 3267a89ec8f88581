"""Index generations: readers never see a write (Lucene's commit points, SQLite's "never a half state").

An index directory holds immutable generations, each a complete index of format 3 (its own
`manifest.json` and files): `INDEX/gen-000007/`. The directory's `manifest.json` is a small
pointer, `{"format": "gpu_tigrag-index", "format_version": 4, "generation": "gen-000007"}`,
replaced atomically (temporary, fsync, rename, fsync of the folder) when a writer commits a new
generation. A reader reads the pointer once and reads everything, stages loaded lazily later
included, from that generation, which it pins with a shared `flock` on the generation's folder
for as long as it uses it. A writer removes a superseded generation only when it gets an
exclusive lock on it (no reader holds it); one still held is removed by a later writer.
Generations are numbered upwards, so a pointer never names a folder that was removed and
created again.

An index written before generations (files and `manifest.json` of format 3 directly in the
folder) still loads: its readers pin the folder itself. The first write converts it (the
pointer replaces the flat manifest) and removes the flat files once no reader holds them.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

from ..atomic import OLD_MARK, atomic_write_json, fsync_folder
from ..errors import IndexFormatError, NotAnIndexError, TigragError

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
#: the format version of the pointer (a generation's own manifest keeps the content's format version)
POINTER_VERSION = 4
_NAME = re.compile(r"gen-(\d{6,})")
_RETRIES = 1000  # pointer switches a reader follows before it gives up (each one is a commit)
_FLAT_SUFFIXES = (".npy", ".parquet")  # what a flat index keeps beside its manifest
#: the temporaries writers of an index directory leave when killed: a staged generation, a generation
#: renamed away for removal, a pointer being written (nothing else there is ever removed as one)
_TEMPORARY = re.compile(r"\.(gen-\d{6,}|manifest\.json)\.(tmp-|old-)[^/]*")


def generation_name(number: int) -> str:
    return f"gen-{number:06d}"


#: digits of a generation number at most (the engine counts up from gen-000001: 10^18 commits are never
#: reached); a longer name is no generation of the engine's, and never converted (a pointer naming one
#: with 5,000 digits is a damaged pointer, not an int() past Python's digit limit)
MAX_GENERATION_DIGITS = 18


def generation_number(name: str) -> int | None:
    """N of a generation folder's name `gen-N`, None for any other name."""
    found = _NAME.fullmatch(name)
    return int(found.group(1)) if found and len(found.group(1)) <= MAX_GENERATION_DIGITS else None


# ---- pins --------------------------------------------------------------------------------------

class PinLost(Exception):
    """The folder to pin was removed (or is being removed) by a writer: read the pointer again."""


_PINNED: dict[tuple[int, int], int] = {}  # (device, inode) of a folder -> pins this process holds on it
_PINNED_GUARD = threading.Lock()


def _release(fd: int, key: tuple[int, int]) -> None:
    with _PINNED_GUARD:
        count = _PINNED.get(key, 0) - 1
        if count > 0:
            _PINNED[key] = count
        else:
            _PINNED.pop(key, None)
    os.close(fd)


class Pin:
    """A shared `flock` on a generation's folder (or on a flat index's folder), held until `close()`
    or until the object is garbage collected: no writer removes the folder meanwhile."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise PinLost(folder) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise IndexFormatError(f"{folder}: not a folder (a symbolic link or a file where the index "
                                       "expects a folder of its own); rebuild the index") from None
            raise TigragError(f"{folder}: cannot be opened ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # a writer is removing it
            os.close(fd)
            raise PinLost(folder) from None
        except OSError as exc:  # a filesystem without flock: read unpinned (writers then never remove it)
            log.debug("%s: cannot be locked (%s); read without a pin", folder, exc)
        mine = os.fstat(fd)
        try:
            there = os.stat(folder, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(fd)  # removed (or renamed away for removal) before we locked it
            raise PinLost(folder)
        self.key = (mine.st_dev, mine.st_ino)
        with _PINNED_GUARD:
            _PINNED[self.key] = _PINNED.get(self.key, 0) + 1
        self._finalizer = weakref.finalize(self, _release, fd, self.key)

    def close(self) -> None:
        self._finalizer()

    def __getstate__(self) -> dict:
        raise TypeError("a pinned index generation cannot be pickled; load the index in each process")


def pinned_here(folder: Path) -> bool:
    """Whether this process holds a pin on `folder`."""
    try:
        st = os.stat(folder, follow_symlinks=False)
    except OSError:
        return False
    with _PINNED_GUARD:
        return (st.st_dev, st.st_ino) in _PINNED


def _try_exclusive(folder: Path) -> int | None:
    """An fd holding an exclusive lock on `folder`, or None when a reader holds it (or it cannot be
    locked: then it is never removed)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


# ---- reading -----------------------------------------------------------------------------------

@dataclass
class Snapshot:
    """What a reader holds: the folder of one generation (or of a flat index), its pin, the
    generation's name (None for a flat index) and the bytes of its manifest, read once."""

    folder: Path
    pin: Pin
    generation: str | None
    manifest_bytes: bytes


def _read_bytes(file: Path) -> bytes | None:
    """The bytes of manifest `file`, None when there is none; a symbolic link is not followed."""
    try:
        with open(os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise NotAnIndexError(f"{file.parent}: not an index directory ({MANIFEST} is a folder)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexFormatError(f"{file}: a symbolic link, not an index's manifest; remove it and write the "
                                   "index again") from None
        raise TigragError(f"{file}: cannot be read ({exc.strerror or exc})") from None


def pointed_generation(path: Path, raw: bytes) -> str | None:
    """The generation the pointer `raw` (the bytes of `path`/manifest.json) names; None when it is
    the manifest of a flat index (format 3 and older, checked by the caller)."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # also an int past Python's digit limit, nesting past the stack
        return None  # not a pointer: the manifest reader reports the damage
    if not isinstance(value, dict) or value.get("format_version") != POINTER_VERSION or "generation" not in value:
        return None
    name = value["generation"]
    if not isinstance(name, str) or generation_number(name) is None:
        shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:40]}... ({len(repr(name)):,} characters)"
        raise IndexFormatError(f"{path / MANIFEST}: names the generation {shown}, not a folder gen-NNNNNN; "
                               "the pointer is damaged: rebuild the index")
    return name


def open_snapshot(path: Path) -> Snapshot:
    """Pin the current generation of index directory `path` and read its manifest (see the module doc)."""
    last: tuple[bytes, str] | None = None
    for _ in range(_RETRIES):
        raw = _read_bytes(path / MANIFEST)
        if raw is None:
            raise NotAnIndexError(f"{path}: not an index directory ({MANIFEST} is missing)")
        name = pointed_generation(path, raw)
        if name is None:  # a flat index: pin its folder, then check it is still flat
            try:
                pin = Pin(path)
            except PinLost:  # a writer converted it and is removing the flat files: read the pointer
                continue
            if _read_bytes(path / MANIFEST) == raw:
                return Snapshot(path, pin, None, raw)
            pin.close()
            continue
        folder = path / name
        try:
            pin = Pin(folder)
        except PinLost:
            if last == (raw, name):  # the pointer did not move: its generation is gone
                raise IndexFormatError(f"{folder}: missing, but {path / MANIFEST} names it as the current "
                                       "generation; the index is damaged: rebuild it") from None
            last = (raw, name)
            continue
        manifest = _read_bytes(folder / MANIFEST)
        if manifest is None:
            pin.close()
            raise IndexFormatError(f"{folder / MANIFEST}: missing; the index is damaged: rebuild it")
        return Snapshot(folder, pin, name, manifest)
    raise IndexFormatError(f"{path}: the index changed {_RETRIES} times while it was read; try again")


def current_generation(path: Path) -> str | None:
    """The generation the pointer of `path` names now (None: a flat index or none)."""
    raw = _read_bytes(path / MANIFEST)
    return None if raw is None else pointed_generation(path, raw)


# ---- writing -----------------------------------------------------------------------------------

def next_generation(path: Path) -> str:
    """A name above every generation in `path` (committed, superseded or left by a killed writer)."""
    numbers = [generation_number(p.name) for p in path.iterdir()] if path.is_dir() else []
    return generation_name(max([n for n in numbers if n is not None], default=0) + 1)


def flat_files(path: Path) -> list[str]:
    """The files of the flat index that index directory `path` was (or is), still to be removed: those its
    flat manifest lists, or that the pointer carried over from it (`commit`) — never any other file."""
    raw = _read_bytes(path / MANIFEST)
    if raw is None:
        return []
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    if not isinstance(value, dict):
        return []
    if pointed_generation(path, raw) is not None:
        names = value.get("flat_files")
    else:
        names = list(value["files"]) if isinstance(value.get("files"), dict) else []
    if not isinstance(names, list):
        return []
    return sorted(n for n in names if isinstance(n, str) and n.endswith(_FLAT_SUFFIXES) and "/" not in n
                  and n == Path(n).name and not n.startswith(".") and os.path.lexists(path / n))


def commit(path: Path, name: str) -> None:
    """Make generation `name` of index directory `path` the current one (atomically, durably). The
    pointer carries the names of a flat index's files not yet removed (`flat_files`), so that only
    they are ever removed."""
    leftover = flat_files(path)
    fsync_folder(path)  # the generation's folder entry first
    pointer = {"format": "gpu_tigrag-index", "format_version": POINTER_VERSION, "generation": name}
    if leftover:
        pointer["flat_files"] = leftover
    atomic_write_json(path / MANIFEST, pointer, indent=1)
    fsync_folder(path)


def remove_leftovers(path: Path) -> None:
    """What killed writers left inside index directory `path`: temporaries and generations above
    the current one (written, never committed). Call it only while holding the writer lock."""
    current = generation_number(current_generation(path) or "gen-000000") or 0
    for entry in path.iterdir():
        number = generation_number(entry.name)
        if _TEMPORARY.fullmatch(entry.name) or (number is not None and number > current
                                                 and (entry.is_dir() or entry.is_symlink())):
            _remove(entry)  # a link is removed itself, never followed


def collect(path: Path) -> list[str]:
    """Remove the superseded generations of index directory `path` that no reader holds, and the
    files of the flat index it was converted from once no reader holds them; returns what is
    still held (a later writer removes it). A generation this process still holds is removed when
    it exits, if nobody holds it then."""
    current = current_generation(path)
    if current is None:
        return []
    top = generation_number(current) or 0
    held = []
    for entry in sorted(path.iterdir()):
        number = generation_number(entry.name)
        if number is None or number >= top:
            continue
        if entry.is_symlink() or not entry.is_dir():
            continue  # not a generation the engine wrote: left as it is
        fd = _try_exclusive(entry)
        if fd is None:
            held.append(entry.name)
            if pinned_here(entry):
                _collect_at_exit(path)
            continue
        try:
            _remove(entry)
        finally:
            os.close(fd)
    flat = [path / name for name in flat_files(path) if not (path / name).is_dir()]
    if flat:
        fd = _try_exclusive(path)
        if fd is None:
            held.append("the flat index's files")
            if pinned_here(path):
                _collect_at_exit(path)
        else:
            try:
                for file in flat:
                    file.unlink(missing_ok=True)
            finally:
                os.close(fd)
    return held


def _remove(entry: Path) -> None:
    """Remove a generation (first renamed away, so that no reader can pin it half removed) or a
    temporary; a symbolic link is removed itself, never followed."""
    try:
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink(missing_ok=True)
            return
        trash = entry.with_name(f".{entry.name}{OLD_MARK}{os.getpid()}")
        if entry.name.startswith("."):
            trash = entry
        else:
            os.rename(entry, trash)
        shutil.rmtree(trash, ignore_errors=True)
    except OSError as exc:
        log.warning("%s: could not be removed (%s); a later write of the index removes it", entry,
                    exc.strerror or exc)


_AT_EXIT: set[Path] = set()


def _collect_at_exit(path: Path) -> None:
    """Collect `path` again when this process exits (it held a superseded generation itself)."""
    with _PINNED_GUARD:
        first = not _AT_EXIT
        _AT_EXIT.add(path)
    if first:
        atexit.register(_exit_collect)


def _exit_collect() -> None:
    import gc

    from ..locking import writer_lock

    gc.collect()  # indexes no longer used release their pins
    for path in sorted(_AT_EXIT):
        try:
            with writer_lock(path, "a clean-up of superseded generations"):
                collect(path)
        except (TigragError, OSError):
            pass  # another writer holds it: it collects
