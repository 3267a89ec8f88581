"""Baselines over the same chunks and encoder, batched: NaiveRAG (dense cosine), BM25, and Hybrid
(reciprocal-rank fusion of the two, SpectRAG's paper's strongest baseline)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..tigrag.fusion import bm25_scores, reciprocal_rank
from ..tigrag.retriever import Retriever

#: RRF of the Hybrid baseline: the constant k of 1 / (k + rank), and the ranks counted per list
HYBRID_RRF_K = 60
HYBRID_DEPTH = 100


def naive_rag(retriever: Retriever, queries: Sequence[str], k: int) -> np.ndarray:
    """Top-k chunk ids (B × k) by cosine between query and chunk embeddings over all chunks."""
    sims = retriever.embeddings @ retriever.encode(list(queries)).T
    ids, _ = retriever._topk(sims, k)
    return ids


def bm25_search(retriever: Retriever, queries: Sequence[str], k: int) -> np.ndarray:
    """Top-k chunk ids (B × k) by BM25 of the query's valid tokens (counted with multiplicity)."""
    seeds = retriever.query_seeds(queries)
    scores = bm25_scores(retriever.be, retriever.bm25, seeds, retriever.index.n_vocab)
    ids, _ = retriever._topk(scores, k)
    return ids


def hybrid_search(retriever: Retriever, queries: Sequence[str], k: int) -> np.ndarray:
    """Top-k chunk ids (B × k) by RRF of the dense cosine ranking and the BM25 ranking (chunks with a
    BM25 score of 0 are not in the BM25 list); chunks in neither list follow by cosine."""
    be, xp = retriever.be, retriever.be.xp
    dense = retriever.embeddings @ retriever.encode(list(queries)).T
    bm25 = bm25_scores(be, retriever.bm25, retriever.query_seeds(queries), retriever.index.n_vocab)
    bm25 = xp.where(bm25 > 0, bm25, -np.inf).astype(xp.float32)
    fused = reciprocal_rank(be, dense, HYBRID_DEPTH, HYBRID_RRF_K) + reciprocal_rank(be, bm25, HYBRID_DEPTH, HYBRID_RRF_K)
    # below every fused score (each > 0): the unlisted chunks keep their cosine order
    tail = (dense - 3.0) * 1e-6
    ids, _ = retriever._topk(xp.where(fused > 0, fused, tail).astype(xp.float32), k)
    return ids
