"""Backend-generic score primitives over a block of queries (chunks × B on the backend).

* `reciprocal_rank`: each column's top `depth` entries get 1 / (k + rank), the rest 0, so
  scores of different scales (cosine, BM25, ρ) can be added (Cormack et al.'s RRF).
* `bm25_scores`: BM25 of each query's valid tokens, one sparse product for the whole block.
* `bm25_postings_scores`: the same scores from the vocab × chunks postings, costing the postings of
  the block's tokens instead of a pass over every chunk (the one-query path of the BM25 baseline);
  `bm25_block_scores` picks the product that reads fewer entries.
* `bm25_top`: each query's ranked BM25 list, exact, without a chunks × B block on the CPU (MaxScore
  over the postings) and with bounded blocks on the GPU (the BM25 baseline at any corpus size);
  `fuse_ranked_lists` fuses it with the dense first stage's list as `reciprocal_rank` does over
  whole blocks (the Hybrid baseline); `fuse_lists` fuses any weighted ranked lists so (LiteSemRAG's fusion).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..backend import Backend
from .topk import top_k_rows

#: the score of an entry that is not ranked (float32, so masked blocks keep their dtype)
NEG_INF = np.float32(-np.inf)
#: bytes of one chunks × queries block of `bm25_top` (its slices of queries are sized to it)
BLOCK_BYTES = 64 << 20


def reciprocal_rank(be: Backend, scores: Any, depth: int, k: int) -> Any:
    """1 / (k + rank) for the `depth` best finite entries of every column, 0 elsewhere (float32)."""
    xp = be.xp
    n, n_queries = scores.shape
    depth = min(depth, n)
    out = xp.zeros((n, n_queries), dtype=xp.float32)
    if depth == 0 or n_queries == 0:
        return out
    part = top_k_rows(be, scores, depth)  # ascending ids: the stable sort below breaks ties by id
    values = xp.take_along_axis(scores, part, axis=0)
    order = be.argsort_stable(-values, axis=0)
    ids = xp.take_along_axis(part, order, axis=0)
    values = xp.take_along_axis(values, order, axis=0)
    ranks = xp.arange(1, depth + 1, dtype=xp.float32)[:, None]
    contribution = xp.where(xp.isfinite(values), 1.0 / (k + ranks), 0.0).astype(xp.float32)
    cols = xp.broadcast_to(xp.arange(n_queries)[None, :], (depth, n_queries))
    out[ids, cols] = contribution
    return out


def fused_then_cosine(be: Backend, fused: Any, dense: Any | None) -> Any:
    """A fused reciprocal-rank block (chunks × B, > 0 where a list ranked the chunk) with the chunks
    no list ranked after every ranked one: by cosine (`dense`) when given, else not ranked (-inf).
    float64: the tail (cosine − 3) · 1e-6 sits below every fused score and keeps every distinct float32
    cosine distinct (in float32 it kept only steps of 2.4e-7, so near-equal cosines fell back to id order)."""
    xp = be.xp
    if dense is None:
        return xp.where(fused > 0, fused, NEG_INF).astype(xp.float32)
    tail = (dense.astype(xp.float64) - 3.0) * 1e-6  # below every fused score (each > 0)
    return xp.where(fused > 0, fused.astype(xp.float64), tail)


def query_term_matrix(be: Backend, seeds: Sequence[np.ndarray], n_vocab: int) -> Any:
    """Sparse vocab × B counts of each query's valid tokens (with multiplicity): BM25 of a whole
    block of queries is then one sparse product, and no dense vocab × B block is allocated."""
    rows = np.concatenate([np.asarray(ids, dtype=np.int32) for ids in seeds]) if seeds else np.zeros(0, np.int32)
    cols = np.repeat(np.arange(len(seeds), dtype=np.int32), [len(ids) for ids in seeds])
    counts = np.ones(rows.size, dtype=np.float32)
    xp = be.xp
    return be.sparse.coo_matrix((xp.asarray(counts), (xp.asarray(rows), xp.asarray(cols))),
                                shape=(n_vocab, len(seeds))).tocsr()  # duplicates are summed


def bm25_scores(be: Backend, bm25: Any, seeds: Sequence[np.ndarray], n_vocab: int) -> Any:
    """Dense chunks × B BM25 scores of each query's tokens (counted with multiplicity)."""
    return (bm25 @ query_term_matrix(be, seeds, n_vocab)).toarray()


