"""One fused Personalized PageRank sweep for B queries at once (section 3.4).

    out[i, b] = d · Σ_j P[i, j] · x[j, b] + v[i, b] · coef[b]
    delta[b]  = Σ_i |out[i, b] − x[i, b]|

with coef[b] = d · (mass of column b on dangling nodes) + (1 − d). Fusing the sparse
product, the restart term and the convergence test reads x and writes out once per sweep
(SciPy would need three passes and one thread). P is CSR (row i lists the in-edges of i,
the matrix being symmetric in pattern); x, v, out are C-ordered vocab × B float32.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, njit, prange

ROW_BLOCKS = 256


@njit(parallel=True, fastmath=True, cache=True)
def ppr_sweep_cpu(indptr, indices, data, x, v, coef, damping, out, delta):
    """CPU twin: rows split into blocks over threads; per-block partial deltas, then summed."""
    n, width = x.shape
    blocks = min(ROW_BLOCKS, max(n, 1))
    per_block = (n + blocks - 1) // blocks
    partial = np.zeros((blocks, width), dtype=np.float32)
    for blk in prange(blocks):
        acc = np.empty(width, dtype=np.float32)
        for i in range(blk * per_block, min(n, (blk + 1) * per_block)):
            acc[:] = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                w = data[p]
                for b in range(width):
                    acc[b] += w * x[j, b]
            for b in range(width):
                value = damping * acc[b] + v[i, b] * coef[b]
                partial[blk, b] += abs(value - x[i, b])
                out[i, b] = value
    for b in range(width):
        total = np.float32(0.0)
        for blk in range(blocks):
            total += partial[blk, b]
        delta[b] = total


@cuda.jit
def _ppr_sweep_kernel(indptr, indices, data, x, v, coef, damping, out, delta):
    """GPU kernel: one thread per (row, query); neighbouring threads read neighbouring columns."""
    b, i = cuda.grid(2)
    if i >= x.shape[0] or b >= x.shape[1]:
        return
    acc = np.float32(0.0)
    for p in range(indptr[i], indptr[i + 1]):
        acc += data[p] * x[indices[p], b]
    value = damping * acc + v[i, b] * coef[b]
    out[i, b] = value
    cuda.atomic.add(delta, b, abs(value - x[i, b]))


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i32 = types.float32, types.int32
    return [(_ppr_sweep_kernel, (i32[::1], i32[::1], f32[::1], f32[:, ::1], f32[:, ::1], f32[::1], f32,
                                 f32[:, ::1], f32[::1]))]


def ppr_sweep_cuda(indptr, indices, data, x, v, coef, damping, out, delta, threads=(32, 8)) -> None:
    """Launch the GPU sweep; `delta` must be zeroed by the caller (it is accumulated atomically)."""
    n, width = x.shape
    if n == 0 or width == 0:
        return
    grid = ((width + threads[0] - 1) // threads[0], (n + threads[1] - 1) // threads[1])
    _ppr_sweep_kernel[grid, threads](indptr, indices, data, x, v, coef, np.float32(damping), out, delta)
