"""Baselines over the example corpus against plain per-query implementations."""

import numpy as np
import pytest

from conftest import EXAMPLES
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.evaluate.queries import load_queries
from gpu_tigrag.methods.baselines.retriever import HYBRID_DEPTH, HYBRID_RRF_K, HybridRetriever
from gpu_tigrag.methods.registry import make_retriever, method_available
from gpu_tigrag.methods.tigrag.retriever import Retriever


@pytest.fixture(scope="module")
def example(example_index):
    return example_index.index, [q.text for q in load_queries(EXAMPLES / "questions.json")]


def plain_hybrid(retriever, query: str, k: int) -> list[int]:
    """RRF of the cosine ranking and the ranking of chunks with BM25 > 0, one query at a time."""
    index = retriever.index
    dense = index.embeddings @ retriever.encoder.encode([query], kind="query")[0]
    tokens = retriever.query_seeds([query])[0]
    bm25 = np.asarray(index.bm25[:, tokens].sum(axis=1)).ravel() if tokens.size else np.zeros(index.n_chunks)
    fused = {}
    for scores, keep in ((dense, np.ones(index.n_chunks, bool)), (bm25, bm25 > 0)):
        order = sorted((i for i in range(index.n_chunks) if keep[i]), key=lambda i: (-scores[i], i))[:HYBRID_DEPTH]
        for rank, i in enumerate(order, start=1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (HYBRID_RRF_K + rank)
    listed = sorted(fused, key=lambda i: (-fused[i], i))
    rest = sorted((i for i in range(index.n_chunks) if i not in fused), key=lambda i: (-dense[i], i))
    return (listed + rest)[:k]


def test_hybrid_is_rrf_of_dense_and_bm25_then_cosine(example):
    index, queries = example
    retriever = HybridRetriever(index, RetrievalConfig(method="hybrid"), backend="numpy")
    got = [r.chunk_ids for r in retriever.retrieve(queries, k=12)]
    for row, query in zip(got, queries):
        assert list(row) == plain_hybrid(retriever, query, 12)


def test_make_retriever_dispatches_on_the_method(example):
    index, _ = example
    assert isinstance(make_retriever(index, RetrievalConfig(), backend="numpy"), Retriever)
    assert method_available(index, "tigrag") and not method_available(index, "spectrag")
