import dataclasses

import numpy as np
import scipy.sparse

from gpu_tigrag.methods.tigrag.config import PPRConfig
from gpu_tigrag.ops.ppr import (TransitionMatrix, cpu_block_columns, personalized_pagerank, seed_matrix,
                                top_gamma)
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


def test_exact_ppr_columns_do_not_depend_on_their_batch_mates(backend):
    """Each column stops at its own converged sweep: alone, beside a slowly converging column, in any order and at
    any sync interval, a query's scores are bit for bit the same (a block-wide stop ran converged columns on)."""
    w = random_graph(n=60, seed=3)
    tm = TransitionMatrix.from_adjacency(backend, scipy.sparse.csr_matrix(w))
    cfg = PPRConfig(damping=0.85, tol=1e-4, max_iter=200)
    seed_sets = [np.array([0]), np.array([5, 9, 11, 20, 33]), np.array([2, 40]), np.array([], dtype=np.int64)]
    alone = [backend.to_host(personalized_pagerank(backend, tm, seed_matrix(backend, [s], w.shape[0]), cfg)[0])[:, 0]
             for s in seed_sets]
    sweeps = [personalized_pagerank(backend, tm, seed_matrix(backend, [s], w.shape[0]), cfg)[1] for s in seed_sets[:3]]
    assert len(set(sweeps)) > 1  # the columns converge at different sweeps: the case that mattered
    together, used = personalized_pagerank(backend, tm, seed_matrix(backend, seed_sets, w.shape[0]), cfg)
    assert used == max(sweeps)
    reversed_block, _ = personalized_pagerank(backend, tm, seed_matrix(backend, seed_sets[::-1], w.shape[0]), cfg)
    together, reversed_block = backend.to_host(together), backend.to_host(reversed_block)[:, ::-1]
    for j, column in enumerate(alone):
        np.testing.assert_array_equal(together[:, j], column)
        np.testing.assert_array_equal(reversed_block[:, j], column)
    class Deferring(type(backend)):  # a GPU's deferred reads, on this backend
        sync_interval = property(lambda self: 7)

    deferring = Deferring(**{f.name: getattr(backend, f.name) for f in dataclasses.fields(backend)})
    deferred, _ = personalized_pagerank(deferring, tm, seed_matrix(backend, seed_sets, w.shape[0]), cfg)
    np.testing.assert_array_equal(backend.to_host(deferred), together)


def test_blocks_of_columns_give_the_whole_batchs_scores_and_sweeps(backend):
    """The batch iterated in blocks of at most 1, 2, 3 or 5 columns (equal widths) gives the one block's scores bit
    for bit and its sweep count; the CPU's default width fits its budget and is a multiple of 16."""
    w = random_graph(n=60, seed=5)
    tm = TransitionMatrix.from_adjacency(backend, scipy.sparse.csr_matrix(w))
    cfg = PPRConfig(damping=0.85, tol=1e-4, max_iter=200)
    rng = np.random.default_rng(1)
    v = seed_matrix(backend, [rng.choice(60, size=rng.integers(1, 6)) for _ in range(11)], w.shape[0])
    whole, sweeps = personalized_pagerank(backend, tm, v, cfg, block_columns=11)
    for columns in (1, 2, 3, 5, None):
        scores, used = personalized_pagerank(backend, tm, v, cfg, block_columns=columns)
        np.testing.assert_array_equal(backend.to_host(scores), backend.to_host(whole))
        assert used == sweeps
    assert cpu_block_columns(37_055) == 48 and cpu_block_columns(18_133) == 112 and cpu_block_columns(10**7) == 32 and cpu_block_columns(100) % 16 == 0


