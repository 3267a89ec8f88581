"""One writer at a time: an exclusive, non-blocking `flock` on a lock file beside the target.

The lock of `DIR` (an index directory) or `OUT` (a run's output) is the sibling file
`DIR.lock` / `OUT.lock`, outside the target so that an index's manifest never lists it. The
holder writes its PID into it; a second writer fails at once with a `WriterLockError` that
names the path and that PID, before it changes anything. The kernel drops the lock when the
holder exits, even by `kill -9`, so a stale lock file never blocks anyone. The holder removes
the file on release; a writer that locked a file just removed re-checks the inode and retries.
Within one process the lock is re-entrant for the thread that holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import TigragError, WriterLockError

_HELD: dict[str, tuple[int, int]] = {}  # lock path -> (thread id, depth)
_GUARD = threading.Lock()


def lock_path(target: str | Path) -> Path:
    """The lock file of `target`: `TARGET.lock` beside it."""
    target = Path(target).resolve()
    return target.with_name(target.name + ".lock")


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"PID {text}" if text.isdigit() else "a process that is starting"


def _looks_like_a_lock(fd: int) -> bool:
    """Whether the open file `fd` is empty or holds what a holder writes into a lock file (a PID)."""
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 64, 0) if size else b""
    except OSError:
        return True  # unreadable: the flock alone decides
    return size <= 32 and head.strip().isdigit() or size == 0


def _note_holder(fd: int) -> None:
    """Write this PID into the lock file, for the message a competing writer gets. On a full disk
    the note is skipped: the flock alone is the lock, and the write it guards reports the disk."""
    try:
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise


class NotALockFile(OSError):
    """The lock path exists and is not a regular file (a symbolic link, a folder, a FIFO...)."""


def open_lock_file(path: Path) -> int:
    """Open (or create) the regular file `path` for a lock, without following a symbolic link at
    `path`: a planted link (or a dangling one) would otherwise have its target truncated and
    overwritten with a PID, or a file created wherever it points. Raises NotALockFile for anything
    but a regular file, OSError for the rest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise NotALockFile(errno.ELOOP, "is a symbolic link, not a lock file") from None
        if exc.errno == errno.EISDIR:
            raise NotALockFile(errno.EISDIR, "is a folder, not a lock file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotALockFile(errno.EINVAL, "is not a regular file, not a lock file")
    return fd


def _acquire(path: Path, target: Path, what: str) -> int:
    while True:
        try:
            fd = open_lock_file(path)
        except NotALockFile as exc:
            raise TigragError(f"{path} {exc.strerror}: the lock of {target} must be a regular file; nothing was "
                              "changed (remove it if no other write is under way)") from None
        except OSError as exc:
            raise TigragError(f"{path}: cannot create the lock file of {target} ({exc.strerror or exc})") from None
        if not _looks_like_a_lock(fd):  # a user's file named TARGET.lock: never truncated, never removed
            os.close(fd)
            raise TigragError(f"{path}: exists and is not a lock file of gpu_tigrag (it holds other data); the lock of "
                              f"{target} goes there, so nothing was changed: move that file away")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise WriterLockError(f"{target}: {what} is already in progress ({holder} holds {path}); "
                                  "nothing was changed: wait for it to finish") from None
        try:
            current = os.stat(path)
            mine = os.fstat(fd)
            if (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev):
                os.ftruncate(fd, 0)
                _note_holder(fd)
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the previous holder removed the file we locked: lock the new one


@contextmanager
def writer_lock(target: str | Path, what: str = "another write") -> Iterator[Path]:
    """Hold the exclusive writer lock of `target` for the block; raise `WriterLockError` if taken.

    `what` names the competing operation in the message (e.g. "an index build").
    """
    if os.path.islink(target) and not os.path.exists(target):  # resolve() would lock (and write) where it points
        raise TigragError(f"{target}: a symbolic link to nothing ({os.readlink(target)}); refusing to write "
                          "where it points: remove it or choose another path")
    target = Path(target).resolve()
    path = lock_path(target)
    key, me = str(path), threading.get_ident()
    with _GUARD:
        owner = _HELD.get(key)
        if owner is not None and owner[0] != me:
            raise WriterLockError(f"{target}: {what} is already in progress in this process "
                                  f"(PID {os.getpid()}, another thread holds {path}); nothing was changed")
        if owner is not None:
            _HELD[key] = (me, owner[1] + 1)
    if owner is not None:
        try:
            yield path
        finally:
            with _GUARD:
                thread, depth = _HELD[key]
                _HELD[key] = (thread, depth - 1)
        return
    fd = _acquire(path, target, what)
    with _GUARD:
        _HELD[key] = (me, 1)
    try:
        yield path
    finally:
        with _GUARD:
            _HELD.pop(key, None)
        try:
            os.unlink(path)  # still locked here, so no other writer holds this inode
        except FileNotFoundError:
            pass
        os.close(fd)


def writer_of(target: str | Path) -> str | None:
    """Who holds the writer lock of `target` now ("PID 1234"), or None when nobody does; never creates
    the lock file (a reader may have no right to write beside `target`)."""
    path = lock_path(target)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        except OSError:
            return None
        return None
    finally:
        os.close(fd)
