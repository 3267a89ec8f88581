"""One way to write a file (or a folder) atomically: write a temporary sibling, flush it to disk,
rename it over the target. A reader sees the old version or the new one, never a half-written
one; a writer killed part-way leaves only a `.NAME.tmp-*` (or `.NAME.old-*`) sibling, which the
next write of that target removes.

Disk full and unwritable folders surface as `OutputError` naming the target, with nothing of the
target changed.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import OutputError, TigragError
from .outputs import check_replaceable

#: `.NAME.tmp-*`: a version of NAME being written; `.NAME.old-*`: the folder a new one replaced
TMP_MARK, OLD_MARK = ".tmp-", ".old-"


def _tmp_prefix(target: Path) -> str:
    return f".{target.name}{TMP_MARK}"


def stale_siblings(target: Path) -> list[Path]:
    """Temporary siblings (`.NAME.tmp-*`, `.NAME.old-*`) that killed writes of `target` left."""
    if not target.parent.is_dir():
        return []
    marks = (_tmp_prefix(target), f".{target.name}{OLD_MARK}")
    return sorted(p for p in target.parent.iterdir() if p.name.startswith(marks))


def remove_stale_temporaries(target: Path) -> int:
    """Remove the `stale_siblings` of `target`; returns how many. Call it only while no other write
    of `target` can be under way (a writer lock, or a single writer)."""
    stale = stale_siblings(target)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    return len(stale)


def describe_os_error(exc: OSError) -> str:
    """A short reason for an I/O failure ('no space left on device', 'permission denied')."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    short = _SHORT_WRITE.fullmatch(str(exc).strip())
    if short:  # numpy's tofile reports a short write without an errno: on a local disk, a full one
        wanted, done = (int(n) for n in short.groups())
        return f"the disk is full or the quota exceeded (only {done:,} of {wanted:,} bytes were written)"
    return (exc.strerror or str(exc)).lower()


_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")


def process_umask() -> int:
    """This process's umask (read from /proc where it can be, without changing it; else set and
    restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `target`; when the block ends without error, the file written
    there is fsync'ed and renamed over `target`. `suffix` keeps an extension some writers add
    (np.save appends '.npy' to a name without it)."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=_tmp_prefix(target), suffix=suffix, dir=target.parent)
        os.fchmod(fd, 0o666 & ~process_umask())  # mkstemp makes it 0600: the finished file is an ordinary one
        os.close(fd)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)})") from None
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        check_replaceable(target)  # a device, FIFO, socket, folder or link is never renamed over
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)}); nothing was changed there") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fsync_folder(folder: str | Path) -> None:
    """Flush `folder`'s entries (a file renamed into it, a folder created) to disk; a filesystem
    that cannot fsync a folder is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(target: str | Path, write: Callable[[Path], Any], suffix: str = "") -> None:
    """`write(tmp_path)` then rename over `target` (see `atomic_path`)."""
    with atomic_path(target, suffix) as tmp:
        write(tmp)


def atomic_write_text(target: str | Path, text: str) -> None:
    """Replace `target` with `text` (UTF-8) atomically."""
    atomic_write(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_json(target: str | Path, value: Any, **dump_options: Any) -> None:
    """Replace `target` with `value` as JSON atomically."""
    atomic_write_text(target, json.dumps(value, **dump_options))


def _rename_over_empty(tmp: Path, target: Path) -> None:
    """Rename folder `tmp` to `target`, which is absent or an empty folder: rename(2) replaces an empty
    folder atomically and fails on one that is not (a file that arrived after the check is never lost)."""
    try:
        os.rename(tmp, target)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        raise OutputError(f"{target}: files arrived in it while it was being written; refusing to replace it "
                          "(nothing there was changed or removed): move them elsewhere, or choose another "
                          "folder") from None


@contextmanager
def atomic_directory(target: str | Path, replaceable_if: str | None = None) -> Iterator[Path]:
    """Yield a new temporary folder beside `target`; when the block ends without error, it takes the
    place of `target`. `replaceable_if`: a file name the writer leaves in every folder it writes (its
    manifest); an existing folder holding it is the writer's, moved aside as `.NAME.old-PID` and removed.
    Any other existing folder must be empty: the new one is renamed over it, which the kernel refuses
    (OutputError, nothing lost) if anything arrived there since it was checked; a non-empty folder without
    the manifest is refused (TigragError, nothing written) up front. None: no folder is replaceable but an
    empty one (the caller has checked the target itself)."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(target), dir=target.parent))
        os.chmod(tmp, 0o777 & ~process_umask())  # mkdtemp makes it 0700: the finished folder is an ordinary one
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)})") from None
    try:
        yield tmp
        if os.path.lexists(target) and (os.path.islink(target) or not target.is_dir()):
            raise TigragError(f"{target}: exists and is not a folder; refusing to replace it (nothing was written)")
        if target.exists() and replaceable_if is not None and not (target / replaceable_if).is_file() \
                and any(target.iterdir()):
            raise TigragError(f"{target}: holds files this writer did not write (no {replaceable_if}); refusing to "
                              "replace it (nothing was written): move them elsewhere")
        if target.exists() and replaceable_if is not None and (target / replaceable_if).is_file():
            old = target.with_name(f".{target.name}{OLD_MARK}{os.getpid()}")
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            _rename_over_empty(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)}); nothing was changed there") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
