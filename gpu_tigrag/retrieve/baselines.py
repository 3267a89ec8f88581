"""Baselines over the same chunks and encoder: NaiveRAG (dense cosine) and BM25, batched."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .fusion import bm25_scores
from .retriever import Retriever


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
