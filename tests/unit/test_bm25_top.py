"""BM25 top-k by MaxScore over the postings (kernels/bm25_top.py) against the exhaustive block:
the same chunks, the same float32 scores bit for bit, ties to the lowest chunk id, at every depth."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from gpu_tigrag.backend import get_backend
from gpu_tigrag.ops.fusion import _bm25_top_device, bm25_top, postings_max_weight


def _zipf_bm25(chunks: int, vocab: int, seed: int, tied: bool) -> scipy.sparse.csr_matrix:
    """chunks × vocab positive weights, tokens drawn by a Zipf law (a few tokens in most chunks, as
    common words are); `tied`: weights from four values, so many chunks share a score."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    rows, cols = [], []
    for c in range(chunks):
        tokens = np.unique(rng.choice(vocab, size=rng.integers(3, 30), p=p / p.sum()))
        rows.append(np.full(tokens.size, c))
        cols.append(tokens)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    values = rng.choice([0.25, 0.5, 1.1, 2.3], rows.size) if tied else rng.gamma(2.0, 0.7, rows.size) + 1e-3
    # one more token than drawn: the last token is in no chunk
    return scipy.sparse.csr_matrix((values.astype(np.float32), (rows, cols)), shape=(chunks, vocab + 1))


def _queries(vocab: int, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab) ** 0.8
    queries = [rng.choice(vocab - 1, size=rng.integers(1, 12), p=p / p.sum()) for _ in range(n)]
    # repeated tokens, a token in no chunk, no token at all, one very common token alone
    return queries + [np.array([3, 3, 7, 3]), np.array([vocab - 1]), np.zeros(0, dtype=np.int64), np.array([0])]


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("depth", [1, 3, 10, 100, 2000])
def test_maxscore_is_the_exhaustive_top_k_bit_for_bit(tied, depth):
    be = get_backend("numpy")
    bm25 = _zipf_bm25(1500, 400, seed=depth, tied=tied)
    postings = bm25.T.tocsr()
    seeds = _queries(bm25.shape[1], 120, seed=depth + 1)
    got = bm25_top(be, bm25, postings, postings_max_weight(bm25), seeds, bm25.shape[1], depth)
    want = _bm25_top_device(be, bm25, postings, None, seeds, bm25.shape[1], min(depth, bm25.shape[0]))
    for g, w, name in zip(got, want, ("ids", "scores", "counts")):
        assert g.shape == w.shape, name
        assert np.array_equal(g.view(np.int32) if g.dtype == np.float32 else g,
                              w.view(np.int32) if w.dtype == np.float32 else w), name
    ids, scores, counts = got
    assert counts[-2] == 0 and (ids[-2] == -1).all()  # the query without tokens lists nothing
    assert counts[-3] == 0  # its only token is in no chunk
    assert counts[-1] == min(depth, int((bm25[:, 0] > 0).sum()))


def test_the_batch_does_not_change_a_query_s_list():
    be = get_backend("numpy")
    bm25 = _zipf_bm25(800, 200, seed=5, tied=True)
    postings, weights = bm25.T.tocsr(), postings_max_weight(bm25)
    seeds = _queries(201, 60, seed=6)
    together = bm25_top(be, bm25, postings, weights, seeds, 201, 7)
    for q in (0, 17, len(seeds) - 1):
        alone = bm25_top(be, bm25, postings, weights, seeds[q:q + 1], 201, 7)
        for whole, one in zip(together, alone):
            assert np.array_equal(whole[q], one[0])


def test_max_weight_is_each_token_s_largest_weight():
    bm25 = scipy.sparse.csr_matrix(np.array([[0, 1.5, 0], [0.5, 2.0, 0]], dtype=np.float32))
    assert postings_max_weight(bm25).tolist() == [0.5, 2.0, 0.0]
    assert postings_max_weight(scipy.sparse.csr_matrix((0, 3), dtype=np.float32)).tolist() == [0.0, 0.0, 0.0]


def test_unsorted_postings_are_sorted_before_the_walk():
    be = get_backend("numpy")
    bm25 = _zipf_bm25(300, 50, seed=9, tied=False)
    postings = bm25.T.tocsr()
    order = np.concatenate([np.arange(a, b)[::-1] for a, b in zip(postings.indptr[:-1], postings.indptr[1:])])
    shuffled = scipy.sparse.csr_matrix((postings.data[order], postings.indices[order], postings.indptr),
                                       shape=postings.shape)
    shuffled.has_sorted_indices = False
    seeds = _queries(51, 30, seed=10)
    want = bm25_top(be, bm25, postings, postings_max_weight(bm25), seeds, 51, 5)
    got = bm25_top(be, bm25, shuffled, postings_max_weight(bm25), seeds, 51, 5)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_unscored_fill_is_the_lowest_unlisted_ids_in_order():
    """`fill_unscored` (one array pass) against a plain per-row rule: the lowest ids not listed, score 0."""
    from gpu_tigrag.methods.baselines.retriever import fill_unscored

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        width, batch = int(rng.integers(1, n + 1)), int(rng.integers(1, 8))
        counts = rng.integers(0, width + 1, batch)
        ids = np.full((batch, width), -1, dtype=np.int64)
        scores = np.zeros((batch, width), dtype=np.float32)
        for q in range(batch):
            ids[q, :counts[q]] = rng.choice(n, counts[q], replace=False)
            scores[q, :counts[q]] = rng.random(counts[q]) + 0.1
        want_ids, want_scores = ids.copy(), scores.copy()
        for q in range(batch):
            spare = [c for c in range(n) if c not in set(ids[q, :counts[q]].tolist())][:width - counts[q]]
            want_ids[q, counts[q]:] = spare
            want_scores[q, counts[q]:] = 0.0
        fill_unscored(ids, scores, counts)
        assert np.array_equal(ids, want_ids) and np.array_equal(scores, want_scores)
