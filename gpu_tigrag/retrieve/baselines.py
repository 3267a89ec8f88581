"""Baselines over the same chunks and encoder: NaiveRAG (dense cosine) and BM25, batched."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .retriever import Retriever


def naive_rag(retriever: Retriever, queries: Sequence[str], k: int) -> np.ndarray:
    """Top-k chunk ids (B × k) by cosine between query and chunk embeddings over all chunks."""
    sims = retriever.embeddings @ retriever.encode(list(queries)).T
    ids, _ = retriever._topk(sims, k)
    return ids


def bm25_search(retriever: Retriever, queries: Sequence[str], k: int) -> np.ndarray:
    """Top-k chunk ids (B × k) by BM25 of the query's valid tokens (counted with multiplicity)."""
    be = retriever.be
    seeds = retriever.query_seeds(queries)
    counts = np.zeros((retriever.index.n_vocab, len(seeds)), dtype=np.float32)
    for j, ids in enumerate(seeds):
        np.add.at(counts[:, j], ids, 1.0)
    scores = retriever.bm25 @ be.asarray(counts)
    ids, _ = retriever._topk(be.xp.asarray(scores), k)
    return ids
