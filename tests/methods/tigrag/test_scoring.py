import numpy as np
import scipy.sparse

from gpu_tigrag.methods.tigrag.scoring import cumulative_mass_pool, ppr_weighted_bm25


def test_ppr_weighted_bm25_is_weighted_sum_over_expanded_tokens(backend):
    bm25 = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [4.0, 5.0, 0.0]], dtype=np.float32)
    ids = np.array([[0, 1], [2, 0]])  # γ = 2; query 0 keeps tokens {0, 2}, query 1 tokens {1, 0}
    weights = np.array([[0.75, 0.4], [0.25, 0.6]], dtype=np.float32)
    got = backend.to_host(ppr_weighted_bm25(
        backend, backend.csr(scipy.sparse.csr_matrix(bm25)), backend.asarray(ids), backend.asarray(weights)))
    expected = np.array([
        [0.75 * 1 + 0.25 * 2, 0.6 * 1],
        [0.0, 0.4 * 3],
        [0.75 * 4, 0.4 * 5 + 0.6 * 4],
    ])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_pool_stops_at_first_prefix_reaching_the_mass(backend):
    # column 0: sorted 5, 3, 1, 1 (total 10): cumulative 0.5, 0.8 -> th 0.8 keeps 2 chunks
    # column 1: th 0.8 of 4 + 4 + 2 = 10 -> 4 (0.4), 8 (0.8) -> both 4s; the 2 is out
    # column 2: nothing scored -> empty pool
    scores = np.array([[1, 4, 0], [5, 0, 0], [3, 4, 0], [1, 2, 0], [0, 0, 0]], dtype=np.float32)
    pool = backend.to_host(cumulative_mass_pool(backend, backend.asarray(scores), 0.8))
    assert pool[:, 0].tolist() == [False, True, True, False, False]
    assert pool[:, 1].tolist() == [True, False, True, False, False]
    assert not pool[:, 2].any()
    # th just above 0.8 needs the third chunk; equal scores at the cut are kept together
    pool = backend.to_host(cumulative_mass_pool(backend, backend.asarray(scores), 0.81))
    assert pool[:, 0].tolist() == [True, True, True, True, False]
    # zero-score chunks never enter, even at th = 1
    pool = backend.to_host(cumulative_mass_pool(backend, backend.asarray(scores), 1.0))
    assert pool[:, 0].tolist() == [True, True, True, True, False]


def test_pool_equals_the_axis0_formula_bit_for_bit(backend):
    """The transposed sort must cut exactly where sorting each column in place would."""
    def axis0_pool(scores, threshold):
        ordered = -np.sort(-scores, axis=0)
        cumulative = np.cumsum(ordered, axis=0)
        alpha = np.argmax(cumulative >= threshold * cumulative[-1:, :], axis=0)
        return (scores >= np.take_along_axis(ordered, alpha[None, :], axis=0)) & (scores > 0)

    rng = np.random.default_rng(3)
    scores = rng.gamma(0.3, 1.0, size=(5000, 70)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.6] = 0  # sparse columns, like ρ
    scores[:, 5] = 0  # a column with no candidate
    scores[:, 6] = np.float32(0.1) * (rng.integers(0, 3, 5000) > 0)  # ties everywhere
    for threshold in (0.1, 0.5, 0.8, 0.9, 1.0):
        got = backend.to_host(cumulative_mass_pool(backend, backend.asarray(scores), threshold))
        np.testing.assert_array_equal(got, axis0_pool(scores, threshold))
