"""BM25 of given (chunk, query) pairs, without a chunks × queries block.

    out[p] = Σ over the tokens t of chunk rows[p] that query cols[p] holds, in ascending token order,
             of float32(weight[rows[p], t] · count[cols[p], t]), added in float32

`weight` is the chunks × tokens BM25 matrix (CSR, indices ascending per row) and `count` the queries ×
tokens counts (`ops.fusion.query_term_rows`: CSR, indices ascending). SciPy's product of the two matrices
(`ops.fusion.bm25_scores`) adds a chunk's terms in the same order with the same float32 operations, so a
pair's BM25 here is that block's entry bit for bit, and it does not depend on the other pairs. Each pair
walks its chunk's row and its query's tokens together (a merge of two sorted lists).

CPU twin: a loop over the pairs on every thread; GPU kernel: one thread per pair.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .lazy_cuda import cuda


def _pair_bm25(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, chunk, query):
    """One pair's BM25 (module doc): compiled for the CPU twin and, as a device function, for the GPU kernel."""
    total = np.float32(0.0)
    a, a_end = w_indptr[chunk], w_indptr[chunk + 1]
    b, b_end = q_indptr[query], q_indptr[query + 1]
    while a < a_end and b < b_end:
        ta, tb = w_indices[a], q_indices[b]
        if ta == tb:
            total += np.float32(np.float32(w_data[a]) * np.float32(q_data[b]))
            a += 1
            b += 1
        elif ta < tb:
            a += 1
        else:
            b += 1
    return total


_pair_bm25_host = njit(inline="always")(_pair_bm25)
_pair_bm25_device = cuda.jit(device=True, inline=True)(_pair_bm25)


@njit(parallel=True, cache=True)
def bm25_pairs_cpu(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, rows, cols, out):
    """out[p] = BM25 of chunk rows[p] for query cols[p] (module doc)."""
    for p in prange(rows.shape[0]):
        out[p] = _pair_bm25_host(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, rows[p], cols[p])


@cuda.jit
def _bm25_pairs_kernel(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, rows, cols, out):
    """Thread p: out[p] (the CPU twin's contract)."""
    p = cuda.grid(1)
    if p >= rows.shape[0]:
        return
    out[p] = _pair_bm25_device(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, rows[p], cols[p])


def bm25_pairs_cuda(w_indptr, w_indices, w_data, q_indptr, q_indices, q_data, rows, cols, out,
                    threads: int = 128) -> None:
    """Launch the GPU kernel (same contract as `bm25_pairs_cpu`)."""
    n = out.shape[0]
    if n == 0:
        return
    _bm25_pairs_kernel[(n + threads - 1) // threads, threads](w_indptr, w_indices, w_data, q_indptr, q_indices,
                                                              q_data, rows, cols, out)


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i32, i64 = types.float32, types.int32, types.int64
    return [(_bm25_pairs_kernel, (i32[::1], i32[::1], f32[::1], i32[::1], i32[::1], f32[::1], i64[::1], i64[::1],
                                  f32[::1]))]