def test_the_seed_blocks_give_the_dense_batchs_scores_top_gamma_and_gathers(backend):
    """`pagerank_of_seeds` iterates each block from its own seed columns and keeps the blocks apart: its scores,
    sweeps, top γ and gathered (node, query) scores are the dense `personalized_pagerank`'s bit for bit at every
    block width; a batch of no query has an empty top γ of the dense one's shape."""
    from gpu_tigrag.ops.ppr import pagerank_of_seeds
    from gpu_tigrag.ops.push_ppr import scores_at

    w = random_graph(n=60, seed=5)
    tm = TransitionMatrix.from_adjacency(backend, scipy.sparse.csr_matrix(w))
    cfg = PPRConfig(damping=0.85, tol=1e-4, max_iter=200)
    rng = np.random.default_rng(2)
    seeds = [rng.choice(60, size=rng.integers(0, 6)) for _ in range(11)]  # a query without seeds among them
    dense, sweeps = personalized_pagerank(backend, tm, seed_matrix(backend, seeds, 60), cfg, block_columns=11)
    ids, weights = top_gamma(backend, dense, 7)
    rows, cols = rng.integers(0, 60, 50), rng.integers(0, 11, 50)
    for columns in (1, 2, 3, 5, 11, None):
        blocked, used = pagerank_of_seeds(backend, tm, seeds, 60, cfg, block_columns=columns)
        assert used == sweeps
        np.testing.assert_array_equal(backend.to_host(blocked.dense(backend)), backend.to_host(dense))
        got_ids, got_weights = blocked.top_gamma(backend, 7)
        np.testing.assert_array_equal(backend.to_host(got_ids), backend.to_host(ids))
        np.testing.assert_array_equal(backend.to_host(got_weights), backend.to_host(weights))
        np.testing.assert_array_equal(backend.to_host(scores_at(backend, blocked, rows, cols)),
                                      backend.to_host(dense)[rows, cols])
    empty, _ = pagerank_of_seeds(backend, tm, [], 60, cfg)
    want = top_gamma(backend, seed_matrix(backend, [], 60), 7)
    assert [a.shape for a in empty.top_gamma(backend, 7)] == [a.shape for a in want]


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


# -- sparse PPR by forward push (tigrag.ppr.algorithm = "push") ------------------------------------------
import pytest  # noqa: E402

from gpu_tigrag.errors import TigragError  # noqa: E402
from gpu_tigrag.ops.push_ppr import PushGraph, push_pagerank, scores_at, seed_lists  # noqa: E402

PUSH_SEEDS = [np.array([0, 3]), np.array([5]), np.array([7, 1, 1]), np.array([], dtype=np.int64), np.array([7]),
              np.array([2, 9, 11, 30])]


def push(backend, w, seeds, support=64, **settings):
    cfg = PPRConfig(**{"damping": 0.6, "max_iter": 500, "algorithm": "push", **settings})
    return push_pagerank(backend, PushGraph.from_adjacency(backend, scipy.sparse.csr_matrix(w)), seeds, cfg, support)


@pytest.mark.parametrize("threshold", ["mass", "edges"])
@pytest.mark.parametrize("epsilon", [1e-2, 1e-4, 1e-7])
def test_push_is_a_lower_bound_with_l1_error_the_residual_left(backend, threshold, epsilon):
    """p ≤ PPR node by node; ||PPR − p||₁ = 1 − Σp (the residual's mass) < ε per touched node (per
    edge of the touched nodes under "edges"), for seeds on the isolated node 7 too (dangling rule)."""
    w = random_graph()
    result = push(backend, w, PUSH_SEEDS, push_epsilon=epsilon, push_threshold=threshold)
    x = backend.to_host(result.dense(backend))
    edges = np.maximum((w > 0).sum(axis=1), 1)
    for j, seeds in enumerate(PUSH_SEEDS):
        if not len(seeds):
            continue
        exact = direct_solve(w, seeds, 0.6)
        error = exact - x[:, j]
        assert error.min() > -1e-6
        assert abs(np.abs(error).sum() - (1 - x[:, j].sum())) < 1e-5
        touched = int(result.stats[j, 0])
        bound = epsilon * (edges.sum() if threshold == "edges" else touched)
        assert 0 < touched <= w.shape[0] and np.abs(error).sum() < bound + 1e-6
    assert result.stats[3].tolist() == [0, 0, 0]


def test_push_top_gamma_agrees_with_the_exact_iterate(backend):
    """Against the exact iterate's top-γ S (scores π) with R = 1 − Σp the push's residual mass: a node of S
    can lose its place only to one whose π is within R below it; where the sets agree the normalised
    weights differ by at most 2R / π(S) in L1; at a tiny ε they are the same."""
    w = random_graph(n=60, seed=4)
    seeds = [np.array([0, 3]), np.array([5]), np.array([7, 1]), np.array([10, 20, 30, 40])]
    tm = TransitionMatrix.from_adjacency(backend, scipy.sparse.csr_matrix(w))
    exact = backend.to_host(personalized_pagerank(backend, tm, seed_matrix(backend, seeds, 60),
                                                  PPRConfig(damping=0.6, tol=1e-9, max_iter=500))[0])
    exact_ids, exact_weights = (backend.to_host(a) for a in top_gamma(backend, backend.asarray(exact), 8))
    equal_sets = 0
    for epsilon in (1e-3, 1e-4, 1e-8):
        result = push(backend, w, seeds, push_epsilon=epsilon, top_gamma=8)
        ids, weights = (backend.to_host(a) for a in result.top_gamma(backend, 8))
        residual = 1 - backend.to_host(result.dense(backend)).sum(axis=0)
        for j in range(len(seeds)):
            ours, ref = set(ids[:, j].tolist()), set(exact_ids[:, j].tolist())
            lost, gained = exact[list(ref - ours), j], exact[list(ours - ref), j]
            assert not lost.size or lost.max() - gained.min() <= residual[j] + 1e-5
            if ours == ref:
                equal_sets += 1
                mine = dict(zip(ids[:, j].tolist(), weights[:, j].tolist()))
                l1 = sum(abs(mine[k] - v) for k, v in zip(exact_ids[:, j].tolist(), exact_weights[:, j].tolist()))
                assert l1 <= 2 * residual[j] / exact[list(ref), j].sum() + 1e-5
                if epsilon == 1e-8:
                    assert l1 < 1e-5
            else:
                assert epsilon > 1e-8
    assert equal_sets >= 10


