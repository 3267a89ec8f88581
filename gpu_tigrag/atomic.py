"""One way to write a file atomically: write a temporary sibling, flush it to disk, rename it over
the target. A reader sees the old file or the new one, never a half-written one; a writer killed
part-way leaves only a `.NAME.tmp-*` sibling, which the next write of that target removes.

Disk full and unwritable folders surface as `OutputError` naming the target, with nothing of the
target changed.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import OutputError

#: prefix of the temporary siblings; `.NAME.tmp-` marks the temporary file of target NAME
TMP_MARK = ".tmp-"


def _tmp_prefix(target: Path) -> str:
    return f".{target.name}{TMP_MARK}"


def remove_stale_temporaries(target: Path) -> int:
    """Remove temporary siblings that killed writes of `target` left; returns how many. Call it only
    while no other write of `target` can be under way (a writer lock, or a single writer)."""
    prefix, removed = _tmp_prefix(target), 0
    if target.parent.is_dir():
        for stale in target.parent.iterdir():
            if stale.name.startswith(prefix) and stale.is_file():
                stale.unlink(missing_ok=True)
                removed += 1
    return removed


def describe_os_error(exc: OSError) -> str:
    """A short reason for an I/O failure ('no space left on device', 'permission denied')."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return (exc.strerror or str(exc)).lower()


@contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `target`; when the block ends without error, the file written
    there is fsync'ed and renamed over `target`. `suffix` keeps an extension some writers add
    (np.save appends '.npy' to a name without it)."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=_tmp_prefix(target), suffix=suffix, dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)})") from None
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)}); nothing was changed there") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
