"""Array namespaces: NumPy + scipy.sparse on CPU, CuPy + cupyx.scipy.sparse on GPU.

Algorithms take a `Backend` and use `be.xp` / `be.sparse`; nothing else in the package
imports CuPy, and CuPy is imported only when a GPU backend is asked for. The backend is also
the one place where arrays move between host and device (`asarray`, `to_host`, `csr`) and
where a kernel's CPU or CUDA implementation is chosen (`kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from .errors import BackendUnavailableError

BACKEND_NAMES = ("auto", "numpy", "cupy")
K = TypeVar("K")


@dataclass(frozen=True)
class Backend:
    name: str
    xp: ModuleType
    sparse: ModuleType

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    @property
    def sync_interval(self) -> int:
        """Iterations between host reads of a device-side stopping test: every one on the CPU, where
        reading costs nothing; every fourth on a GPU, where each read waits for the device."""
        return 4 if self.is_gpu else 1

    def asarray(self, array: Any, dtype: Any = None) -> Any:
        """Move a host (or device) array onto this backend."""
        return self.xp.asarray(array, dtype=dtype)

    def to_host(self, array: Any) -> Any:
        """A host copy of a backend array (NumPy) or sparse matrix (SciPy); no copy on CPU."""
        if self.sparse.issparse(array):
            return array.get() if self.is_gpu else array
        if self.is_gpu:
            return self.xp.asnumpy(array)  # accepts host arrays too
        return np.asarray(array)

    @property
    def out_of_memory_errors(self) -> tuple[type[BaseException], ...]:
        """Exceptions that mean an allocation failed (a smaller batch may still fit)."""
        if self.is_gpu:
            import cupy

            return (MemoryError, cupy.cuda.memory.OutOfMemoryError)
        return (MemoryError,)

    def free_memory_bytes(self) -> int | None:
        """Free device memory (GPU), or None on CPU where the configured budget rules."""
        if not self.is_gpu:
            return None
        free, _total = self.xp.cuda.Device().mem_info
        return int(free + self.xp.get_default_memory_pool().free_bytes())  # pooled blocks are free to reuse

    def release_cached_memory(self) -> None:
        """Return pooled device blocks after an out-of-memory error (no-op on CPU)."""
        if self.is_gpu:
            self.xp.get_default_memory_pool().free_all_blocks()

    def argsort_stable(self, array: Any, axis: int = -1) -> Any:
        """Stable argsort (CuPy's argsort is always stable and takes no `kind`)."""
        if self.is_gpu:
            return self.xp.argsort(array, axis=axis)
        return np.argsort(array, axis=axis, kind="stable")

    def kernel(self, cpu: K, cuda: K) -> K:
        """The implementation of a kernel for this backend's device: the one place where the engine
        chooses between a CPU (numba) and a CUDA implementation of the same contract."""
        return cuda if self.is_gpu else cpu

    def csr(self, matrix: Any) -> Any:
        """A host scipy CSR matrix moved onto this backend (cupyx holds float and bool data only)."""
        if self.is_gpu:
            if matrix.dtype.char not in "?fdFD":
                matrix = matrix.astype(np.float32)
            return self.sparse.csr_matrix(matrix)
        return matrix.tocsr()


def expand_counts(xp: ModuleType, counts: Any) -> Any:
    """`repeat(arange(len(counts)), counts)` for NumPy and CuPy alike (CuPy's repeat wants host counts)."""
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if counts.size else 0
    return xp.searchsorted(ends, xp.arange(total), side="right")


def row_entries(xp: ModuleType, indptr: Any, rows: Any) -> tuple[Any, Any]:
    """(owner, position) of every entry of the CSR rows `rows` (int64 ids, repeats allowed), row after row:
    owner[i] is the index into `rows` of entry i, position[i] its index in the matrix's indices and data."""
    indptr = indptr.astype(xp.int64)
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    owner = expand_counts(xp, lengths)
    first = xp.cumsum(lengths) - lengths
    return owner, starts[owner] + (xp.arange(owner.size, dtype=xp.int64) - first[owner])


def _numpy_backend() -> Backend:
    import scipy.sparse

    return Backend("numpy", np, scipy.sparse)


def _cupy_backend() -> Backend:
    try:
        import cupy
        import cupyx.scipy.sparse
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise BackendUnavailableError(
            "backend 'cupy' needs CuPy (pip install cupy-cuda13x) and an NVIDIA GPU"
        ) from exc
    if not cupy.cuda.is_available():  # pragma: no cover - depends on the machine
        raise BackendUnavailableError("backend 'cupy' was requested but no CUDA device is available")
    return Backend("cupy", cupy, cupyx.scipy.sparse)


def cuda_available() -> bool:
    """True when CuPy imports and sees a CUDA device."""
    try:
        import cupy
    except ImportError:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:  # pragma: no cover - driver errors
        return False


def get_backend(name: str = "auto") -> Backend:
    """`numpy`, `cupy`, or `auto` (CuPy when a CUDA device is present, else NumPy). The first call
    applies the process's thread policy (gpu_tigrag.threads), so API retrievers get it as the CLI does."""
    if name not in BACKEND_NAMES:
        raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")
    from .threads import apply_thread_policy

    apply_thread_policy()  # the host pools' sizes, once per process (a no-op once the CLI or a worker set them)
    if name == "numpy":
        return _numpy_backend()
    if name == "cupy":
        return _cupy_backend()
    return _cupy_backend() if cuda_available() else _numpy_backend()
