"""Per-query candidate scores: the sparse counterpart of a chunks × B score block.

A `SparseScores` holds only the (query, chunk) entries a method scored; every other chunk has the
block's `fill` (−inf: not ranked; 0: contributes nothing to a sum). Entries are kept sorted by
(query, chunk), each pair once, so merging, ranking and look-ups are sorts and binary searches
over the entries: a batch costs what its queries' candidates cost, not B × the corpus.

Every operation is written once over the backend's array module (NumPy or CuPy). Rankings break
equal scores by the lower chunk id, as `ops.topk.ranked_top_k` does for dense blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..backend import Backend, expand_counts

#: the float32 −inf of entries that are not ranked
NEG_INF = np.float32(-np.inf)


@dataclass
class SparseScores:
    """Scores of some chunks per query (module doc): entries sorted by (row, chunk), each once."""

    rows: Any  # int64 (n,): the query (column of the dense block) of each entry
    chunks: Any  # int64 (n,)
    scores: Any  # float32 (n,)
    n_queries: int
    fill: float = float(NEG_INF)

    def __len__(self) -> int:
        return int(self.rows.size)

    def row_sizes(self, be: Backend) -> Any:
        """Entries per query (int64, length n_queries)."""
        return be.xp.bincount(self.rows, minlength=self.n_queries)[: self.n_queries]

    def with_scores(self, scores: Any, fill: float | None = None) -> "SparseScores":
        """The same entries with other scores."""
        return SparseScores(self.rows, self.chunks, scores, self.n_queries, self.fill if fill is None else fill)

    def where(self, keep: Any) -> "SparseScores":
        """The entries where `keep` is True (order kept)."""
        return SparseScores(self.rows[keep], self.chunks[keep], self.scores[keep], self.n_queries, self.fill)


def empty(be: Backend, n_queries: int, fill: float = float(NEG_INF)) -> SparseScores:
    xp = be.xp
    return SparseScores(xp.zeros(0, xp.int64), xp.zeros(0, xp.int64), xp.zeros(0, xp.float32), n_queries, fill)


def from_csr(be: Backend, matrix: Any, fill: float = float(NEG_INF)) -> SparseScores:
    """The stored entries of a B × chunks CSR matrix (scipy or cupyx)."""
    xp = be.xp
    matrix.sum_duplicates()  # sorted indices, each pair once
    rows = expand_counts(xp, xp.diff(matrix.indptr)).astype(xp.int64)
    return SparseScores(rows, matrix.indices.astype(xp.int64), matrix.data.astype(xp.float32), matrix.shape[0], fill)


def from_entries(be: Backend, rows: Any, chunks: Any, scores: Any, n_queries: int, fill: float = float(NEG_INF),
                 reduce: str = "max") -> SparseScores:
    """Entries in any order, repeated pairs merged by `reduce` ("max" or "sum")."""
    xp = be.xp
    rows, chunks = be.asarray(rows).astype(xp.int64), be.asarray(chunks).astype(xp.int64)
    scores = be.asarray(scores).astype(xp.float32)
    if rows.size == 0:
        return empty(be, n_queries, fill)
    width = int(chunks.max()) + 1
    keys = rows * width + chunks
    if reduce == "max":  # order by (key, score descending): the first of each key is its max
        order = be.argsort_stable(_descending_key(xp, keys, scores))
        keys, scores = keys[order], scores[order]
        first = xp.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys, scores = keys[first], scores[first]
    elif reduce == "sum":
        order = be.argsort_stable(keys)
        keys, scores = keys[order], scores[order]
        first = xp.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        group = xp.cumsum(first) - 1
        scores = xp.bincount(group, weights=scores.astype(xp.float64)).astype(xp.float32)
        keys = keys[first]
    else:
        raise ValueError(f"reduce must be 'max' or 'sum', got {reduce!r}")
    return SparseScores(keys // width, keys % width, scores, n_queries, fill)


def from_top(be: Backend, ids: Any, scores: Any, fill: float = float(NEG_INF)) -> SparseScores:
    """The entries of a k × B top-k (ids, scores) on the backend; ids < 0 and non-finite scores are left out."""
    xp = be.xp
    k, n_queries = ids.shape
    rows = xp.broadcast_to(xp.arange(n_queries, dtype=xp.int64)[None, :], (k, n_queries)).ravel()
    ids, scores = ids.ravel(), scores.ravel()
    keep = (ids >= 0) & xp.isfinite(scores)
    return from_entries(be, rows[keep], ids[keep], scores[keep], n_queries, fill)


def concat(be: Backend, blocks: Sequence[SparseScores], reduce: str) -> SparseScores:
    """The entries of every block in one, repeated pairs merged by `reduce` ("max" or "sum")."""
    xp, first = be.xp, blocks[0]
    return from_entries(be, xp.concatenate([b.rows for b in blocks]), xp.concatenate([b.chunks for b in blocks]),
                        xp.concatenate([b.scores for b in blocks]), first.n_queries, first.fill, reduce)


def remap_rows(be: Backend, block: SparseScores, rows: Any, n_queries: int) -> SparseScores:
    """The block with its row r renamed `rows[r]` (ascending, so the entry order holds) among `n_queries`."""
    rows = be.asarray(np.asarray(rows, dtype=np.int64))
    return SparseScores(rows[block.rows], block.chunks, block.scores, n_queries, block.fill)


def _descending_key(xp: Any, groups: Any, scores: Any) -> Any:
    """int64 keys ordering entries by group ascending, then score descending (−0.0 equal to 0.0)."""
    return (groups << 32) | descending_bits(xp, scores).astype(xp.int64)


def ranking(be: Backend, block: SparseScores, limit: int | None = None) -> tuple[Any, Any]:
    """(order, rank): the permutation of entries by query, then score descending, then chunk id,
    and each ordered entry's 0-based rank within its query. With `limit` (a caller that keeps only ranks below
    it), on the CPU, only the entries that can rank below `limit` in their query are sorted (`_within_first`):
    `order` then holds those alone, with the same ranks as the full sort."""
    xp = be.xp
    keys = _descending_key(xp, block.rows, block.scores)
    rows = block.rows
    if limit is not None and not be.is_gpu and len(block) > 2 * limit * max(block.n_queries, 1):
        subset = np.flatnonzero(_within_first(keys, block.row_sizes(be), limit))
        order = subset[be.argsort_stable(keys[subset])]
        sizes = np.bincount(rows[subset], minlength=block.n_queries)
    else:
        order = be.argsort_stable(keys)  # stable: chunk ids ascend
        sizes = block.row_sizes(be)
    starts = xp.zeros(block.n_queries + 1, dtype=xp.int64)
    starts[1:] = xp.cumsum(sizes)
    rank = xp.arange(order.size, dtype=xp.int64) - starts[rows[order]]
    return order, rank


def _within_first(keys: np.ndarray, sizes: np.ndarray, limit: int) -> np.ndarray:
    """bool per entry (entries grouped by row, `sizes` per row): whether it can rank below `limit` in its row by
    `keys` ascending. A longer row keeps the entries whose key is at most its `limit`-th smallest, ties included:
    every entry that the full stable sort ranks before a kept one is kept too, so the kept entries' ranks are the
    full sort's, while a row's cost is one heap pass instead of a sort (`kernels.entry_top.within_first_cpu`)."""
    from ..kernels.entry_top import within_first_cpu

    row_ptr = np.zeros(sizes.size + 1, dtype=np.int64)
    row_ptr[1:] = np.cumsum(sizes)
    keep = np.empty(keys.size, dtype=bool)
    within_first_cpu(row_ptr, np.ascontiguousarray(keys, dtype=np.int64), int(limit), keep)
    return keep


def top_k(be: Backend, block: SparseScores, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores), B × k on the host, best first per query; −1 / −inf where a query has fewer entries.
    On the CPU a size-k heap per query (`kernels.entry_top`), on the GPU the ranking's sort: the same entries."""
    if be.is_gpu or k < 1 or not _grouped(block.rows):
        return _ranked_top_k(be, block, k)
    row_ptr = np.zeros(block.n_queries + 1, dtype=np.int64)
    row_ptr[1:] = np.cumsum(block.row_sizes(be))
    return _heap_top_k(row_ptr, block.chunks, block.scores, k)


