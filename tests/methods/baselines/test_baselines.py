"""Baselines over the example corpus against plain per-query implementations."""

import numpy as np
import pytest

from helpers import EXAMPLES
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.evaluate.queries import load_queries
from gpu_tigrag.methods.baselines.retriever import HYBRID_DEPTH, HYBRID_RRF_K, HybridRetriever
from gpu_tigrag.methods.registry import method_available
from gpu_tigrag.retrieve.factory import make_retriever
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


@pytest.fixture(scope="module")
def synthetic_hybrid():
    """400 synthetic passages on a tiny vocabulary (many BM25 ties) with 8-dimensional stand-in vectors
    (many cosine ties): more chunks than HYBRID_DEPTH, so both lists are cut and the cosine tail matters."""
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.synth import passages

    corpus = list(passages(400, seed=3, vocab=6500))
    index = build_index(corpus, IndexConfig(encoder=EncoderConfig(model="hashing:8")),
                        entity_extractor=lambda texts: [[] for _ in texts])
    queries = [" ".join(p["text"].split()[3:9]) for p in corpus[:40]] + ["zzzz unknown words"]
    return index, queries


def block_hybrid(retriever, queries, k):
    """The fused chunks × B block the Hybrid baseline ranked before it stopped making one."""
    from gpu_tigrag.ops.dense_dot import query_dot
    from gpu_tigrag.ops.fusion import bm25_scores, fused_then_cosine, reciprocal_rank
    from gpu_tigrag.ops.topk import ranked_top_k

    be, batch = retriever.be, retriever.prepare(queries)
    dense = query_dot(be, retriever.device.embeddings, batch.vectors)
    bm25 = bm25_scores(be, retriever.device.bm25, batch.seeds, retriever.index.n_vocab)
    bm25 = be.xp.where(bm25 > 0, bm25, -np.inf).astype(be.xp.float32)
    fused = (reciprocal_rank(be, dense, HYBRID_DEPTH, HYBRID_RRF_K)
             + reciprocal_rank(be, bm25, HYBRID_DEPTH, HYBRID_RRF_K))
    ids, vals = ranked_top_k(be, fused_then_cosine(be, fused, dense), k)
    return be.to_host(ids).T, be.to_host(vals).T


@pytest.mark.parametrize("k", [5, 100, 150, 400])
def test_hybrid_without_a_block_gives_the_blocks_ranking_and_scores(synthetic_hybrid, backend, k):
    index, queries = synthetic_hybrid
    retriever = HybridRetriever(index, RetrievalConfig(method="hybrid"), backend=backend.name)
    ids, vals = block_hybrid(retriever, queries, k)
    for results in (retriever.retrieve(queries, k=k), [retriever.retrieve(q, k=k)[0] for q in queries[:7]]):
        for q, result in enumerate(results):
            assert result.chunk_ids == ids[q].tolist()
            np.testing.assert_array_equal(np.asarray(result.scores), vals[q])


def test_naiverag_does_not_tokenise_its_queries(example, monkeypatch):
    """NaiveRAG ranks by the vectors alone: its batches carry no token ids (no tokenising), its ranking is the
    cosine ranking."""
    from gpu_tigrag.methods.baselines.retriever import NaiveragRetriever

    index, queries = example
    retriever = NaiveragRetriever(index, RetrievalConfig(method="naiverag"), backend="numpy")
    monkeypatch.setattr(retriever, "query_seeds", lambda q: (_ for _ in ()).throw(AssertionError("tokenised")))
    batch = retriever.prepare(queries)
    assert all(seed.size == 0 for seed in batch.seeds) and len(batch.seeds) == len(queries)
    vectors = retriever.encoder.encode(queries, kind="query")
    for query, vector, result in zip(queries, vectors, retriever.retrieve(queries, k=8)):
        dense = index.embeddings @ vector
        assert result.chunk_ids == sorted(range(index.n_chunks), key=lambda i: (-dense[i], i))[:8], query
