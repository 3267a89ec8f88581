"""The numba cache folder of the kernels (`cache=True`), chosen before the first of them compiles: every
kernel module imports this module first (`from .. import numba_cache`).

numba keys a cached function by its own source file's time stamp only. A kernel that calls a function of
another kernel module keeps that function's old machine code after the other module changes (seen here:
the int8 encoder kept the attention of an edited `attention_tiles` until its cache was removed). So the
folder is named by a digest of every kernel source: any change to any kernel gives a fresh folder, and code
compiled from one version of the kernels is never run with another. Folders of other digests that have not
been written to for a day are removed (only folders of this module's own naming, in its own places).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

#: the kernels' folder: the top-level kernels/ of a checkout, gpu_tigrag/kernels/ of an install
KERNELS = Path(__file__).resolve().parent / "kernels"
if not KERNELS.is_dir():
    KERNELS = Path(__file__).resolve().parent.parent / "kernels"

#: set beside NUMBA_CACHE_DIR when this module chose it, so a child process (of another checkout, say) knows
#: the folder is not the user's and chooses its own
CHOSEN_ENV = "TIGRAG_NUMBA_CACHE_DIR"
#: a cache folder of this module's naming: "numba-" and 16 hex digits of the digest
_FOLDER = re.compile(r"numba-[0-9a-f]{16}")
#: folders of other digests untouched this long are removed
STALE_SECONDS = 24 * 3600


def kernels_digest(package: Path = KERNELS) -> str:
    """16 hex digits of the SHA-256 of the kernel sources (names and contents, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _writable(folder: Path) -> bool:
    """Whether `folder` can be written, or created in the nearest parent that exists."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK)


def _private(folder: Path) -> bool:
    """Whether `folder` is a real folder (not a link) of this user that no one else may write or read: in the
    shared temporary directory anyone may make one of that name first, plant machine code in it, or have
    `_remove_stale` delete in the folder it links to. Warned when it is not."""
    info = os.lstat(folder)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
        return True
    logging.getLogger(__name__).warning(
        "%s: not a private folder of this user (a link, another user's, or open to others); not used as the "
        "kernels' numba cache (remove it, or set NUMBA_CACHE_DIR)", folder)
    return False


def ensure_numba_cache(package: Path = KERNELS) -> str | None:
    """Point numba's cache at the folder of this version of the kernels (module doc) and return it; None when
    the user set NUMBA_CACHE_DIR (then the user's folder is used as it is).

    The folder lies beside the kernels (`__pycache__`), else in the user's cache folder, else (a read-only
    install and home) in a private folder of the temporary directory, used only when it is this user's alone
    (`_private`); else there is none."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen and chosen != os.environ.get(CHOSEN_ENV):
        return None
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu_tigrag" / "numba"
    private = Path(tempfile.gettempdir()) / f"gpu_tigrag-numba-{os.getuid()}"
    name = f"numba-{kernels_digest(package)}"
    for base in [b for b in (package / "__pycache__", user) if _writable(b)] + [private]:
        try:
            if base == private:
                base.mkdir(mode=0o700, exist_ok=True)
                if not _private(base):
                    continue
            (base / name).mkdir(parents=True, exist_ok=True)
            break
        except OSError:  # something else of that name is in the way (a file, say): the next place
            continue
    else:
        return None  # no place at all: numba's own (it then compiles without caching where it cannot write)
    folder = base / name
    os.environ["NUMBA_CACHE_DIR"] = os.environ[CHOSEN_ENV] = str(folder)
    try:
        import numba.core.config

        numba.core.config.CACHE_DIR = str(folder)  # numba read the environment when it was imported
    except ImportError:
        pass
    _remove_stale(base, folder)
    return str(folder)


def _remove_stale(base: Path, keep: Path) -> None:
    """Remove the folders of other kernel versions in `base` that nothing wrote to for STALE_SECONDS."""
    now = time.time()
    try:
        entries = list(base.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry == keep or not _FOLDER.fullmatch(entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            newest = max([entry.stat().st_mtime] + [p.stat().st_mtime for p in entry.rglob("*")])
        except OSError:
            continue
        if now - newest > STALE_SECONDS:
            shutil.rmtree(entry, ignore_errors=True)


ensure_numba_cache()
