"""Backend-generic score primitives over a block of queries (chunks × B on the backend).

* `reciprocal_rank`: each column's top `depth` entries get 1 / (k + rank), the rest 0, so
  scores of different scales (cosine, BM25, ρ) can be added (Cormack et al.'s RRF).
* `bm25_scores`: BM25 of each query's valid tokens, one sparse product for the whole block.
* `bm25_postings_scores`: the same scores from the vocab × chunks postings, costing the postings of
  the block's tokens instead of a pass over every chunk (the one-query path of the BM25 baseline);
  `bm25_block_scores` picks the product that reads fewer entries.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..backend import Backend
from .topk import top_k_rows

#: the score of an entry that is not ranked (float32, so masked blocks keep their dtype)
NEG_INF = np.float32(-np.inf)


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
