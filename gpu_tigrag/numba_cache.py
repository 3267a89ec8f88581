"""A numba cache folder the kernels (`cache=True`) can write, chosen before the first of them compiles:
every kernel module imports this module first (`from .. import numba_cache`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: the kernels' folder: the top-level kernels/ of a checkout, gpu_tigrag/kernels/ of an install
KERNELS = Path(__file__).resolve().parent / "kernels"
if not KERNELS.is_dir():
    KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def ensure_numba_cache(package: Path = KERNELS) -> str | None:
    """Give numba a cache folder it can write, before the kernels (`cache=True`) are compiled.

    numba caches beside the module (`__pycache__`), else in the user's cache folder; where neither is
    writable (a read-only install and home), it refuses to compile at all. Then this points
    NUMBA_CACHE_DIR at a private folder in the temporary directory. Returns the folder it chose, or
    None when numba's own places (or a NUMBA_CACHE_DIR already set) will do."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    beside = package / "__pycache__"
    if os.access(beside if beside.is_dir() else package, os.W_OK):
        return None
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    if os.access(user if user.is_dir() else user.parent, os.W_OK):
        return None
    folder = Path(tempfile.gettempdir()) / f"gpu_tigrag-numba-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    try:
        import numba.core.config

        numba.core.config.CACHE_DIR = str(folder)  # numba read the environment when it was imported
    except ImportError:
        pass
    return str(folder)


ensure_numba_cache()
