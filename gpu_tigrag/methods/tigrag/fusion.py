"""Score fusion for the `best` preset, batched over a block of queries (chunks × B on the backend).

* `reciprocal_rank`: each column's top `depth` entries get 1 / (k + rank), the rest 0, so
  scores of different scales (cosine, BM25, ρ) can be added (Cormack et al.'s RRF).
* `hybrid_first_hop`: RRF of the dense cosine, BM25 and the graph score ρ, plus the chunks of
  the passages the question names; it picks the chunks whose entities drive the next hop.
* `link_mask`: chunks × B mask of the chunks of given passages per query (title links).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...backend import Backend
from ...ops.topk import top_k_rows
from .rerank import NEG_INF


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


def link_mask(be: Backend, passage_chunks: tuple[np.ndarray, np.ndarray], linked: Sequence[Sequence[int]],
              n_chunks: int) -> Any:
    """Bool chunks × B: True on every chunk of the passages linked to each query.

    `passage_chunks` is the (indptr, chunk ids) CSR from passage to its chunks."""
    indptr, chunk_ids = passage_chunks
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for j, passages in enumerate(linked):
        for p in passages:
            members = chunk_ids[indptr[p]:indptr[p + 1]]
            rows.append(members)
            cols.append(np.full(members.size, j, dtype=np.int64))
    mask = be.xp.zeros((n_chunks, len(linked)), dtype=bool)
    if rows:
        mask[be.asarray(np.concatenate(rows)), be.asarray(np.concatenate(cols))] = True
    return mask


def hybrid_first_hop(be: Backend, dense: Any, bm25: Any, rho: Any, question_links: Any | None,
                     depth: int, k: int) -> Any:
    """RRF of dense cosine, BM25 and ρ; the question's title-linked chunks, ordered by that fused
    score, form a fourth list counted twice (a named passage is the strongest first-hop evidence)."""
    xp = be.xp
    fused = (reciprocal_rank(be, dense, depth, k) + reciprocal_rank(be, bm25, depth, k)
             + reciprocal_rank(be, rho, depth, k))
    if question_links is not None and bool(question_links.any()):
        linked = xp.where(question_links, fused, NEG_INF)
        fused = fused + 2 * reciprocal_rank(be, linked, depth, k)
    return fused
