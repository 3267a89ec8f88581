"""The one-query paths of issue 24, item 6: BM25 from the postings gives today's scores bit for bit
(so rankings and ties are unchanged) whichever product a block takes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from gpu_tigrag.ops.fusion import (bm25_block_scores, bm25_postings_scores, bm25_scores, query_term_matrix,
                                   query_term_rows)


def _tied_bm25(chunks: int = 300, vocab: int = 120, seed: int = 0) -> scipy.sparse.csr_matrix:
    """A chunks × vocab BM25-like matrix whose weights take few values: many tied scores."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((chunks, vocab)) < 0.08, rng.choice([0.25, 0.5, 1.1, 2.3], (chunks, vocab)), 0)
    return scipy.sparse.csr_matrix(dense.astype(np.float32))


def _queries(vocab: int, n: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    queries = [rng.integers(0, vocab, rng.integers(1, 9)) for _ in range(n)]
    return queries + [np.array([3, 3, 7, 3]), np.zeros(0, dtype=np.int64)]  # repeats, and a query without tokens


def test_query_term_rows_is_the_transposed_matrix(backend):
    seeds = _queries(50, 20)
    rows = backend.to_host(query_term_rows(backend, seeds, 50))
    matrix = backend.to_host(query_term_matrix(backend, seeds, 50))
    assert (rows != matrix.T).nnz == 0
    assert rows.has_sorted_indices and rows.dtype == np.float32
    with pytest.raises(ValueError, match="token ids"):
        query_term_rows(backend, [np.array([50])], 50)


@pytest.mark.parametrize("block", [1, 3, 64])
def test_postings_scores_are_the_matrix_scores_bit_for_bit(block):
    from gpu_tigrag.backend import get_backend

    be = get_backend("numpy")
    bm25 = _tied_bm25()
    postings = bm25.T.tocsr()
    seeds = _queries(bm25.shape[1], 40)
    for start in range(0, len(seeds), block):
        part = seeds[start:start + block]
        want = bm25_scores(be, bm25, part, bm25.shape[1])
        for got in (bm25_postings_scores(be, postings, part, bm25.shape[1]),
                    bm25_block_scores(be, bm25, postings, part, bm25.shape[1])):
            assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_postings_scores_agree_on_every_backend(backend):
    bm25 = _tied_bm25(seed=2)
    seeds = _queries(bm25.shape[1], 10, seed=3)
    got = backend.to_host(bm25_postings_scores(backend, backend.csr(bm25.T.tocsr()), seeds, bm25.shape[1]))
    want = np.asarray((bm25 @ query_term_matrix(backend, seeds, bm25.shape[1]).get()
                       if backend.is_gpu else bm25 @ query_term_matrix(backend, seeds, bm25.shape[1])).todense())
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="token rows"):
        bm25_postings_scores(backend, backend.csr(bm25.T.tocsr()), seeds, bm25.shape[1] + 1)


def test_the_block_rule_takes_the_postings_for_one_query_and_the_matrix_for_a_wide_block(monkeypatch):
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.ops import fusion

    be = get_backend("numpy")
    bm25 = _tied_bm25()
    postings = bm25.T.tocsr()
    taken = []
    monkeypatch.setattr(fusion, "bm25_postings_scores", lambda *a, **k: taken.append("postings"))
    monkeypatch.setattr(fusion, "bm25_scores", lambda *a, **k: taken.append("matrix"))
    bm25_block_scores(be, bm25, postings, [np.array([1, 2])], bm25.shape[1])
    bm25_block_scores(be, bm25, postings, [np.arange(bm25.shape[1])] * 20, bm25.shape[1])
    assert taken == ["postings", "matrix"]


def test_the_bm25_baseline_ranks_as_before(example_index):
    """Bm25Retriever's rankings (ties included) are those of the matrix product it used before."""
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.methods.baselines.retriever import Bm25Retriever
    from gpu_tigrag.ops.topk import ranked_top_k

    index = example_index.index
    retriever = Bm25Retriever(index, backend="numpy")
    queries = ["Who directed The Glass Orchard?", "river city bridge", "the the the", "orchard orchard glass film"]
    be = get_backend("numpy")
    for block in (queries[:1], queries):
        got = retriever.retrieve(block, k=index.n_chunks)
        ids, vals = ranked_top_k(be, bm25_scores(be, be.csr(index.bm25), retriever.query_seeds(block), index.n_vocab),
                                 index.n_chunks)
        for q, result in enumerate(got):
            assert result.chunk_ids == [int(c) for c in ids[:, q]]
            assert result.scores == [float(v) for v in vals[:, q]]


def test_ppr_leaves_the_seed_block_unchanged(backend):
    """personalized_pagerank reads its seed block and never writes it: the same block given twice gives
    the same scores and sweeps (it used to be the iterate's spare buffer, so a second call started from
    a half-converged block)."""
    from gpu_tigrag.methods.tigrag.config import PPRConfig
    from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix

    rng = np.random.default_rng(4)
    w = scipy.sparse.random(80, 80, density=0.08, random_state=5, dtype=np.float32)
    w = (w + w.T).tocsr()
    transition = TransitionMatrix.from_adjacency(backend, w)
    v = seed_matrix(backend, [rng.integers(0, 80, 3) for _ in range(6)], 80)
    before = backend.to_host(v).copy()
    first, sweeps = personalized_pagerank(backend, transition, v, PPRConfig(tol=1e-6))
    first = backend.to_host(first).copy()
    assert sweeps > 2 and np.array_equal(backend.to_host(v), before)
    again, sweeps_again = personalized_pagerank(backend, transition, v, PPRConfig(tol=1e-6))
    assert sweeps_again == sweeps and np.array_equal(backend.to_host(again), first)
