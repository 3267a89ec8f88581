"""The best of each query's own columns, on its pooled rows: the reduction of the max-cosine rerank
(gpu_tigrag/methods/tigrag/rerank.py, eq. 3.15).

    out[i, q] = max over r < counts[q] of sims[i, starts[q] + r]   where pool[i, q]
              = −inf                                                elsewhere (and where counts[q] is 0)

`sims` is the chunks × M product of the chunk vectors with every query's expanded-query vectors, a query's
vectors in consecutive columns. A maximum is exact, so `out` is the same bits as any other order of the same
comparisons (the per-rank column gathers and scatters it replaces: about half a second of a 2Wiki `best`
evaluation, chunks × B arrays read and written once per rank). CPU: a thread per row of chunks, reading the
row once; GPU: a thread per entry.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .lazy_cuda import cuda


@njit(parallel=True, cache=True)
def owner_max_cpu(sims, starts, counts, pool, out):
    """Fill `out` (n × B float32) from `sims` (n × M float32), `starts`/`counts` (B int64) and `pool` (n × B bool)."""
    n, width = out.shape
    for i in prange(n):
        row = sims[i]
        for q in range(width):
            best = np.float32(-np.inf)
            if pool[i, q]:
                start = starts[q]
                for r in range(counts[q]):
                    if row[start + r] > best:
                        best = row[start + r]
            out[i, q] = best


@cuda.jit
def _owner_max_kernel(sims, starts, counts, pool, out):
    """Thread (q, i): out[i, q] (the CPU twin's contract)."""
    q, i = cuda.grid(2)
    if i >= out.shape[0] or q >= out.shape[1]:
        return
    best = np.float32(-np.inf)
    if pool[i, q]:
        start = starts[q]
        for r in range(counts[q]):
            value = sims[i, start + r]
            if value > best:
                best = value
    out[i, q] = best


def owner_max_cuda(sims, starts, counts, pool, out, threads: tuple[int, int] = (32, 8)) -> None:
    """Launch the GPU kernel (same contract as `owner_max_cpu`)."""
    n, width = out.shape
    if n == 0 or width == 0:
        return
    grid = ((width + threads[0] - 1) // threads[0], (n + threads[1] - 1) // threads[1])
    _owner_max_kernel[grid, threads](sims, starts, counts, pool, out)


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i64 = types.float32, types.int64
    return [(_owner_max_kernel, (f32[:, ::1], i64[::1], i64[::1], types.boolean[:, ::1], f32[:, ::1]))]
