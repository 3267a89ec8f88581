import math

import numpy as np

from gpu_tigrag.config import BM25Config
from gpu_tigrag.index.bm25 import bm25_matrix
from gpu_tigrag.index.graph import cooccurrence_graph


def dense(be, matrix):
    return be.to_host(matrix.toarray())


def test_cooccurrence_weights_hand_computed(backend):
    # one chunk, tokens a b c a d (ids 0 1 2 0 3), window w = 3
    # windows: [a b c] [b c a] [c a d]
    # pairs:   ab ac bc | bc ab ca | ca ad cd   (each distinct pair once per window)
    indptr = np.array([0, 5], dtype=np.int64)
    ids = np.array([0, 1, 2, 0, 3], dtype=np.int32)
    w = dense(backend, cooccurrence_graph(backend, indptr, ids, 4, window=3))
    expected = np.zeros((4, 4))
    for (p, q), count in {(0, 1): 2, (0, 2): 3, (1, 2): 2, (0, 3): 1, (2, 3): 1}.items():
        expected[p, q] = expected[q, p] = count
    np.testing.assert_array_equal(w, expected)


def test_short_chunks_form_one_window_and_counts_add_over_chunks(backend):
    # chunk 0: [a b] (shorter than w=4: one window), chunk 1: [a b a] (one window, ab once),
    # chunk 2: [c] (no pair), chunk 3: [] (empty)
    indptr = np.array([0, 2, 5, 6, 6], dtype=np.int64)
    ids = np.array([0, 1, 0, 1, 0, 2], dtype=np.int32)
    w = dense(backend, cooccurrence_graph(backend, indptr, ids, 3, window=4))
    assert w[0, 1] == w[1, 0] == 2
    assert w.sum() == 4 and np.all(np.diag(w) == 0)


def test_bm25_matches_formula(backend):
    # chunk 0: x x y ; chunk 1: y z ; chunk 2: z
    indptr = np.array([0, 3, 5, 6], dtype=np.int64)
    ids = np.array([0, 0, 1, 1, 2, 2], dtype=np.int32)
    cfg = BM25Config(k1=1.2, b=0.75)
    got = dense(backend, bm25_matrix(backend, indptr, ids, 3, cfg))
    n, avgdl, lengths = 3, 2.0, [3, 2, 1]
    tf = [{0: 2, 1: 1}, {1: 1, 2: 1}, {2: 1}]
    df = {0: 1, 1: 2, 2: 2}
    expected = np.zeros((3, 3))
    for c in range(3):
        for v, f in tf[c].items():
            idf = math.log(1 + (n - df[v] + 0.5) / (df[v] + 0.5))
            expected[c, v] = idf * f * (cfg.k1 + 1) / (f + cfg.k1 * (1 - cfg.b + cfg.b * lengths[c] / avgdl))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
