"""Per-column top k of a score block (nodes × queries), the same ids on NumPy and CuPy.

Ties at the cut go to the lowest row ids on both backends (NumPy's introselect alone would pick
among them arbitrarily): a column-parallel numba kernel on CPU (kernels/columns.py), and on GPU
CuPy's partition with a stable re-sort of the columns whose ties cross the cut.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import Backend


def _top_k_rows_host(be: Backend, scores: Any, k: int) -> Any:
    from ..kernels.columns import top_k_rows_cpu

    out = np.empty((k, scores.shape[1]), dtype=np.int64)
    top_k_rows_cpu(np.ascontiguousarray(scores), k, out)
    return out


def _top_k_rows_device(be: Backend, scores: Any, k: int) -> Any:
    xp = be.xp
    n = scores.shape[0]
    ids = xp.argpartition(scores, n - k, axis=0)[n - k :]
    kept = xp.take_along_axis(scores, ids, axis=0)
    cut = kept.min(axis=0)
    straddle = (scores == cut).sum(axis=0) > (kept == cut).sum(axis=0)
    if bool(straddle.any()):
        cols = xp.nonzero(straddle)[0]
        ids[:, cols] = be.argsort_stable(-scores[:, cols], axis=0)[:k]
    return xp.sort(ids, axis=0)


def top_k_rows(be: Backend, scores: Any, k: int) -> Any:
    """Row ids (k × B, ascending per column) of the k largest entries of each column of `scores`."""
    n = scores.shape[0]
    if k >= n:
        return be.xp.broadcast_to(be.xp.arange(n)[:, None], scores.shape).copy()
    return be.kernel(cpu=_top_k_rows_host, cuda=_top_k_rows_device)(be, scores, k)


def ranked_top_k(be: Backend, scores: Any, k: int) -> tuple[Any, Any]:
    """(ids, scores), k × B on the backend, of each column of `scores`, best first; equal scores in
    row-id order on every backend."""
    xp = be.xp
    k = min(k, scores.shape[0])
    part = top_k_rows(be, scores, k)  # ascending ids, so the stable sort below breaks ties by id
    vals = xp.take_along_axis(scores, part, axis=0)
    order = be.argsort_stable(-vals, axis=0)
    return xp.take_along_axis(part, order, axis=0), xp.take_along_axis(vals, order, axis=0)


def best_of_each_group(be: Backend, scores: Any, indptr: Any, order: Any) -> Any:
    """`scores` (rows × B) with every row but the best of its group set to -inf, per column: the best
    row of a group has its highest score, and of equal scores the first in `order`. Group g holds the
    rows order[indptr[g]:indptr[g + 1]] (e.g. the chunks of passage g in chunk order)."""
    xp = be.xp
    sizes = indptr[1:] - indptr[:-1]
    filled = sizes > 0
    starts = indptr[:-1][filled]
    grouped = scores[order]
    best = xp.maximum.reduceat(grouped, starts, axis=0)  # groups with rows × B
    best = xp.repeat(best, sizes[filled], axis=0)
    hit = (grouped == best).astype(xp.int32)
    group_of_row = xp.repeat(xp.arange(starts.size), sizes[filled])
    offsets = xp.cumsum(hit, axis=0) - hit  # hits before each row, over all groups
    first = hit.astype(bool) & ((offsets - offsets[starts][group_of_row]) == 0)
    out = xp.full(scores.shape, -np.inf, dtype=scores.dtype)
    out[order] = xp.where(first, grouped, -np.inf).astype(scores.dtype)
    return out
