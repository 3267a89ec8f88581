import numpy as np
import scipy.sparse

from gpu_tigrag.methods.tigrag.config import PPRConfig
from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma
from gpu_tigrag.ops.topk import top_k_rows


def random_graph(n=40, seed=0, isolated=(7,)):
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < 0.15)
    w = np.triu(w, 1)
    w = w + w.T
    for i in isolated:
        w[i, :] = w[:, i] = 0
    return w.astype(np.float32)


def direct_solve(w, seeds, d):
    """x = (1-d) v + d (P x + v · dangling mass), solved as one linear system."""
    n = w.shape[0]
    deg = w.sum(axis=0)
    p = np.where(deg > 0, w / np.where(deg > 0, deg, 1), 0.0)
    v = np.zeros(n)
    v[list(set(seeds))] = 1.0 / len(set(seeds))
    dangling = (deg == 0).astype(float)
    a = np.eye(n) - d * (p + np.outer(v, dangling))
    return np.linalg.solve(a, (1 - d) * v)


def test_batched_ppr_equals_direct_linear_solve(backend):
    w = random_graph()
    seed_sets = [np.array([0, 3]), np.array([5]), np.array([7, 1, 1]), np.array([], dtype=np.int64)]
    cfg = PPRConfig(damping=0.6, tol=1e-7, max_iter=500)
    tm = TransitionMatrix.from_adjacency(backend, scipy.sparse.csr_matrix(w))
    x, iters = personalized_pagerank(backend, tm, seed_matrix(backend, seed_sets, w.shape[0]), cfg)
    x = backend.to_host(x)
    assert iters < 500
    for j, seeds in enumerate(seed_sets[:3]):
        np.testing.assert_allclose(x[:, j], direct_solve(w, seeds, cfg.damping), atol=2e-6)
        assert abs(x[:, j].sum() - 1.0) < 1e-5
    assert np.all(x[:, 3] == 0)  # no seed, no mass


def test_top_gamma_is_sorted_subset_and_l1_normalised(backend):
    scores = backend.asarray(np.array([[0.1, 0.0], [0.5, 0.0], [0.2, 0.3], [0.0, 0.0]], dtype=np.float32))
    ids, weights = top_gamma(backend, scores, 2)
    ids, weights = backend.to_host(ids), backend.to_host(weights)
    assert set(ids[:, 0]) == {1, 2}
    np.testing.assert_allclose(sorted(weights[:, 0]), [0.2 / 0.7, 0.5 / 0.7], rtol=1e-6)
    # column 1 reaches one node: it gets all the weight, the other slot none
    assert weights[:, 1].sum() == 1.0 and sorted(weights[:, 1]) == [0.0, 1.0]


def test_top_k_rows_breaks_ties_at_the_cut_by_lowest_id(backend):
    xp = backend.xp
    scores = xp.asarray(np.array([[1, 5, 0], [3, 3, 0], [3, 3, 0], [3, 3, 2], [5, 1, 1]], dtype=np.float32))
    ids = backend.to_host(top_k_rows(backend, scores, 2))
    assert ids[:, 0].tolist() == [1, 4] and ids[:, 1].tolist() == [0, 1] and ids[:, 2].tolist() == [3, 4]
    many = np.zeros((200, 3), dtype=np.float32)
    many[::7] = 1.0  # 29 tied rows per column, far more than k
    ids = backend.to_host(top_k_rows(backend, xp.asarray(many), 5))
    assert (ids == np.array([0, 7, 14, 21, 28])[:, None]).all()
    assert backend.to_host(top_k_rows(backend, scores, 9)).tolist() == [[0] * 3, [1] * 3, [2] * 3, [3] * 3, [4] * 3]


def test_top_k_rows_equals_a_stable_full_sort_on_random_ties(backend):
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 6, size=(300, 37)).astype(np.float32)  # heavy ties everywhere
    for k in (1, 7, 100, 299):
        expected = np.sort(np.argsort(-scores, axis=0, kind="stable")[:k], axis=0)
        got = backend.to_host(top_k_rows(backend, backend.xp.asarray(scores), k))
        np.testing.assert_array_equal(got, expected)
