"""Windowed co-occurrence pair emission (section 3.3).

Each sliding window of `w` consecutive valid tokens of a chunk gets a fixed block of
w(w-1)/2 output slots. The kernel writes one packed key lo * n_vocab + hi (lo < hi) for
every distinct token pair in the window, and -1 in unused slots (repeated pairs in the
same window, pairs of a token with itself). Counting the keys afterwards gives the
cumulative number of windows in which each pair co-occurs. Fixed slots make every window
independent: one loop iteration (CPU) or one thread (GPU) per window, no atomics.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .lazy_cuda import cuda


def slots_per_window(window: int) -> int:
    return window * (window - 1) // 2


def window_bounds(indptr, window: int, xp=np):
    """Start and end token offsets of every sliding window of every chunk (arrays of `xp`).

    A chunk of L >= w tokens has L - w + 1 windows; one of 2 <= L < w tokens has a single
    window holding all of them; chunks with fewer than 2 tokens have none.
    """
    indptr = indptr.astype(xp.int64)
    lengths = xp.diff(indptr)
    n_windows = xp.where(lengths >= window, lengths - window + 1, xp.where(lengths >= 2, 1, 0))
    first = xp.zeros(lengths.size + 1, dtype=xp.int64)
    first[1:] = xp.cumsum(n_windows)
    # owner chunk of each window (a repeat by counts; CuPy's repeat takes host counts only)
    owner = xp.searchsorted(first[1:], xp.arange(int(first[-1]), dtype=xp.int64), side="right")
    starts = indptr[:-1][owner] + (xp.arange(owner.size, dtype=xp.int64) - first[owner])
    ends = xp.minimum(starts + window, indptr[1:][owner])
    return starts, ends


@njit(inline="always")
def _emit_window(ids, start, end, n_vocab, out, base):
    n = 0
    for a in range(start, end):
        for b in range(a + 1, end):
            x = np.int64(ids[a])
            y = np.int64(ids[b])
            if x == y:
                continue
            key = min(x, y) * n_vocab + max(x, y)
            seen = False
            for k in range(n):
                if out[base + k] == key:
                    seen = True
                    break
            if not seen:
                out[base + n] = key
                n += 1


@njit(parallel=True, cache=True)
def emit_pairs_cpu(ids, starts, ends, n_vocab, window, out):
    """CPU twin: fills `out` (len(starts) * slots, pre-set to -1) with window pair keys."""
    slots = window * (window - 1) // 2
    for i in prange(starts.size):
        _emit_window(ids, starts[i], ends[i], np.int64(n_vocab), out, i * slots)


@cuda.jit
def _emit_pairs_kernel(ids, starts, ends, n_vocab, window, out):
    """GPU kernel: one thread per window, same slots and keys as `emit_pairs_cpu`."""
    i = cuda.grid(1)
    if i >= starts.size:
        return
    slots = window * (window - 1) // 2
    base = i * slots
    n = 0
    for a in range(starts[i], ends[i]):
        for b in range(a + 1, ends[i]):
            x = np.int64(ids[a])
            y = np.int64(ids[b])
            if x == y:
                continue
            lo = x if x < y else y
            hi = y if x < y else x
            key = lo * n_vocab + hi
            seen = False
            for k in range(n):
                if out[base + k] == key:
                    seen = True
            if not seen:
                out[base + n] = key
                n += 1


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    return [(_emit_pairs_kernel, (types.int32[::1], types.int64[::1], types.int64[::1], types.int64, types.int64,
                                  types.int64[::1]))]


def emit_pairs_cuda(ids, starts, ends, n_vocab: int, window: int, out, threads: int = 256) -> None:
    """GPU kernel launch: same contract as `emit_pairs_cpu`, arrays on the device (CuPy or numba)."""
    n = int(starts.shape[0])
    if n == 0:
        return
    blocks = (n + threads - 1) // threads
    _emit_pairs_kernel[blocks, threads](ids, starts, ends, np.int64(n_vocab), np.int64(window), out)
