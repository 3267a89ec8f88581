"""One fused sweep of Personalized PageRank on each query's induced subgraph, B queries at once
(SpectRAG's proximity term; the masked variant of kernels/ppr.py).

The masked product X ← d·[(W @ (X ⊘ deg)) ⊙ M + V·m(X)] + (1 − d)·V is computed only where the
candidate mask M is set. Its entries are the (query, candidate) pairs, grouped by query (query b
owns pairs col_start[b]:col_start[b + 1]), and the induced subgraphs form one block-diagonal CSR
over the pairs: row p lists the pairs q of the same query whose chunks are W-neighbours of p's
chunk, with prob[q] = W[i, j] / deg_b(j), deg_b(j) the weighted degree of j inside M_b. Then

    out[p]   = d · Σ_q prob[q] · x[q] + v[p] · coef[b]          for every pair p of query b
    delta[b] = Σ_{p ∈ b} |out[p] − x[p]|
    dmass[b] = Σ_{p ∈ b, dangling[p]} out[p]                     (mass on the subgraph's dangling nodes)

with coef[b] = d · (dangling mass of x) + (1 − d): the next sweep's coefficient comes from this
sweep's `dmass`, so the block is read once per sweep. A sweep costs the candidates' internal
edges only, and the iterate is one value per pair, not a chunks × B block. A query with
active[b] = 0 has converged: its values are copied unchanged (delta 0), so each query stops at
its own tolerance.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .lazy_cuda import cuda


@njit(fastmath=True, cache=True)
def _sweep_query(b, indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta, dmass):
    """Query b's pairs in order (deterministic sums)."""
    total = np.float32(0.0)
    mass = np.float32(0.0)
    for p in range(col_start[b], col_start[b + 1]):
        old = x[p]
        if active[b] == 0:
            value = old
        else:
            acc = np.float32(0.0)
            for q in range(indptr[p], indptr[p + 1]):
                acc += prob[q] * x[indices[q]]
            value = damping * acc + v[p] * coef[b]
            total += abs(value - old)
        out[p] = value
        if dangling[p] != 0:
            mass += value
    delta[b] = total
    dmass[b] = mass


@njit(parallel=True, fastmath=True, cache=True)
def subgraph_ppr_sweep_cpu(indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta, dmass):
    """CPU twin: queries in parallel over threads."""
    for b in prange(col_start.shape[0] - 1):
        _sweep_query(b, indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta, dmass)


@njit(fastmath=True, cache=True)
def subgraph_ppr_sweep_serial(indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta,
                              dmass):
    """The CPU twin on one thread, for small blocks: a parallel launch costs more than their sweep
    (milliseconds when the cores are busy with other work)."""
    for b in range(col_start.shape[0] - 1):
        _sweep_query(b, indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta, dmass)


#: threads per block of the GPU sweep (one block per query); fixed at compile time (sizes the reduction)
THREADS = 128


@cuda.jit
def _subgraph_sweep_kernel(indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta, dmass):
    """Block b handles query b; thread t its pairs t, t + THREADS, ... Per-thread sums are reduced
    in shared memory in a fixed order (no atomics): the same sweep count on every run."""
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    change = cuda.shared.array(THREADS, dtype=np.float32)
    mass = cuda.shared.array(THREADS, dtype=np.float32)
    local = np.float32(0.0)
    local_mass = np.float32(0.0)
    width = col_start.shape[0] - 1
    if b < width:
        on = active[b] != 0
        coefficient = coef[b]
        for p in range(col_start[b] + t, col_start[b + 1], THREADS):
            old = x[p]
            value = old
            if on:
                acc = np.float32(0.0)
                for q in range(indptr[p], indptr[p + 1]):
                    acc += prob[q] * x[indices[q]]
                value = damping * acc + v[p] * coefficient
                local += abs(value - old)
            out[p] = value
            if dangling[p] != 0:
                local_mass += value
    change[t] = local
    mass[t] = local_mass
    cuda.syncthreads()
    if t == 0 and b < width:
        total = np.float32(0.0)
        total_mass = np.float32(0.0)
        for r in range(THREADS):
            total += change[r]
            total_mass += mass[r]
        delta[b] = total
        dmass[b] = total_mass


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i64, u8 = types.float32, types.int64, types.uint8
    return [(_subgraph_sweep_kernel, (i64[::1], i64[::1], f32[::1], i64[::1], u8[::1], f32[::1], f32[::1], f32[::1],
                                      u8[::1], f32, f32[::1], f32[::1], f32[::1]))]


def subgraph_ppr_sweep_cuda(indptr, indices, prob, col_start, dangling, x, v, coef, active, damping, out, delta,
                            dmass) -> None:
    """Launch the GPU sweep, one block per query; writes `out`, `delta` and `dmass` (same contract
    as `subgraph_ppr_sweep_cpu`)."""
    width = col_start.shape[0] - 1
    if width == 0:
        return
    _subgraph_sweep_kernel[width, THREADS](indptr, indices, prob, col_start, dangling, x, v, coef, active,
                                           np.float32(damping), out, delta, dmass)