def test_push_without_seeds_scores_nothing(backend):
    w = random_graph()
    result = push(backend, w, [np.array([], dtype=np.int64)] * 2, push_epsilon=1e-4, top_gamma=5)
    ids, weights = result.top_gamma(backend, 5)
    assert not backend.to_host(weights).any() and not backend.to_host(ids).any()
    assert not backend.to_host(result.dense(backend)).any() and not result.stats.any()
    assert push(backend, w, [], push_epsilon=1e-4).ids.shape == (0, 40)


def test_a_dangling_seed_sends_its_mass_back_to_the_seeds(backend):
    """Node 7 has no edge: alone it keeps all its mass; beside seed 1 it shares the restart."""
    w = random_graph()
    x = backend.to_host(push(backend, w, [np.array([7]), np.array([7, 1])], push_epsilon=1e-9).dense(backend))
    assert x[7, 0] == pytest.approx(1.0, abs=1e-6) and x[:, 0].sum() == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(x[:, 1], direct_solve(w, [7, 1], 0.6), atol=1e-6)


def test_a_push_query_ignores_its_batch_mates_and_the_batch_size(backend):
    """Every query's support is the same bits alone, in a batch, and in another order."""
    w = random_graph(n=120, seed=2, isolated=(3, 50))
    rng = np.random.default_rng(0)
    seeds = [rng.choice(120, size=rng.integers(0, 6), replace=True) for _ in range(23)]
    together = push(backend, w, seeds, push_epsilon=1e-5)
    order = rng.permutation(len(seeds))
    shuffled = push(backend, w, [seeds[i] for i in order], push_epsilon=1e-5)
    for j, seed in enumerate(seeds):
        alone = push(backend, w, [seed], push_epsilon=1e-5)
        k = int(np.nonzero(order == j)[0][0])
        for other, row in ((alone, 0), (shuffled, k)):
            assert np.array_equal(backend.to_host(other.ids[row]), backend.to_host(together.ids[j]))
            assert np.array_equal(backend.to_host(other.scores[row]), backend.to_host(together.scores[j]))
            assert np.array_equal(other.stats[row], together.stats[j])


def test_push_keeps_the_best_nodes_and_gathers_their_scores(backend):
    """A support of 6 keeps each query's 6 best nodes of the full push; `scores_at` reads them (0 elsewhere)
    as it reads a dense block."""
    w = random_graph()
    seeds = [np.array([0, 3]), np.array([5, 9])]
    full = backend.to_host(push(backend, w, seeds, push_epsilon=1e-6, support=40).dense(backend))
    small = push(backend, w, seeds, push_epsilon=1e-6, support=6, top_gamma=2)
    kept = backend.to_host(small.dense(backend))
    for j in range(2):
        best = np.argsort(-full[:, j], kind="stable")[:6]
        assert set(np.nonzero(kept[:, j])[0]) == set(best)
        np.testing.assert_array_equal(kept[best, j], full[best, j])
    rows, cols = np.array([0, 3, 39, 5, 0]), np.array([0, 0, 0, 1, 1])
    np.testing.assert_array_equal(backend.to_host(scores_at(backend, small, rows, cols)), kept[rows, cols])
    np.testing.assert_array_equal(backend.to_host(scores_at(backend, backend.asarray(kept), rows, cols)),
                                  kept[rows, cols])


def test_seed_lists_are_distinct_and_ascending_per_query():
    indptr, ids = seed_lists([np.array([5, 1, 5]), np.array([], dtype=np.int64), np.array([2])], 10)
    assert indptr.tolist() == [0, 2, 2, 3] and ids.tolist() == [1, 5, 2]


