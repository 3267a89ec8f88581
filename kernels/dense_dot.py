"""Dot products of chunk vectors with query vectors whose bits do not depend on the batch.

    out[i, b] = Σ_k rows[i, k] · vectors_t[k, b]      (float32, terms added in k order)

A BLAS sgemm picks its blocking, kernels and thread split from the matrix shapes, so the same
query's cosines change in the last bits with the number of queries beside it or the rows sliced
(OpenBLAS on an AVX2 EPYC: every batch size and every row slice differed), and near-ties then rank
differently in a batch, a resumed run or another method's path. Here every entry is one fixed
sequence of float32 multiplies and adds over k (no fused multiply-add, no reordering: numba's
default IEEE semantics), the same in any batch, on any row slice and on any thread.

CPU twin: for NARROW_WIDTH queries or more, a thread takes 4 rows at a time and streams each
query-vector row once for all 4 (the accumulators a row of `out`, vectorised over the queries);
about 2-3× the time of sgemm, which is milliseconds beside the encoder. For fewer queries (one
question per call) that loop is too short to vectorise and its accumulators go through memory, so a
thread keeps 4 rows' sums of one query in registers instead: 3× faster for one query (2Wiki's 7,870
× 384 vectors: 1.45 → 0.47 ms), the same bits (each sum still in k order). Where the caller holds the
rows in transposed tiles (`tiled_dot_cpu`: tiles × dim × TILE, a copy made once per index), a thread
takes a tile and, for each k, adds one contiguous row of TILE values times each query's k-th value to
TILE accumulators: the sums vectorise over rows (each still added in k order: the same bits again), and
one question costs 0.29 ms instead of 0.79 on 2Wiki's vectors (faiss IndexFlatIP: 0.52 ms with its
top-k; bench/results/first_stage.md). GPU kernel: one thread per entry.

`gather_max_dot_*` is the sparse mode's product: for each (chunk, query) entry of a pool, the best dot of
the chunk's row with its query's vectors (rows gathered by id, no chunks × B block), each dot added in k
order as above, so a sparse-mode cosine has the dense mode's bits. CPU: one entry per loop turn over
all threads; GPU: one thread per entry.

`best_dot_per_slot_*` picks, for each slot (a query-side vector and a list of candidate rows of a table), the
candidate of highest dot product with the slot's vector, equal dots to the lower row id: what scoring every
(vector, candidate) pair and sorting them gives, without the pairs' gathered rows or a sort (LiteSemRAG's
span-to-prototype matching). Each dot is added in k order as above. CPU: one slot per loop turn over all threads;
GPU: one thread per slot.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .lazy_cuda import cuda

#: rows a CPU thread updates together (each query-vector row is read once for them)
ROWS = 4
#: below this many queries the per-query kernel runs (module doc; measured 1-8 queries on 2Wiki's vectors)
NARROW_WIDTH = 8
#: rows of a transposed tile (`tiled_dot_cpu`): 1 KB of float32 per k, the accumulators of a query in L1
TILE = 256
#: up to this many queries the tiled kernel runs where tiles exist (faster than the others from 1 to 16
#: queries on 2Wiki's vectors, even at 32, slower from 64)
TILED_MAX_WIDTH = 16
#: from this many rows on (a smaller corpus is answered in microseconds by the other kernels, without a copy)
TILED_MIN_ROWS = 4096


def query_dot_cpu(rows, vectors_t, out) -> None:
    """out[i, b] = Σ_k rows[i, k] · vectors_t[k, b], in k order (rows: n × d, vectors_t: d × B, out: n × B)."""
    (narrow_dot_cpu if vectors_t.shape[1] < NARROW_WIDTH else wide_dot_cpu)(rows, vectors_t, out)


@njit(parallel=True, cache=True)
def narrow_dot_cpu(rows, vectors_t, out):
    """`query_dot_cpu` for a few queries: per query, 4 rows' sums held in registers over k."""
    n, dim = rows.shape
    width = vectors_t.shape[1]
    for block in prange((n + ROWS - 1) // ROWS):
        i0 = block * ROWS
        if i0 + ROWS <= n:
            for b in range(width):
                a0 = np.float32(0.0)
                a1 = np.float32(0.0)
                a2 = np.float32(0.0)
                a3 = np.float32(0.0)
                for k in range(dim):
                    v = np.float32(vectors_t[k, b])
                    a0 += np.float32(rows[i0, k]) * v
                    a1 += np.float32(rows[i0 + 1, k]) * v
                    a2 += np.float32(rows[i0 + 2, k]) * v
                    a3 += np.float32(rows[i0 + 3, k]) * v
                out[i0, b] = a0
                out[i0 + 1, b] = a1
                out[i0 + 2, b] = a2
                out[i0 + 3, b] = a3
        else:
            for i in range(i0, n):
                for b in range(width):
                    total = np.float32(0.0)
                    for k in range(dim):
                        total += np.float32(rows[i, k]) * np.float32(vectors_t[k, b])
                    out[i, b] = total


@njit(parallel=True, cache=True)
def wide_dot_cpu(rows, vectors_t, out):
    """`query_dot_cpu` for many queries: 4 rows at a time, vectorised over the queries."""
    n, dim = rows.shape
    width = vectors_t.shape[1]
    for block in prange((n + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(n, i0 + ROWS)
        for i in range(i0, i1):
            for b in range(width):
                out[i, b] = 0.0
        if i1 - i0 == ROWS:
            for k in range(dim):
                e0 = np.float32(rows[i0, k])
                e1 = np.float32(rows[i0 + 1, k])
                e2 = np.float32(rows[i0 + 2, k])
                e3 = np.float32(rows[i0 + 3, k])
                for b in range(width):
                    v = np.float32(vectors_t[k, b])
                    out[i0, b] += e0 * v
                    out[i0 + 1, b] += e1 * v
                    out[i0 + 2, b] += e2 * v
                    out[i0 + 3, b] += e3 * v
        else:
            for i in range(i0, i1):
                for k in range(dim):
                    e = np.float32(rows[i, k])
                    for b in range(width):
                        out[i, b] += e * np.float32(vectors_t[k, b])


@njit(parallel=True, cache=True)
def tiled_dot_cpu(tiles, n, vectors_t, out):
    """out[i, b] = Σ_k rows[i, k] · vectors_t[k, b] in k order (`query_dot_cpu`'s bits) for the n rows held in
    `tiles` (tiles[t, k, r] = rows[t · TILE + r, k], zero past the last row: ops.dense_dot.RowTiles); a thread
    per tile, its TILE sums per query vectorised over rows."""
    n_tiles, dim, tile = tiles.shape
    width = vectors_t.shape[1]
    for t in prange(n_tiles):
        i0 = t * tile
        acc = np.zeros((width, tile), dtype=np.float32)
        for k in range(dim):
            values = tiles[t, k]
            for b in range(width):
                v = np.float32(vectors_t[k, b])
                sums = acc[b]
                for r in range(tile):
                    sums[r] += np.float32(values[r]) * v
        for r in range(min(tile, n - i0)):
            for b in range(width):
                out[i0 + r, b] = acc[b, r]


@cuda.jit
def _query_dot_kernel(rows, vectors_t, out):
    """Thread (b, i): out[i, b], its terms added in k order."""
    b, i = cuda.grid(2)
    n, dim = rows.shape
    if i >= n or b >= vectors_t.shape[1]:
        return
    total = np.float32(0.0)
    for k in range(dim):
        total += np.float32(rows[i, k]) * np.float32(vectors_t[k, b])
    out[i, b] = total


@njit(parallel=True, cache=True)
def gather_max_dot_cpu(embeddings, vectors, chunks, first, counts, out):
    """out[i] = max over r < counts[i] of Σ_k embeddings[chunks[i], k] · vectors[first[i] + r, k] (k order);
    −inf where counts[i] is 0."""
    dim = embeddings.shape[1]
    for i in prange(chunks.shape[0]):
        c = chunks[i]
        best = np.float32(-np.inf)
        for r in range(counts[i]):
            v = first[i] + r
            total = np.float32(0.0)
            for k in range(dim):
                total += np.float32(embeddings[c, k]) * np.float32(vectors[v, k])
            if total > best:
                best = total
        out[i] = best


@cuda.jit(device=True, inline=True)
def _row_dot(a, i, b, j):
    """Σ_k a[i, k] · b[j, k] on the GPU, each term a float32 multiply then add, in k order."""
    total = np.float32(0.0)
    for k in range(a.shape[1]):
        total += np.float32(a[i, k]) * np.float32(b[j, k])
    return total


@cuda.jit
def _gather_max_dot_kernel(embeddings, vectors, chunks, first, counts, out):
    """Thread i: out[i] (the CPU twin's contract)."""
    i = cuda.grid(1)
    if i >= chunks.shape[0]:
        return
    c = chunks[i]
    best = np.float32(-np.inf)
    for r in range(counts[i]):
        total = _row_dot(embeddings, c, vectors, first[i] + r)
        if total > best:
            best = total
    out[i] = best


def gather_max_dot_cuda(embeddings, vectors, chunks, first, counts, out, threads: int = 128) -> None:
    """Launch the GPU kernel (same contract as `gather_max_dot_cpu`)."""
    n = out.shape[0]
    if n == 0:
        return
    _gather_max_dot_kernel[(n + threads - 1) // threads, threads](embeddings, vectors, chunks, first, counts, out)


@njit(parallel=True, cache=True)
def best_dot_per_slot_cpu(vectors, table, rows, ptr, ids, out):
    """out[s] = the id among ids[ptr[s]:ptr[s + 1]] of highest Σ_k vectors[rows[s], k] · table[id, k] (k order),
    equal sums to the lower id; -1 for a slot without candidates. Four candidates' sums at a time (each still
    added in k order), so one sum's additions do not wait on each other's latency alone."""
    dim = vectors.shape[1]
    for s in prange(rows.shape[0]):
        r = rows[s]
        best = np.float32(-np.inf)
        best_id = -1
        j = ptr[s]
        stop = ptr[s + 1]
        while j < stop:
            count = min(ROWS, stop - j)
            c0 = ids[j]
            c1 = ids[j + 1] if count > 1 else c0
            c2 = ids[j + 2] if count > 2 else c0
            c3 = ids[j + 3] if count > 3 else c0
            a0 = np.float32(0.0)
            a1 = np.float32(0.0)
            a2 = np.float32(0.0)
            a3 = np.float32(0.0)
            for k in range(dim):
                v = np.float32(vectors[r, k])
                a0 += v * np.float32(table[c0, k])
                a1 += v * np.float32(table[c1, k])
                a2 += v * np.float32(table[c2, k])
                a3 += v * np.float32(table[c3, k])
            for i in range(count):
                total = a0 if i == 0 else (a1 if i == 1 else (a2 if i == 2 else a3))
                c = ids[j + i]
                if best_id < 0 or total > best or (total == best and c < best_id):
                    best = total
                    best_id = c
            j += count
        out[s] = best_id


@cuda.jit
def _best_dot_per_slot_kernel(vectors, table, rows, ptr, ids, out):
    """Thread s: out[s] (the CPU twin's contract)."""
    s = cuda.grid(1)
    if s >= rows.shape[0]:
        return
    r = rows[s]
    best = np.float32(-np.inf)
    best_id = -1
    for j in range(ptr[s], ptr[s + 1]):
        c = ids[j]
        total = _row_dot(vectors, r, table, c)
        if best_id < 0 or total > best or (total == best and c < best_id):
            best = total
            best_id = c
    out[s] = best_id


def best_dot_per_slot_cuda(vectors, table, rows, ptr, ids, out, threads: int = 128) -> None:
    """Launch the GPU kernel (same contract as `best_dot_per_slot_cpu`)."""
    n = out.shape[0]
    if n == 0:
        return
    _best_dot_per_slot_kernel[(n + threads - 1) // threads, threads](vectors, table, rows, ptr, ids, out)


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i64 = types.float32, types.int64
    return [(_query_dot_kernel, (f32[:, ::1], f32[:, ::1], f32[:, ::1])),
            (_gather_max_dot_kernel, (f32[:, ::1], f32[:, ::1], i64[::1], i64[::1], i64[::1], f32[::1])),
            (_best_dot_per_slot_kernel, (f32[:, ::1], f32[:, ::1], i64[::1], i64[::1], i64[::1], i64[::1]))]


def query_dot_cuda(rows, vectors_t, out, threads: tuple[int, int] = (32, 8)) -> None:
    """Launch the GPU kernel (same contract as `query_dot_cpu`)."""
    n, width = out.shape
    if n == 0 or width == 0:
        return
    grid = ((width + threads[0] - 1) // threads[0], (n + threads[1] - 1) // threads[1])
    _query_dot_kernel[grid, threads](rows, vectors_t, out)