def csr_top_k(be: Backend, matrix: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`top_k(be, from_csr(be, matrix), k)` of a B × chunks CSR matrix whose rows hold each chunk at most once, in
    any order (what scipy's sparse products and sums give): on the CPU the heap reads the rows as they are, with
    no sort of their entries (`from_csr` sorts them to keep its block's order)."""
    if be.is_gpu or k < 1:
        return top_k(be, from_csr(be, matrix), k)
    return _heap_top_k(matrix.indptr, matrix.indices, matrix.data, k)


def _heap_top_k(row_ptr: np.ndarray, chunks: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores) B × k of the entries row_ptr[q]:row_ptr[q + 1] of each query, by `kernels.entry_top`."""
    from ..kernels.entry_top import entry_top_k_cpu

    ids = np.full((row_ptr.size - 1, k), -1, dtype=np.int64)
    vals = np.full((row_ptr.size - 1, k), NEG_INF, dtype=np.float32)
    entry_top_k_cpu(np.asarray(row_ptr, dtype=np.int64), np.asarray(chunks, dtype=np.int64),
                    np.asarray(scores, dtype=np.float32), k, ids, vals)
    return ids, vals


def _grouped(rows: np.ndarray) -> bool:
    """Entries grouped by query in ascending order (what every constructor of a block gives)."""
    return rows.size < 2 or bool((rows[1:] >= rows[:-1]).all())


def _ranked_top_k(be: Backend, block: SparseScores, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`top_k` by the ranking's sort (the GPU's form)."""
    xp = be.xp
    order, rank = ranking(be, block, limit=k)
    keep = (rank < k) & xp.isfinite(block.scores[order])
    rows, ranks = block.rows[order][keep], rank[keep]
    ids = xp.full((block.n_queries, k), -1, dtype=xp.int64)
    vals = xp.full((block.n_queries, k), NEG_INF, dtype=xp.float32)
    ids[rows, ranks] = block.chunks[order][keep]
    vals[rows, ranks] = block.scores[order][keep]
    return be.to_host(ids), be.to_host(vals)


def keep_top(be: Backend, block: SparseScores, count: int) -> SparseScores:
    """Each query's `count` best entries (by score, then lowest chunk id); the order of entries is kept."""
    order, rank = ranking(be, block, limit=count)
    keep = be.xp.zeros(len(block), dtype=bool)
    keep[order[rank < count]] = True
    return block.where(keep)


def top_of_each_row(be: Backend, matrix: Any, count: int) -> Any:
    """A CSR matrix (scipy or cupyx) with only the `count` largest entries of each row (ties to the lower
    column): e.g. each token's highest-weight postings. Rows already that short are kept whole."""
    xp = be.xp
    lengths = xp.diff(matrix.indptr)
    if (int(lengths.max()) if lengths.size else 0) <= count:
        return matrix
    rows = expand_counts(xp, lengths).astype(xp.int64)
    entries = SparseScores(rows, matrix.indices.astype(xp.int64), matrix.data.astype(xp.float32), matrix.shape[0])
    kept = keep_top(be, entries, count)
    indptr = xp.zeros(matrix.shape[0] + 1, dtype=xp.int64)
    indptr[1:] = xp.cumsum(kept.row_sizes(be))
    return be.sparse.csr_matrix((kept.scores, kept.chunks, indptr), shape=matrix.shape)


def reciprocal_rank(be: Backend, block: SparseScores, depth: int, k: int) -> SparseScores:
    """1 / (k + rank) for the `depth` best finite entries of each query (fill 0), as `ops.fusion.reciprocal_rank`."""
    xp = be.xp
    order, rank = ranking(be, block, limit=depth)
    keep = (rank < depth) & xp.isfinite(block.scores[order])
    ranks = (rank[keep] + 1).astype(xp.float32)
    contribution = (1.0 / (k + ranks)).astype(xp.float32)
    return from_entries(be, block.rows[order][keep], block.chunks[order][keep], contribution, block.n_queries,
                        fill=0.0)


def lookup(be: Backend, block: SparseScores, rows: Any, chunks: Any) -> Any:
    """The block's scores at the (row, chunk) pairs (its `fill` where it holds none)."""
    xp = be.xp
    rows, chunks = be.asarray(rows).astype(xp.int64), be.asarray(chunks).astype(xp.int64)
    if len(block) == 0:
        return xp.full(rows.shape, block.fill, dtype=xp.float32)
    width = int(max(int(block.chunks.max()), int(chunks.max()) if chunks.size else 0)) + 1
    keys = block.rows * width + block.chunks  # ascending: entries are sorted by (row, chunk)
    wanted = rows * width + chunks
    found = xp.minimum(xp.searchsorted(keys, wanted), keys.size - 1)
    return xp.where(keys[found] == wanted, block.scores[found], xp.float32(block.fill)).astype(xp.float32)


def best_of_each_group(be: Backend, block: SparseScores, group_of_chunk: Any) -> SparseScores:
    """Per query, only the best entry of each group (highest score, then lowest chunk id), as
    `ops.topk.best_of_each_group` does for dense blocks (e.g. one chunk per passage)."""
    xp = be.xp
    if len(block) == 0:
        return block
    groups = group_of_chunk[block.chunks]
    width = int(groups.max()) + 1
    order = be.argsort_stable(_descending_key(xp, block.rows * width + groups, block.scores))
    keys = (block.rows * width + groups)[order]
    first = xp.ones(keys.size, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    keep = xp.zeros(len(block), dtype=bool)
    keep[order[first]] = True
    return block.where(keep)


def cumulative_mass_pool(be: Backend, block: SparseScores, threshold: float) -> SparseScores:
    """The pool P_μ of each query (eq. 3.9) from its positive scores: the entries at or above the score
    at which the descending cumulative sum first reaches `threshold` of the query's total, as
    `methods.tigrag.scoring.cumulative_mass_pool` does over a dense block.

    The sums are exact integers: each query's scores in fixed point at a scale of its own (its total
    below 2**62), so one cumulative sum over the whole batch, less each query's start, gives every
    query the same pool in any batch (float sums would carry the rounding of the queries before it)."""
    xp = be.xp
    block = block.where(block.scores > 0)
    if len(block) == 0:
        return block
    order, _ = ranking(be, block)
    rows, ordered = block.rows[order], block.scores[order].astype(xp.float64)
    sizes = block.row_sizes(be)
    ends = xp.cumsum(sizes)
    starts = ends - sizes
    bound = ordered[xp.minimum(starts, ordered.size - 1)] * sizes  # each query's largest score × its count
    _, exponent = xp.frexp(xp.where(sizes > 0, bound, 1.0))  # bound < 2**exponent
    scale = xp.ldexp(xp.ones_like(bound), (62 - exponent).astype(xp.int32))
    fixed = xp.floor(ordered * scale[rows]).astype(xp.uint64)
    cumulative = xp.concatenate([xp.zeros(1, xp.uint64), xp.cumsum(fixed)])  # may wrap: differences stay exact
    within = (cumulative[1:] - cumulative[starts[rows]]).astype(xp.float64)
    totals = (cumulative[ends] - cumulative[starts]).astype(xp.float64)
    reached = within >= threshold * totals[rows]
    alpha = xp.minimum(xp.bincount(rows[~reached], minlength=block.n_queries)[: block.n_queries], sizes - 1)
    cutoff = ordered[xp.minimum(starts + xp.maximum(alpha, 0), ordered.size - 1)].astype(xp.float32)
    return block.where(block.scores >= cutoff[block.rows])


def row_ids(be: Backend, indptr: Any) -> Any:
    """The row (int64) of every entry of a CSR matrix with this `indptr`."""
    counts = be.xp.diff(indptr)
    if be.is_gpu:
        return expand_counts(be.xp, counts).astype(be.xp.int64)
    return np.repeat(np.arange(counts.size, dtype=np.int64), counts)


def descending_bits(xp: Any, scores: Any) -> Any:
    """uint64 keys below 2**32 that order float32 scores descending (−0.0 equal to 0.0)."""
    bits = (-scores.astype(xp.float32) + xp.float32(0.0)).view(xp.int32).astype(xp.int64)
    return xp.where(bits >= 0, bits + (1 << 31), -bits - 1).astype(xp.uint64)


def pool_entries(be: Backend, matrix: Any, threshold: float, pool_max: int, depth: int = 0) -> tuple[Any, Any]:
    """(kind per entry, pooled per row) of a B × chunks CSR of scores. Entries are placed in their row
    by (score descending, chunk id ascending); a row's pool (eq. 3.9) is its best entries down to the
    score at which the descending cumulative sum first reaches `threshold` of the row's total, ties
    included, at most `pool_max` (0: no cap). `kind` is 2 for a pooled entry, 1 for one among the row's
    best `depth` positive scores but not pooled, 0 otherwise; `pooled` counts each row's pool. The
    contract of kernels/row_pool.py; on the GPU the same integers by sorts over the whole batch."""
    return be.kernel(cpu=_pool_entries_rows, cuda=_pool_entries_sorted)(be, matrix, threshold, pool_max, depth)


def _pool_entries_rows(be: Backend, matrix: Any, threshold: float, pool_max: int, depth: int = 0
                       ) -> tuple[Any, Any]:
    from ..kernels.row_pool import rank_and_pool_cpu

    data = np.ascontiguousarray(matrix.data, dtype=np.float32)
    rank = np.empty(data.size, dtype=np.int64)
    kind = np.empty(data.size, dtype=np.int8)
    pooled = np.empty(matrix.shape[0], dtype=np.int64)
    rank_and_pool_cpu(matrix.indptr, matrix.indices, data.view(np.int32), data, float(threshold), int(pool_max),
                      int(depth), rank, pooled, kind)
    return kind, pooled


def _pool_entries_sorted(be: Backend, matrix: Any, threshold: float, pool_max: int, depth: int = 0
                         ) -> tuple[Any, Any]:
    """The batch-wide implementation (the GPU's; the tests run it on the CPU too). Sorts `matrix`'s indices."""
    xp = be.xp
    matrix.sum_duplicates()
    block = SparseScores(row_ids(be, matrix.indptr), matrix.indices.astype(xp.int64),
                         matrix.data.astype(xp.float32), matrix.shape[0])
    order, ranks = ranking(be, block)
    rank = xp.empty(len(block), dtype=xp.int64)
    rank[order] = ranks
    pooled = cumulative_mass_pool(be, block, threshold).row_sizes(be)
    if pool_max:
        pooled = xp.minimum(pooled, pool_max)
    listed = (rank < depth) & (block.scores > 0)
    kind = xp.where(rank < pooled[block.rows], 2, xp.where(listed, 1, 0)).astype(xp.int8)
    return kind, pooled


def gather_dot(be: Backend, embeddings: Any, vectors: Any, chunks: Any, vector_ids: Any,
               slice_entries: int = 1 << 15) -> Any:
    """embeddings[chunks[i]] · vectors[vector_ids[i]] for every i (float32), in slices of
    `slice_entries` pairs so the gathered rows stay small."""
    return gather_max_dot(be, embeddings, vectors, chunks, vector_ids, be.xp.ones_like(vector_ids), slice_entries)


def gather_max_dot(be: Backend, embeddings: Any, vectors: Any, chunks: Any, first: Any, counts: Any,
                   slice_entries: int = 1 << 15) -> Any:
    """max over r < counts[i] of embeddings[chunks[i]] · vectors[first[i] + r] for every i (float32; −inf
    where counts[i] is 0): each entry's best cosine over its query's vectors (`kernels.dense_dot`: no row
    gathered into a block, each entry costs its own count, each dot added in k order as the dense mode's
    `query_dot`, so an entry's value has the dense mode's bits and never depends on its batch-mates).
    `slice_entries` is accepted for callers of the earlier gather; the kernel needs no slicing."""
    from ..kernels.dense_dot import gather_max_dot_cpu, gather_max_dot_cuda

    xp = be.xp
    out = xp.empty(int(chunks.size), dtype=xp.float32)
    if chunks.size == 0:
        return out
    be.kernel(cpu=gather_max_dot_cpu, cuda=gather_max_dot_cuda)(
        xp.ascontiguousarray(embeddings, dtype=xp.float32), xp.ascontiguousarray(vectors, dtype=xp.float32),
        xp.ascontiguousarray(chunks, dtype=xp.int64), xp.ascontiguousarray(first, dtype=xp.int64),
        xp.ascontiguousarray(counts, dtype=xp.int64), out)
    return out