def query_term_rows(be: Backend, seeds: Sequence[np.ndarray], n_vocab: int) -> Any:
    """Sparse B × vocab counts of each query's valid tokens (row q: its distinct tokens, ascending,
    with their multiplicity): the transpose of `query_term_matrix`, from one sort of (query, token) keys."""
    lengths = np.fromiter((len(ids) for ids in seeds), dtype=np.int64, count=len(seeds))
    tokens = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in seeds]) if seeds else np.zeros(0, np.int64)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= n_vocab):
        raise ValueError(f"token ids must be in [0, {n_vocab}), got {tokens.min()}..{tokens.max()}")
    keys = np.repeat(np.arange(len(seeds), dtype=np.int64), lengths) * n_vocab + tokens
    keys, counts = np.unique(keys, return_counts=True)
    indptr = np.searchsorted(keys, np.arange(len(seeds) + 1, dtype=np.int64) * n_vocab)
    xp = be.xp
    return be.sparse.csr_matrix((xp.asarray(counts.astype(np.float32)), xp.asarray((keys % n_vocab).astype(np.int32)),
                                 xp.asarray(indptr.astype(np.int32))), shape=(len(seeds), n_vocab))


def bm25_postings_scores(be: Backend, postings: Any, seeds: Sequence[np.ndarray], n_vocab: int,
                         rows: Any = None) -> Any:
    """Dense chunks × B BM25 scores of each query's tokens (with multiplicity), as `bm25_scores`, from
    `postings` (vocab × chunks CSR, `DeviceIndex.postings`): each query reads only its tokens' postings.
    `rows`: the block's `query_term_rows`, when the caller has them.

    On the CPU the scores are bit for bit `bm25_scores`': SciPy's product sums a chunk's terms in token
    order either way (the chunk's row of the BM25 matrix there, the query's ascending tokens here), so
    rankings and their ties are the same. Returned C-ordered, as the top-k kernels read it (a transposed
    copy: what makes this product dearer than `bm25_scores` for large blocks)."""
    if postings.shape[0] != n_vocab:
        raise ValueError(f"postings have {postings.shape[0]} token rows, the vocabulary {n_vocab}")
    rows = query_term_rows(be, seeds, n_vocab) if rows is None else rows
    return be.xp.ascontiguousarray((rows @ postings).toarray().T)  # B × chunks, sparse -> chunks × B dense


def bm25_block_scores(be: Backend, bm25: Any, postings: Any, seeds: Sequence[np.ndarray], n_vocab: int) -> Any:
    """`bm25_scores` of a block by whichever product reads fewer entries: the postings of the block's
    distinct tokens (`bm25_postings_scores`: a single query, small blocks), or one pass over the BM25
    matrix (`bm25_scores`: blocks whose tokens' postings outnumber its entries). Both give the same
    scores (see `bm25_postings_scores`), so the choice changes the time, never the ranking."""
    rows = query_term_rows(be, seeds, n_vocab)
    starts = postings.indptr
    work = int((starts[rows.indices + 1] - starts[rows.indices]).sum()) if rows.nnz else 0
    if work < bm25.nnz:
        return bm25_postings_scores(be, postings, seeds, n_vocab, rows=rows)
    return bm25_scores(be, bm25, seeds, n_vocab)


def bm25_of_pairs(be: Backend, bm25: Any, term_rows: Any, rows: Any, cols: Any) -> Any:
    """float32 (P,) on the backend: the BM25 of chunk rows[p] for query cols[p], `bm25_scores`' entry bit for bit
    (kernels/bm25_pairs.py), with no chunks × B block. `bm25`: chunks × vocab CSR on the backend (its indices
    sorted here if they are not); `term_rows`: the block's `query_term_rows`."""
    from ..kernels.bm25_pairs import bm25_pairs_cpu, bm25_pairs_cuda

    xp = be.xp
    out = xp.empty(int(rows.size), dtype=xp.float32)
    if rows.size == 0:
        return out
    if not bm25.has_sorted_indices:  # the sums follow each row's token order (as `_bm25_top_host` sorts its postings)
        bm25.sort_indices()
    be.kernel(cpu=bm25_pairs_cpu, cuda=bm25_pairs_cuda)(
        bm25.indptr, bm25.indices, bm25.data, term_rows.indptr, term_rows.indices, term_rows.data,
        xp.ascontiguousarray(rows, dtype=xp.int64), xp.ascontiguousarray(cols, dtype=xp.int64), out)
    return out