def test_push_settings_are_checked():
    import gpu_tigrag.config  # noqa: F401 - the settings tree names a setting by its --set path once it is loaded
    # (run alone, this module imports only the method's config: its errors then say PPRConfig.push_epsilon)

    for bad in ({"algorithm": "approx"}, {"push_epsilon": 0.0}, {"push_epsilon": float("nan")},
                {"push_threshold": "degree"}):
        with pytest.raises(TigragError, match="tigrag.ppr"):
            PPRConfig(**bad)
    assert (PPRConfig().algorithm, PPRConfig().push_threshold) == ("auto", "edges")  # auto: exact below 50k chunks


@pytest.mark.parametrize("name", ["paper", "best"])
def test_push_mode_retrieves_as_the_exact_iterate_at_a_tiny_epsilon(example_index, name):
    """Both presets through the retriever: with ε = 1e-10 the push's rankings are the exact mode's (its
    top-γ and weights agree to float precision), and bridge ranking reads the push's support."""
    from helpers import QUESTIONS

    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    results = {}
    for method in ("exact", "push"):
        config = preset_with(name, {"tigrag.ppr.algorithm": method, "tigrag.ppr.push_epsilon": 1e-10})
        retriever = Retriever(example_index.index, config, backend="numpy")
        assert (retriever.transition is None) == (method == "push")
        results[method] = retriever.retrieve(QUESTIONS, k=10)
    for exact, pushed in zip(results["exact"], results["push"]):
        assert pushed.chunk_ids == exact.chunk_ids
        np.testing.assert_allclose(pushed.scores, exact.scores, atol=1e-5)


def _sweep_by_columns(indptr, indices, data, x, v, coef, damping, held, out, delta):
    """The sweep as it was written before `neighbour_sums`: each column's running sum in memory, in edge order."""
    n, width = x.shape
    partial = np.zeros(width, dtype=np.float32)
    acc = np.empty(width, dtype=np.float32)
    for i in range(n):
        acc[:] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            for b in range(width):
                acc[b] += data[p] * x[indices[p], b]
        for b in range(width):
            value = x[i, b] if held[b] else damping * acc[b] + v[i, b] * coef[b]
            partial[b] += abs(value - x[i, b])
            out[i, b] = value
    delta[:] = partial


@pytest.mark.parametrize("width", [1, 15, 16, 17, 127, 128, 129, 200])
def test_the_sweeps_register_sums_are_the_column_loops_bits(width):
    """`neighbour_sums` keeps 128 columns of sums in vector registers and masks a row's last vector: every width
    across the vector and call boundaries gives the plain loop's bits (one fused multiply-add per edge, in
    edge order), rows without edges included. The loop runs under numba with the kernel's flags."""
    from numba import njit

    from gpu_tigrag.kernels.ppr import ROW_BLOCKS, ppr_sweep_cpu

    reference = njit(fastmath=True)(_sweep_by_columns)
    rng = np.random.default_rng(width)
    n = ROW_BLOCKS + 37  # rows over the kernel's row blocks, the last one short
    adjacency = scipy.sparse.random(n, n, density=0.05, random_state=width, dtype=np.float32, format="csr")
    adjacency[3] = 0  # a row without edges
    adjacency.eliminate_zeros()
    x = rng.random((n, width), dtype=np.float32)
    v = (rng.random((n, width)) < 0.02).astype(np.float32)
    coef = rng.random(width, dtype=np.float32)
    held = np.arange(width) % 5 == 4  # converged columns keep their iterate
    args = (adjacency.indptr, adjacency.indices, adjacency.data, x, v, coef, np.float32(0.5), held)
    out, delta = np.empty_like(x), np.empty(width, dtype=np.float32)
    want, want_delta = np.empty_like(x), np.empty(width, dtype=np.float32)
    ppr_sweep_cpu(*args, out, delta)
    reference(*args, want, want_delta)
    assert np.array_equal(out.view(np.int32), want.view(np.int32))
    assert np.array_equal(out[:, held], x[:, held]) and not delta[held].any()
    wide = np.empty_like(x)  # SciPy's int64 indices (large graphs) read as such
    ppr_sweep_cpu(adjacency.indptr.astype(np.int64), adjacency.indices.astype(np.int64), *args[2:], wide, delta)
    assert np.array_equal(wide.view(np.int32), want.view(np.int32))
    np.testing.assert_allclose(delta, want_delta, rtol=1e-5)  # the kernel adds its row blocks' partial sums
