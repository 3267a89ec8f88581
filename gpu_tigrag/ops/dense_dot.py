"""Cosines of chunk vectors with query vectors whose bits do not depend on the batch (kernels/dense_dot.py).

Every dense product of the engine's chunk vectors with a batch's query vectors goes through
`query_dot`, so a query's scores, and so its ranking among near-ties, are the same bits alone or in
any batch, after a resume, and in every method that ranks by the same cosine.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..backend import Backend
from ..kernels.dense_dot import TILE, TILED_MAX_WIDTH, TILED_MIN_ROWS, query_dot_cpu, query_dot_cuda, tiled_dot_cpu


class RowTiles:
    """A chunks × dim matrix's rows in transposed tiles (kernels/dense_dot.py: `tiled_dot_cpu`), made on the
    first product that uses them (a few queries at a time, on CPU) and kept: one more copy of the vectors,
    bought for 2.5-3× faster products of one or a few questions (bench/results/first_stage.md)."""

    def __init__(self, rows: Any, min_rows: int = TILED_MIN_ROWS):
        """`min_rows`: fewer rows are multiplied without tiles (no copy; microseconds either way)."""
        self.rows, self.min_rows = rows, min_rows
        self._tiles: np.ndarray | None = None
        self._lock = threading.Lock()

    def tiles(self) -> np.ndarray:
        with self._lock:
            if self._tiles is None:
                rows = np.asarray(self.rows, dtype=np.float32)
                n, dim = rows.shape
                padded = np.zeros((-(-n // TILE) * TILE, dim), dtype=np.float32)
                padded[:n] = rows
                # tiles[t, k, r] = rows[t · TILE + r, k], zero past the last row
                self._tiles = np.ascontiguousarray(padded.reshape(-1, TILE, dim).transpose(0, 2, 1))
            return self._tiles


def query_dot(be: Backend, rows: Any, vectors: Any, tiles: RowTiles | None = None) -> Any:
    """`rows @ vectors.T` as float32 (rows: n × d; vectors: B × d; both taken as float32) on the backend of `be`,
    each entry one fixed sequence of float32 operations (independent of B, of the other rows and of threads).
    `tiles`, the same rows tiled (`RowTiles`), serve a CPU product of up to TILED_MAX_WIDTH queries."""
    xp = be.xp
    rows = xp.ascontiguousarray(rows, dtype=xp.float32)  # no copy for the engine's float32 chunk vectors
    vectors_t = xp.ascontiguousarray(xp.asarray(vectors).T, dtype=xp.float32)
    if rows.shape[1] != vectors_t.shape[0]:
        raise ValueError(f"chunk vectors have {rows.shape[1]} dimensions, query vectors {vectors_t.shape[0]}")
    out = xp.empty((rows.shape[0], vectors_t.shape[1]), dtype=xp.float32)
    if tiles is not None and tiles.rows.shape != rows.shape:
        raise ValueError(f"tiles of {tiles.rows.shape[0]} rows given for a product with {rows.shape[0]} rows")
    if (tiles is not None and not be.is_gpu and 0 < vectors_t.shape[1] <= TILED_MAX_WIDTH
            and rows.shape[0] >= tiles.min_rows):
        tiled_dot_cpu(tiles.tiles(), rows.shape[0], vectors_t, out)
        return out
    be.kernel(cpu=query_dot_cpu, cuda=query_dot_cuda)(rows, vectors_t, out)
    return out


def best_dot_per_slot(be: Backend, vectors: Any, table: Any, rows: np.ndarray, ptr: np.ndarray,
                      ids: np.ndarray) -> np.ndarray:
    """int64 per slot s (host): the candidate among ids[ptr[s]:ptr[s + 1]] whose row of `table` has the highest
    dot product with vectors[rows[s]], equal dots to the lower id; -1 for a slot without candidates
    (kernels/dense_dot.py: each dot in k order, no pair's rows gathered). `vectors` and `table` on the backend
    (float32, C order), the index arrays on the host."""
    from ..kernels.dense_dot import best_dot_per_slot_cpu, best_dot_per_slot_cuda

    xp = be.xp
    out = xp.full(len(rows), -1, dtype=xp.int64)
    if len(rows):
        args = [xp.ascontiguousarray(be.asarray(a), dtype=xp.float32) for a in (vectors, table)]
        args += [be.asarray(np.ascontiguousarray(a, dtype=np.int64)) for a in (rows, ptr, ids)]
        be.kernel(cpu=best_dot_per_slot_cpu, cuda=best_dot_per_slot_cuda)(*args, out)
    return be.to_host(out).astype(np.int64)


#: slots that share one candidate list from which the CPU scores the list once for all of them
GROUP_MIN_SLOTS = 4


def best_dot_per_list(be: Backend, vectors: Any, table: Any, rows: np.ndarray, lists: np.ndarray,
                      list_ptr: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`best_dot_per_slot` where slots share candidate lists: int64 per slot s (host), the candidate among
    ids[list_ptr[l]:list_ptr[l + 1]], l = lists[s], of highest dot product with vectors[rows[s]], equal dots to the
    lower id; -1 where lists[s] is -1 or the list is empty. LiteSemRAG's partial matching gives every span of a
    batch that holds the same word the same candidates (at 10,000 synthetic passages the distinct lists hold 3% of
    the slots' pairs). On the CPU a list shared by GROUP_MIN_SLOTS slots or more is scored once for all of them
    (`best_dot_per_group_cpu`: each candidate row read once, its dots with the group's vectors in register tiles);
    the other slots, and every slot on the GPU, take the per-slot kernel. Every dot keeps its bits (k order), so
    the answer is the per-slot kernel's, whatever the grouping."""
    from ..kernels.dense_dot import GROUP_CHUNK, best_dot_per_group_cpu

    rows, lists, list_ptr, ids = (np.ascontiguousarray(a, dtype=np.int64) for a in (rows, lists, list_ptr, ids))
    out = np.full(rows.size, -1, dtype=np.int64)
    sizes = np.diff(list_ptr)
    if rows.size == 0 or sizes.size == 0:
        return out
    has = np.nonzero((lists >= 0) & (sizes[np.maximum(lists, 0)] > 0))[0]
    if has.size == 0:
        return out
    shared = np.bincount(lists[has], minlength=sizes.size)
    grouped = has[shared[lists[has]] >= GROUP_MIN_SLOTS] if not be.is_gpu else has[:0]
    alone = np.setdiff1d(has, grouped, assume_unique=True)
    if alone.size:  # the per-slot kernel on the slots' own copies of their lists
        starts, stops = list_ptr[lists[alone]], list_ptr[lists[alone] + 1]
        ptr = np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int64)
        own = ids[np.repeat(starts - ptr[:-1], stops - starts) + np.arange(int(ptr[-1]))]
        out[alone] = best_dot_per_slot(be, vectors, table, rows[alone], ptr, own)
    if grouped.size:
        host_vectors = np.ascontiguousarray(be.to_host(vectors), dtype=np.float32)
        host_table = np.ascontiguousarray(be.to_host(table), dtype=np.float32)
        order = grouped[np.argsort(lists[grouped], kind="stable")]
        bounds = np.flatnonzero(np.diff(lists[order])) + 1
        for slots in np.split(order, bounds):
            lo, hi = int(list_ptr[lists[slots[0]]]), int(list_ptr[lists[slots[0]] + 1])
            candidates = ids[lo:hi]
            vectors_t = np.ascontiguousarray(host_vectors[rows[slots]].T)
            chunks = -(-candidates.size // GROUP_CHUNK)
            best_value = np.empty((chunks, slots.size), dtype=np.float32)
            best_id = np.empty((chunks, slots.size), dtype=np.int64)
            best_dot_per_group_cpu(host_table, candidates, vectors_t, best_value, best_id)
            top = best_value.max(axis=0)  # per slot: the highest sum of its chunks, then the lowest id holding it
            out[slots] = np.where(best_value == top, best_id, np.iinfo(np.int64).max).min(axis=0)
    return out