def postings_max_weight(bm25: Any) -> np.ndarray:
    """Each token's largest BM25 weight over the chunks (host float32, 0 for a token in no chunk), from
    the chunks × vocab BM25 matrix on the host: the bounds MaxScore prunes with (`kernels.bm25_top`)."""
    if bm25.shape[0] == 0:
        return np.zeros(bm25.shape[1], dtype=np.float32)
    return np.asarray(bm25.max(axis=0).toarray(), dtype=np.float32).reshape(-1)


def _bm25_top_host(be: Backend, bm25: Any, postings: Any, max_weight: np.ndarray, seeds: Sequence[np.ndarray],
                   n_vocab: int, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from ..kernels.bm25_top import bm25_top_cpu

    if not postings.has_sorted_indices:  # the walk needs each token's chunks in id order
        postings.sort_indices()
    rows = query_term_rows(be, seeds, n_vocab)
    n_queries = len(seeds)
    ids = np.full((n_queries, depth), -1, dtype=np.int64)
    scores = np.zeros((n_queries, depth), dtype=np.float32)
    counts = np.zeros(n_queries, dtype=np.int64)
    bm25_top_cpu(postings.indptr, postings.indices, postings.data, max_weight, rows.indptr, rows.indices,
                 rows.data, depth, ids, scores, counts)
    return ids, scores, counts


def _bm25_top_device(be: Backend, bm25: Any, postings: Any, max_weight: Any, seeds: Sequence[np.ndarray],
                     n_vocab: int, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xp = be.xp
    n_queries, n = len(seeds), bm25.shape[0]
    ids = np.full((n_queries, depth), -1, dtype=np.int64)
    scores = np.zeros((n_queries, depth), dtype=np.float32)
    counts = np.zeros(n_queries, dtype=np.int64)
    step = max(1, BLOCK_BYTES // max(4 * n, 1))
    for first in range(0, n_queries if depth else 0, step):
        block = bm25_block_scores(be, bm25, postings, seeds[first:first + step], n_vocab)
        part = top_k_rows(be, block, depth)  # ascending ids: the stable sort below breaks ties by id
        values = xp.take_along_axis(block, part, axis=0)
        order = be.argsort_stable(-values, axis=0)
        top = be.to_host(xp.take_along_axis(part, order, axis=0)).T
        values = be.to_host(xp.take_along_axis(values, order, axis=0)).T
        listed = values > 0  # a prefix of each row
        ids[first:first + step] = np.where(listed, top, -1)
        scores[first:first + step] = np.where(listed, values, 0)
        counts[first:first + step] = listed.sum(axis=1)
    return ids, scores, counts


def bm25_top(be: Backend, bm25: Any, postings: Any, max_weight: Any, seeds: Sequence[np.ndarray], n_vocab: int,
             depth: int, maxscore: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, scores, counts) on the host: each query's `depth` best chunks by BM25 among those scoring
    > 0, best first, equal scores in chunk-id order (`ranked_top_k`'s order, and `bm25_scores`' float32
    scores bit for bit); ids and scores are B × depth (-1 and 0 past a query's `counts[q]`).

    On the CPU, MaxScore over the postings (`kernels.bm25_top`, `max_weight` = `postings_max_weight`):
    the walk skips chunks that cannot reach a query's top `depth`, so its cost follows the postings of
    the query's rarer tokens, not every chunk its commonest ones touch. On the GPU, chunks × queries
    blocks (`bm25_block_scores`) over slices of queries, each within BLOCK_BYTES whatever the batch; also on the
    CPU with `maxscore` False (a BM25 with weights ≤ 0, whose sums MaxScore's bounds do not hold for)."""
    depth = min(depth, bm25.shape[0])
    host = _bm25_top_host if maxscore else _bm25_top_device
    return be.kernel(cpu=host, cuda=_bm25_top_device)(be, bm25, postings, max_weight, seeds, n_vocab, depth)


def fuse_ranked_lists(dense_ids: np.ndarray, dense_vals: np.ndarray, bm25_ids: np.ndarray, bm25_counts: np.ndarray,
                      depth: int, k_rrf: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores), B × k on the host, of the reciprocal-rank fusion of two ranked lists per query, as
    `reciprocal_rank` + `fused_then_cosine` + a ranked top-k give it over whole chunks × B blocks:
    the first `depth` dense entries and the first `bm25_counts[q]` BM25 entries each give the float32
    1 / (k_rrf + rank), added in float32; listed chunks first by that sum, then the rest of the dense list
    by (cosine − 3) · 1e-6 (float64); equal scores in chunk-id order. `dense_ids`/`dense_vals` (B × D,
    best first) must reach k entries beyond the listed ones (D = k + depth is enough)."""
    n_queries = dense_ids.shape[0]
    listed = np.full(n_queries, min(depth, dense_ids.shape[1]), dtype=np.int64)
    ids, scores, counts = fuse_lists([(dense_ids, listed, 1.0), (bm25_ids, bm25_counts, 1.0)], k_rrf, k,
                                     tail=(dense_ids, dense_vals))
    k = min(k, int(counts.min())) if counts.size else 0
    return ids[:, :k], scores[:, :k]


def fuse_lists(lists: Sequence[tuple[np.ndarray, np.ndarray, float]], k_rrf: int, k: int,
               tail: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, scores, counts) on the host of the weighted reciprocal-rank fusion of ranked lists per query, as
    chunks × B blocks give it (`reciprocal_rank` of each list times its weight, added in the lists' order, then
    `fused_then_cosine` and a ranked top-k), without a block. Each list is (ids B × L best first, counts: the
    entries listed per query, weight): its first counts[q] entries give float32(weight) · float32(1 / (k_rrf +
    rank)), summed over the lists in float32, in their order. Listed chunks (a sum > 0) come first by that sum;
    then, with `tail` (ids and cosines B × D, best first), the tail's other chunks by (cosine − 3) · 1e-6 (float64);
    equal scores in chunk-id order. ids and scores are B × k' (k' ≤ k), -1 and 0 past each query's `counts[q]`
    entries. `tail` must reach k entries beyond the listed ones (D = k + the lists' depth is enough)."""
    n_queries = (lists[0][0] if lists else tail[0]).shape[0]
    width = max([ids.shape[1] for ids, _, _ in lists] + [1])
    contribution = (1.0 / (k_rrf + np.arange(1, width + 1, dtype=np.float32))).astype(np.float32)
    entries = []  # per list: (query, chunk, its float32 part)
    for ids, counts, weight in lists:
        listed = (np.arange(ids.shape[1])[None, :] < np.asarray(counts)[:, None]) & (ids >= 0)
        query, rank = np.nonzero(listed)
        entries.append((query.astype(np.int64), ids[listed].astype(np.int64),
                        (np.float32(weight) * contribution[rank]).astype(np.float32)))
    chunks = [chunk for _, chunk, _ in entries] + ([tail[0][tail[0] >= 0]] if tail is not None else [])
    n_all = int(max((c.max(initial=0) for c in chunks), default=0)) + 1
    keys = np.unique(np.concatenate([q * n_all + c for q, c, _ in entries] or [np.zeros(0, dtype=np.int64)]))
    total = np.zeros(keys.size, dtype=np.float32)
    for query, chunk, part in entries:  # a ranked list holds a chunk once: one float32 add per list
        at = np.searchsorted(keys, query * n_all + chunk)
        total[at] = total[at] + part
    keys, total = keys[total > 0], total[total > 0]
    all_query, all_chunk, all_score = keys // n_all, keys % n_all, total.astype(np.float64)
    if tail is not None:
        tail_ids, tail_vals = tail
        valid = tail_ids >= 0
        tail_query = np.nonzero(valid)[0].astype(np.int64)
        tail_chunk = tail_ids[valid].astype(np.int64)
        other = ~np.isin(tail_query * n_all + tail_chunk, keys)
        all_query = np.concatenate([all_query, tail_query[other]])
        all_chunk = np.concatenate([all_chunk, tail_chunk[other]])
        all_score = np.concatenate([all_score, (tail_vals[valid][other].astype(np.float64) - 3.0) * 1e-6])
    order = np.lexsort((all_chunk, -all_score, all_query))
    all_query, all_chunk, all_score = all_query[order], all_chunk[order], all_score[order]
    first = np.searchsorted(all_query, np.arange(n_queries + 1))
    position = np.arange(all_query.size) - first[all_query]
    counts = np.minimum(np.diff(first), k).astype(np.int64)
    width = int(counts.max(initial=0))
    top = position < k
    ids = np.full((n_queries, width), -1, dtype=np.int64)
    scores = np.zeros((n_queries, width), dtype=np.float64)
    ids[all_query[top], position[top]] = all_chunk[top]
    scores[all_query[top], position[top]] = all_score[top]
    return ids, scores, counts
