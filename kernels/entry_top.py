"""Each query's k best entries of a `SparseScores` block on the CPU (gpu_tigrag/ops/sparse_scores.py:top_k).

The block's entries come grouped by query. Sorting them (or partitioning each long row, then sorting what is
left) costs a key per entry and a sort; a size-k heap per query costs one comparison for most entries. The
order is the sort's: score descending, equal scores by chunk id ascending (`bm25_top._worse`, which compares
ids, so the entries' order within a query does not matter); −0.0 equals 0.0 as float comparison has it.
Entries that are not finite are never listed, but a +inf entry holds a place as the sort gives it one (first):
a query's finite entries start after its +inf ones, as `ops.sparse_scores.ranking`'s ranks do.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

from .bm25_top import _sift_down, _sift_up, _worse
from .columns import kth_largest


@njit(parallel=True, cache=True)
def entry_top_k_cpu(row_ptr, chunks, scores, k, out_ids, out_scores):
    """out_ids / out_scores (B × k, preset to −1 / −inf): per query q, the best k finite entries among
    row_ptr[q]:row_ptr[q + 1], best first."""
    for q in prange(row_ptr.size - 1):
        heap_scores = np.empty(k, dtype=np.float32)
        heap_ids = np.empty(k, dtype=np.int64)
        size = 0
        ahead = 0  # +inf entries: they take the first places, unlisted
        for e in range(row_ptr[q], row_ptr[q + 1]):
            score = scores[e]
            if not np.isfinite(score):
                if score > 0:
                    ahead += 1
                continue
            chunk = chunks[e]
            if size < k:
                heap_scores[size] = score
                heap_ids[size] = chunk
                _sift_up(heap_scores, heap_ids, size)
                size += 1
            elif _worse(heap_scores[0], heap_ids[0], score, chunk):
                heap_scores[0] = score
                heap_ids[0] = chunk
                _sift_down(heap_scores, heap_ids, 0, size)
        listed = min(size, max(k - ahead, 0))
        for position in range(size - 1, -1, -1):  # pop the worst into the last slot: best first
            if position < listed:
                out_scores[q, ahead + position] = heap_scores[0]
                out_ids[q, ahead + position] = heap_ids[0]
            heap_scores[0] = heap_scores[position]
            heap_ids[0] = heap_ids[position]
            _sift_down(heap_scores, heap_ids, 0, position)


@njit(parallel=True, cache=True)
def within_first_cpu(row_ptr, keys, limit, keep):
    """keep (bool per entry): for a query of more than `limit` entries, whether the entry's key is at most the
    query's `limit`-th smallest key (ties included); every entry of a shorter query (`ops.sparse_scores.ranking`'s
    shortlist: one heap pass per query, `columns.kth_largest` on the negated keys)."""
    for q in prange(row_ptr.size - 1):
        lo, hi = row_ptr[q], row_ptr[q + 1]
        if hi - lo <= limit:
            for e in range(lo, hi):
                keep[e] = True
            continue
        cut = -kth_largest(-keys[lo:hi], limit)
        for e in range(lo, hi):
            keep[e] = keys[e] <= cut
