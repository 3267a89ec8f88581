"""Dot products of chunk vectors with query vectors whose bits do not depend on the batch.

    out[i, b] = Σ_k rows[i, k] · vectors_t[k, b]      (float32, terms added in k order)

A BLAS sgemm picks its blocking, kernels and thread split from the matrix shapes, so the same
query's cosines change in the last bits with the number of queries beside it or the rows sliced
(OpenBLAS on an AVX2 EPYC: every batch size and every row slice differed), and near-ties then rank
differently in a batch, a resumed run or another method's path. Here every entry is one fixed
sequence of float32 multiplies and adds over k (no fused multiply-add, no reordering: numba's
default IEEE semantics), the same in any batch, on any row slice and on any thread.

CPU twin: for NARROW_WIDTH queries or more, a thread takes a tile of 8 rows × 32 queries and keeps its
256 sums in sixteen 16-lane vector registers over all of k (`_dot_tile`: LLVM IR with a plain multiply
then an add, the same IEEE steps), the queries taken in panels of 256 that stay in L2 while every row
passes; a loop over the queries inside the loop over k, its sums in a row of `out`, loaded and stored
every sum at every k (2Wiki's 7,870 chunk vectors times 256-2,300 queries: 2.4-2.7× faster, the same
bits). For fewer queries (one
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
GPU: one thread per slot. `best_dot_per_group_cpu` answers the same for a group of slots that share one candidate
list (LiteSemRAG's spans holding the same word): a thread takes GROUP_CHUNK candidates and scores each against
every slot of the group in `_dot_tile`'s register tiles (`_gathered_dot_tile`, rows read by id where they lie),
so a candidate row is read once per group instead of once per slot; the same bits, the same ids.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .lazy_cuda import cuda
from .vector_ir import F32, I64, LANES, const, lane_mask, masked_load, masked_store, splat

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
#: a register tile of `wide_dot_cpu`: rows × queries (two 16-lane vectors), its 16 sums held over all of k
TILE_ROWS, TILE_QUERIES = 8, 32
#: candidates a thread scores against a whole group of slots (`best_dot_per_group_cpu`): 8 register tiles
GROUP_CHUNK = 64
#: queries whose vectors a pass over the rows takes at once (384 KB of e5-small's): beyond L2, every row block
#: streamed them all again
PANEL_QUERIES = 256


def _emit_tile(builder, starts, vt_at, vt_bytes, dim, width, out_at, out_bytes, count):
    """The IR of a register tile: for r < TILE_ROWS (rows starting at byte addresses `starts`) and c < width ≤
    TILE_QUERIES, Σ_k row_r[k] · vectors_t[k, c] with `vt_at` the address of vectors_t[0, 0] and `vt_bytes` its row
    stride, each product rounded and then added in k order from 0 (plain `fmul` and `fadd`), the sums in vector
    registers over all of k; row r < count stored at `out_at + r·out_bytes` (columns past `width` neither read
    nor written)."""
    masks = [lane_mask(builder, 16 * g, width) for g in range(2)]
    zero = ir.Constant(LANES, None)
    sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(2)] for _ in range(TILE_ROWS)]
    with cgutils.for_range(builder, dim) as loop:
        k = loop.index
        line = builder.add(vt_at, builder.mul(k, vt_bytes))
        values = [masked_load(builder, builder.add(line, const(64 * g)), masks[g]) for g in range(2)]
        for r in range(TILE_ROWS):
            element = builder.load(builder.inttoptr(builder.add(starts[r], builder.mul(k, const(4))),
                                                    F32.as_pointer()))
            factor = splat(builder, element)
            for g in range(2):
                builder.store(builder.fadd(builder.load(sums[r][g]), builder.fmul(factor, values[g])), sums[r][g])
    for r in range(TILE_ROWS):
        with builder.if_then(builder.icmp_signed("<", const(r), count)):
            at = builder.add(out_at, builder.mul(const(r), out_bytes))
            for g in range(2):
                masked_store(builder, builder.load(sums[r][g]), builder.add(at, const(64 * g)), masks[g])


def _float32_matrices(*arrays) -> bool:
    return all(isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C" and a.dtype == types.float32
               for a in arrays)


@intrinsic
def _dot_tile(typingctx, rows, i0, count, vectors_t, b0, width, out):
    """out[i0 + r, b0 + c] = Σ_k rows[i0 + r, k] · vectors_t[k, b0 + c] for r < count ≤ TILE_ROWS and c < width ≤
    TILE_QUERIES: each product rounded, then added in k order from 0 (plain `fmul` and `fadd`, no fused
    multiply-add: the loops' IEEE bits), the tile's sums in vector registers for the whole loop over k. Rows past
    `count` repeat the last row (computed, never stored); columns past `width` are neither read nor written."""
    if not _float32_matrices(rows, vectors_t, out):
        return None
    sig = types.void(rows, i0, count, vectors_t, b0, width, out)

    def codegen(context, builder, signature, args):
        rows_v, i0, count, vt_v, b0, width, out_v = args
        arrays = [context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 3, 6)]
        rows_at, vt_at, out_at = (builder.ptrtoint(a.data, I64) for a in arrays)
        row_bytes, vt_bytes, out_bytes = (builder.extract_value(a.strides, 0) for a in arrays)
        dim = builder.extract_value(arrays[0].shape, 1)
        last = builder.sub(count, const(1))
        starts = []
        for r in range(TILE_ROWS):  # rows past `count` read the last row
            row = builder.select(builder.icmp_signed("<", const(r), count), const(r), last)
            starts.append(builder.add(rows_at, builder.mul(builder.add(i0, row), row_bytes)))
        vt_at = builder.add(vt_at, builder.mul(b0, const(4)))
        out_at = builder.add(builder.add(out_at, builder.mul(b0, const(4))), builder.mul(i0, out_bytes))
        _emit_tile(builder, starts, vt_at, vt_bytes, dim, width, out_at, out_bytes, count)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _gathered_dot_tile(typingctx, table, ids, i0, count, vectors_t, b0, width, out):
    """out[r, c] = Σ_k table[ids[i0 + r], k] · vectors_t[k, b0 + c] for r < count ≤ TILE_ROWS and c < width ≤
    TILE_QUERIES (out: a TILE_ROWS × TILE_QUERIES scratch): `_dot_tile`'s sums, in its IEEE steps, of rows picked
    by id where they lie (no gathered copy). Rows past `count` repeat the last id (computed, never stored)."""
    if not (_float32_matrices(table, vectors_t, out) and isinstance(ids, types.Array) and ids.ndim == 1
            and ids.dtype == types.int64):
        return None
    sig = types.void(table, ids, i0, count, vectors_t, b0, width, out)

    def codegen(context, builder, signature, args):
        table_v, ids_v, i0, count, vt_v, b0, width, out_v = args
        arrays = [context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 1, 4, 7)]
        table_at, ids_at, vt_at, out_at = (builder.ptrtoint(a.data, I64) for a in arrays)
        row_bytes, id_bytes, vt_bytes, out_bytes = (builder.extract_value(a.strides, 0) for a in arrays)
        dim = builder.extract_value(arrays[0].shape, 1)
        last = builder.sub(count, const(1))
        starts = []
        for r in range(TILE_ROWS):
            row = builder.select(builder.icmp_signed("<", const(r), count), const(r), last)
            at = builder.add(ids_at, builder.mul(builder.add(i0, row), id_bytes))
            chosen = builder.load(builder.inttoptr(at, I64.as_pointer()))
            starts.append(builder.add(table_at, builder.mul(chosen, row_bytes)))
        vt_at = builder.add(vt_at, builder.mul(b0, const(4)))
        _emit_tile(builder, starts, vt_at, vt_bytes, dim, width, out_at, out_bytes, count)
        return context.get_dummy_value()

    return sig, codegen


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
    """`query_dot_cpu` for many queries: tiles of TILE_ROWS rows × TILE_QUERIES queries, each tile's sums in
    vector registers over all of k (`_dot_tile`), where a loop over the queries inside the loop over k loaded
    and stored every sum at every k (4 rows × thousands of queries: more than L1 holds)."""
    n = rows.shape[0]
    width = vectors_t.shape[1]
    for panel in range(0, width, PANEL_QUERIES):  # a panel's query vectors stay in the threads' L2 for every row
        end = min(width, panel + PANEL_QUERIES)
        for block in prange((n + TILE_ROWS - 1) // TILE_ROWS):
            i0 = block * TILE_ROWS
            count = min(TILE_ROWS, n - i0)
            for b0 in range(panel, end, TILE_QUERIES):
                _dot_tile(rows, i0, count, vectors_t, b0, min(TILE_QUERIES, end - b0), out)


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


@njit(parallel=True, cache=True)
def best_dot_per_group_cpu(table, ids, vectors_t, best_value, best_id):
    """For the candidates `ids` (rows of `table`) of a group of G slots that share them, slot g's vector being
    column g of vectors_t (d × G): best_value[c, g], best_id[c, g] = the highest Σ_k table[id, k] · vectors_t[k, g]
    over the ids of chunk c (GROUP_CHUNK of them), equal sums to the lower id (-1 for none); each sum in
    `best_dot_per_slot_cpu`'s bits (k order, a rounded product then an add). Each loaded candidate row serves
    every slot of the group (register tiles, `_gathered_dot_tile`), where the per-slot kernel reads it once per slot."""
    m = ids.shape[0]
    width = vectors_t.shape[1]
    for c in prange((m + GROUP_CHUNK - 1) // GROUP_CHUNK):
        scratch = np.empty((TILE_ROWS, TILE_QUERIES), dtype=np.float32)
        lo = c * GROUP_CHUNK
        hi = min(m, lo + GROUP_CHUNK)
        for g in range(width):
            best_value[c, g] = np.float32(-np.inf)
            best_id[c, g] = -1
        for i0 in range(lo, hi, TILE_ROWS):
            count = min(TILE_ROWS, hi - i0)
            for b0 in range(0, width, TILE_QUERIES):
                columns = min(TILE_QUERIES, width - b0)
                _gathered_dot_tile(table, ids, i0, count, vectors_t, b0, columns, scratch)
                for r in range(count):
                    candidate = ids[i0 + r]
                    for q in range(columns):
                        total = scratch[r, q]
                        g = b0 + q
                        held = best_id[c, g]
                        if held < 0 or total > best_value[c, g] or (total == best_value[c, g] and candidate < held):
                            best_value[c, g] = total
                            best_id[c, g] = candidate


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
