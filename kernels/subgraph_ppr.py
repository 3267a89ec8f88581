"""One fused sweep of Personalized PageRank on each query's induced subgraph, B queries at once
(SpectRAG's proximity term; the masked variant of kernels/ppr.py).

Query b is restricted to its candidate set M_b, given as a list of (query, row) pairs grouped by
query: rows pair_rows[col_start[b]:col_start[b + 1]]. The arrays are query-major, B × n
(C-ordered float32), so one query's values are contiguous. With deg[b, j] = Σ_{k ∈ M_b} W[j, k]
the weighted degree of j inside M_b and inv_deg = 1/deg on members with deg > 0 (0 elsewhere:
non-members and the subgraph's dangling nodes), the sweep computes, for every pair (b, i):

    out[b, i] = d · Σ_j W[i, j] · x[b, j] · inv_deg[b, j] + v[b, i] · coef[b]
    delta[b]  = Σ_{i ∈ M_b} |out[b, i] − x[b, i]|
    dmass[b]  = Σ_{i ∈ M_b, inv_deg[b, i] = 0} out[b, i]      (mass on the subgraph's dangling nodes)

i.e. X ← d·[(W @ (X ⊘ deg)) ⊙ M + V·m(X)] + (1 − d)·V restricted to the pairs (entries outside M
are never written and stay 0, and x is 0 there, so non-members contribute nothing), with
coef[b] = d · m(x)[b] + (1 − d): the next sweep's coefficient comes from this sweep's `dmass`,
so the block is read once per sweep. Only the masked entries are computed, so a sweep costs the
candidates' edges, not the graph's. A query with active[b] = 0 has converged: its entries are
copied unchanged (delta 0), so each query stops at its own tolerance.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, njit, prange


@njit(fastmath=True, cache=True)
def _sweep_query(b, indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out, delta,
                 dmass):
    """Query b's pairs in order (deterministic sums)."""
    total = np.float32(0.0)
    mass = np.float32(0.0)
    for p in range(col_start[b], col_start[b + 1]):
        i = pair_rows[p]
        old = x[b, i]
        if active[b] == 0:
            value = old
        else:
            acc = np.float32(0.0)
            for q in range(indptr[i], indptr[i + 1]):
                j = indices[q]
                acc += data[q] * (x[b, j] * inv_deg[b, j])
            value = damping * acc + v[b, i] * coef[b]
            total += abs(value - old)
        out[b, i] = value
        if inv_deg[b, i] == 0.0:
            mass += value
    delta[b] = total
    dmass[b] = mass


@njit(parallel=True, fastmath=True, cache=True)
def subgraph_ppr_sweep_cpu(indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out,
                           delta, dmass):
    """CPU twin: queries in parallel over threads."""
    for b in prange(col_start.shape[0] - 1):
        _sweep_query(b, indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out, delta,
                     dmass)


@njit(fastmath=True, cache=True)
def subgraph_ppr_sweep_serial(indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out,
                              delta, dmass):
    """The CPU twin on one thread, for small blocks: a parallel launch costs more than their sweep
    (milliseconds when the cores are busy with other work)."""
    for b in range(col_start.shape[0] - 1):
        _sweep_query(b, indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out, delta,
                     dmass)


#: threads per block of the GPU sweep (one block per query); fixed at compile time (sizes the reduction)
THREADS = 128


@cuda.jit
def _subgraph_sweep_kernel(indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out,
                           delta, dmass):
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
            i = pair_rows[p]
            old = x[b, i]
            value = old
            if on:
                acc = np.float32(0.0)
                for q in range(indptr[i], indptr[i + 1]):
                    j = indices[q]
                    acc += data[q] * (x[b, j] * inv_deg[b, j])
                value = damping * acc + v[b, i] * coefficient
                local += abs(value - old)
            out[b, i] = value
            if inv_deg[b, i] == 0.0:
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

    f32, i32, i64, u8 = types.float32, types.int32, types.int64, types.uint8
    return [(_subgraph_sweep_kernel, (i32[::1], i32[::1], f32[::1], i64[::1], i64[::1], f32[:, ::1], f32[:, ::1],
                                      f32[:, ::1], f32[::1], u8[::1], f32, f32[:, ::1], f32[::1], f32[::1]))]


def subgraph_ppr_sweep_cuda(indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active, damping, out,
                            delta, dmass) -> None:
    """Launch the GPU sweep, one block per query; writes `out` on the pairs, `delta` and `dmass`
    (same contract as `subgraph_ppr_sweep_cpu`)."""
    width = col_start.shape[0] - 1
    if width == 0:
        return
    _subgraph_sweep_kernel[width, THREADS](indptr, indices, data, col_start, pair_rows, x, inv_deg, v, coef, active,
                                           np.float32(damping), out, delta, dmass)
