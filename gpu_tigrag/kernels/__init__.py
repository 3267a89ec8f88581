"""Numba kernels: each has a `numba.njit` CPU twin and a `numba.cuda` kernel with the same contract.

The CUDA kernels are compiled only when first launched, so importing this package never
needs a GPU; under NUMBA_ENABLE_CUDASIM=1 they run on the CPU simulator for tests.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def ensure_numba_cache(package: Path = Path(__file__).resolve().parent) -> str | None:
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
