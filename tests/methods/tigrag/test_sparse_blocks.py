"""Sparse score blocks (issue 24): each operation of `ops.sparse_scores` against its dense counterpart
on random blocks with ties, and TIGRAG with `tigrag.blocks="sparse"` against the dense reference on
the example corpus: the same rankings for both presets, whatever the batch size."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from gpu_tigrag.backend import get_backend
from gpu_tigrag.methods.tigrag.scoring import cumulative_mass_pool
from gpu_tigrag.ops import sparse_scores as sparse
from gpu_tigrag.ops.fusion import reciprocal_rank
from gpu_tigrag.ops.topk import best_of_each_group, ranked_top_k


def random_block(seed: int, n: int = 400, queries: int = 7, density: float = 0.08) -> np.ndarray:
    """A chunks × B block with ties (two decimals), zeros, and one query without any score."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n, queries)) < density, np.round(rng.random((n, queries)), 2) + 0.01, 0)
    dense[:, 2] = 0
    return dense.astype(np.float32)


def as_sparse(backend, dense: np.ndarray) -> sparse.SparseScores:
    return sparse.from_csr(backend, backend.csr(scipy.sparse.csr_matrix(dense.T)))


def as_dense(backend, block: sparse.SparseScores, n: int, fill: float) -> np.ndarray:
    out = np.full((n, block.n_queries), fill, dtype=np.float32)
    out[backend.to_host(block.chunks), backend.to_host(block.rows)] = backend.to_host(block.scores)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [0.3, 0.8, 1.0])
def test_pool_is_the_dense_pool(backend, seed, threshold):
    dense = random_block(seed)
    pool = sparse.cumulative_mass_pool(backend, as_sparse(backend, dense), threshold)
    expected = backend.to_host(cumulative_mass_pool(backend, backend.asarray(dense), threshold))
    assert (as_dense(backend, pool, dense.shape[0], 0) > 0).tolist() == expected.tolist()


def test_pool_of_a_query_does_not_depend_on_its_batch_mates(backend):
    """Batch-mates with a million times the mass come first in the batch's one cumulative sum."""
    dense = random_block(1)
    batch = np.concatenate([random_block(2) * np.float32(1e6), dense], axis=1)
    pooled = sparse.cumulative_mass_pool(backend, as_sparse(backend, batch), 0.8)
    for q in range(dense.shape[1]):
        alone = sparse.cumulative_mass_pool(backend, as_sparse(backend, dense[:, [q]]), 0.8)
        in_batch = backend.to_host(pooled.chunks)[backend.to_host(pooled.rows) == q + 7]
        assert in_batch.tolist() == backend.to_host(alone.chunks).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_ranking_operations_match_the_dense_ones(backend, seed):
    dense = random_block(seed)
    n = dense.shape[0]
    block = as_sparse(backend, dense)
    ranked = np.where(dense > 0, dense, -np.inf).astype(np.float32)

    ids, vals = (backend.to_host(a) for a in ranked_top_k(backend, backend.asarray(ranked), 25))
    got_ids, got_vals = sparse.top_k(backend, block, 25)
    finite = np.isfinite(vals.T)
    assert got_ids.tolist() == np.where(finite, ids.T, -1).tolist()
    assert got_vals.tolist() == np.where(finite, vals.T, -np.inf).tolist()

    rr = backend.to_host(reciprocal_rank(backend, backend.asarray(ranked), 15, 60))
    assert np.array_equal(as_dense(backend, sparse.reciprocal_rank(backend, block, 15, 60), n, 0), rr)

    groups = np.random.default_rng(seed).integers(0, 90, n)
    order = np.argsort(groups, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(groups, minlength=90))])
    best = backend.to_host(best_of_each_group(backend, backend.asarray(ranked), backend.asarray(indptr),
                                              backend.asarray(order)))
    got = sparse.best_of_each_group(backend, block, backend.asarray(groups))
    assert np.array_equal(as_dense(backend, got, n, -np.inf), best)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("limit", [1, 3, 10])
def test_a_ranking_below_a_limit_sorts_fewer_entries_for_the_same_ranks(backend, seed, limit):
    """`ranking(limit=…)` (the CPU sorts only the entries that can rank below the limit) gives the entries ranked
    below it in the same order as the full sort: ties (one decimal), −inf entries and short rows included."""
    dense = np.round(random_block(seed, n=600, density=0.5), 1)
    dense[::7, 4] = -np.inf
    dense[5:, 6] = 0  # a row of five entries at most
    block = sparse.from_entries(backend, *(backend.asarray(a) for a in np.nonzero(dense.T)),
                                backend.asarray(dense.T[np.nonzero(dense.T)]), dense.shape[1])
    full_order, full_rank = (backend.to_host(a) for a in sparse.ranking(backend, block))
    order, rank = (backend.to_host(a) for a in sparse.ranking(backend, block, limit=limit))
    assert order[rank < limit].tolist() == full_order[full_rank < limit].tolist()
    assert rank[rank < limit].tolist() == full_rank[full_rank < limit].tolist()
    if not backend.is_gpu:
        assert order.size < full_order.size  # the shortlist ran
    ranked = np.where(dense != 0, dense, -np.inf).astype(np.float32)
    ids, vals = (backend.to_host(a) for a in ranked_top_k(backend, backend.asarray(ranked), limit))
    got_ids, got_vals = sparse.top_k(backend, block, limit)
    finite = np.isfinite(vals.T)
    assert got_ids.tolist() == np.where(finite, ids.T, -1).tolist()
    assert got_vals.tolist() == np.where(finite, vals.T, -np.inf).tolist()


def test_merges_and_lookups(backend):
    a, b = random_block(7), random_block(8)
    sa, sb = as_sparse(backend, a), as_sparse(backend, b)
    assert np.array_equal(as_dense(backend, sparse.concat(backend, [sa, sb], "max"), 400, 0), np.maximum(a, b))
    np.testing.assert_allclose(as_dense(backend, sparse.concat(backend, [sa, sb], "sum"), 400, 0), a + b, rtol=1e-6)
    rng = np.random.default_rng(0)
    rows, chunks = rng.integers(0, 7, 200), rng.integers(0, 400, 200)
    got = backend.to_host(sparse.lookup(backend, sa, rows, chunks))
    assert got.tolist() == np.where(a[chunks, rows] > 0, a[chunks, rows], -np.inf).tolist()
    moved = sparse.remap_rows(backend, sa, np.array([0, 2, 3, 5, 8, 9, 11]), 12)
    assert as_dense(backend, moved, 400, 0)[:, [0, 2, 3, 5, 8, 9, 11]].tolist() == a.tolist()


def test_gather_dot_is_the_dense_product(backend):
    rng = np.random.default_rng(2)
    embeddings, vectors = rng.standard_normal((300, 16), dtype=np.float32), rng.standard_normal((5, 16), dtype=np.float32)
    chunks, owners = rng.integers(0, 300, 1000), rng.integers(0, 5, 1000)
    got = backend.to_host(sparse.gather_dot(backend, backend.asarray(embeddings), backend.asarray(vectors),
                                            backend.asarray(chunks), backend.asarray(owners), slice_entries=97))
    np.testing.assert_allclose(got, (embeddings @ vectors.T)[chunks, owners], rtol=1e-5, atol=1e-6)


def test_cosine_spread_is_the_std_over_every_chunk(backend):
    from types import SimpleNamespace

    from gpu_tigrag.methods.tigrag.sparse_blocks import cosine_spread
    from gpu_tigrag.retrieve.device import DeviceIndex

    rng = np.random.default_rng(4)
    embeddings = rng.normal(0.3, 0.1, (2000, 24)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    queries = embeddings[:6] + 0.01
    device = DeviceIndex(SimpleNamespace(embeddings=embeddings), backend)
    got = backend.to_host(cosine_spread(backend, device, backend.asarray(queries)))
    np.testing.assert_allclose(got, (embeddings @ queries.T).std(axis=0), rtol=1e-4)


# -- the retriever -------------------------------------------------------------------------------
QUESTIONS = ["Who directed The Glass Orchard?", "Where was the director of The Glass Orchard born?",
             "Korvath lighthouse", "?? !!", "film director born in a harbour town", "Winter Tide thriller",
             "Mirela Vantz", "Which film did Oskar Helm direct, and where was he born?"]


@pytest.mark.parametrize("preset_name", ["paper", "best"])
@pytest.mark.parametrize("ppr", ["exact", "push"])
def test_sparse_blocks_rank_as_the_full_blocks(example_index, backend, preset_name, ppr):
    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    index = example_index.index
    results = {}
    for blocks in ("full", "sparse"):
        config = preset_with(preset_name, {"tigrag.blocks": blocks, "tigrag.ppr.algorithm": ppr})
        retriever = Retriever(index, config, backend=backend)
        results[blocks] = retriever.retrieve(QUESTIONS, k=8)
    for dense, sparse_result in zip(results["full"], results["sparse"]):
        assert sparse_result.chunk_ids == dense.chunk_ids, dense.query
        np.testing.assert_allclose(sparse_result.scores, dense.scores, rtol=1e-5, atol=1e-6)
        assert [h.top_chunks for h in sparse_result.hops] == [h.top_chunks for h in dense.hops]
        assert [h.pool_size for h in sparse_result.hops] == [h.pool_size for h in dense.hops]
        assert sparse_result.dense_fallback == dense.dense_fallback


def test_sparse_rankings_do_not_depend_on_the_batch(example_index, backend):
    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    config = preset_with("best", {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"})
    retriever = Retriever(example_index.index, config, backend=backend)
    together = retriever.retrieve(QUESTIONS, k=8)
    alone = [retriever.retrieve([q], k=8)[0] for q in reversed(QUESTIONS)][::-1]
    assert [r.chunk_ids for r in together] == [r.chunk_ids for r in alone]
    assert [r.scores for r in together] == [r.scores for r in alone]


def test_sparse_blocks_make_the_cosine_covariance_before_any_batch(example_index):
    """`best`'s bonuses in cosine-spread units need the passage vectors' covariance (2.8 s at 1.29M chunks): it is
    made with the blocks' other per-index arrays, once, so no batch pays for it; `paper` makes none."""
    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with
    from gpu_tigrag.retrieve.device import DeviceIndex

    index = example_index.index
    device = DeviceIndex.of(index, get_backend("numpy"))
    device._arrays.pop("tigrag.embedding_covariance", None)
    Retriever(index, preset_with("paper", {"tigrag.blocks": "sparse"}), backend="numpy")
    assert "tigrag.embedding_covariance" not in device._arrays
    before = device.prepared["tigrag.embedding_covariance"]
    retriever = Retriever(index, preset_with("best", {"tigrag.blocks": "sparse"}), backend="numpy")
    assert device.prepared["tigrag.embedding_covariance"] == before + 1
    retriever.retrieve(QUESTIONS, k=5)
    assert device.prepared["tigrag.embedding_covariance"] == before + 1


def test_sparse_memory_plan_follows_the_candidates_met(example_index):
    """The sparse blocks size a batch from the most candidates a query has had, not from the corpus."""
    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    retriever = Retriever(example_index.index, preset_with("paper", {"tigrag.blocks": "sparse"}), backend="numpy")
    retriever.blocks.entries_per_query = 0
    retriever.retrieve(QUESTIONS, k=5)
    met = retriever.blocks.entries_per_query
    assert 0 < met <= example_index.index.n_chunks
    retriever.blocks.entries_per_query = 2 * met
    doubled = retriever.blocks.bytes_per_query()
    retriever.blocks.entries_per_query = met
    assert doubled == 2 * retriever.blocks.bytes_per_query()  # proportional to the candidates, whatever the corpus


@pytest.mark.parametrize("pool_max, depth", [(0, 0), (5, 0), (40, 0), (5, 12), (0, 30)])
@pytest.mark.parametrize("seed", range(5))
def test_pool_kernel_and_batch_sorts_agree(seed, pool_max, depth):
    """kernels/row_pool.py (the CPU's per-row sorts) and the batch-wide sorts the GPU runs give the same
    ranks and pools, on rows with ties, zeros and no entry, with indices in any order."""
    from gpu_tigrag.backend import get_backend

    be = get_backend("numpy")
    dense = random_block(seed, n=300, queries=9, density=0.3).T  # B × chunks
    matrix = scipy.sparse.csr_matrix(dense)
    shuffled = matrix.copy()
    rng = np.random.default_rng(seed)
    for r in range(shuffled.shape[0]):  # unsorted indices within rows, as a sparse product may leave them
        a, b = shuffled.indptr[r], shuffled.indptr[r + 1]
        perm = rng.permutation(b - a) + a
        shuffled.indices[a:b], shuffled.data[a:b] = shuffled.indices[perm], shuffled.data[perm]
    shuffled.has_sorted_indices = False
    kind_rows, pooled_rows = sparse._pool_entries_rows(be, shuffled, 0.8, pool_max, depth)
    order = np.lexsort((shuffled.indices, np.repeat(np.arange(9), np.diff(shuffled.indptr))))
    sorted_copy = shuffled.copy()
    kind_sorted, pooled_sorted = sparse._pool_entries_sorted(be, sorted_copy, 0.8, pool_max, depth)
    assert pooled_rows.tolist() == pooled_sorted.tolist()
    assert kind_rows[order].tolist() == kind_sorted.tolist()
    expected = cumulative_mass_pool(be, dense.T.copy(), 0.8).sum(axis=0)
    assert pooled_rows.tolist() == (np.minimum(expected, pool_max) if pool_max else expected).tolist()
    listed = np.bincount(np.repeat(np.arange(9), np.diff(shuffled.indptr))[kind_rows > 0], minlength=9)
    positives = (dense > 0).sum(axis=1)
    assert listed.tolist() == np.maximum(pooled_rows, np.minimum(depth, positives)).tolist()


def test_gather_max_dot_costs_each_entry_its_own_count_and_ignores_its_batch_mates():
    """Each entry's best dot over its own vectors (−inf with none), across slices; an entry's value is the same
    bits alone as among entries with many more vectors (issue 33: the work was entries × the slice's largest count)."""
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.ops.sparse_scores import gather_max_dot

    be = get_backend("numpy")
    rng = np.random.default_rng(3)
    embeddings = rng.standard_normal((50, 16)).astype(np.float32)
    vectors = rng.standard_normal((40, 16)).astype(np.float32)
    chunks = rng.integers(0, 50, 300)
    counts = rng.choice([0, 1, 2, 9], 300)
    first = rng.integers(0, 30, 300)
    got = gather_max_dot(be, embeddings, vectors, chunks, first, counts, slice_entries=7)
    for i in range(300):
        if counts[i] == 0:
            assert got[i] == -np.inf
        else:
            expected = max(float(embeddings[chunks[i]] @ vectors[first[i] + r]) for r in range(counts[i]))
            assert got[i] == pytest.approx(expected, rel=1e-5, abs=1e-5)
            alone = gather_max_dot(be, embeddings, vectors, chunks[i:i + 1], first[i:i + 1], counts[i:i + 1])
            assert alone[0] == got[i]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 4, 30])
def test_the_cpu_top_k_heap_is_the_sort(seed, k):
    """`top_k` on the CPU (a heap per query, kernels/entry_top.py) against the ranking's sort: ties of one
    decimal, −0.0 beside 0.0, −inf and +inf entries, rows shorter than k, entries of a row in any chunk order."""
    be = get_backend("numpy")
    rng = np.random.default_rng(seed)
    n_queries, n = 9, 400
    rows = np.sort(rng.integers(0, n_queries - 1, 3000))  # the last query has no entry
    chunks = rng.integers(0, n, rows.size)
    keys = np.unique(rows * n + chunks)
    rows, chunks = keys // n, keys % n
    scores = np.round(rng.standard_normal(rows.size), 1).astype(np.float32)
    scores[::13] = -0.0
    scores[::17] = -np.inf
    scores[::53] = np.inf
    block = sparse.SparseScores(rows, chunks, scores, n_queries)
    expected = sparse._ranked_top_k(be, block, k)
    got = sparse.top_k(be, block, k)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    shuffled = np.lexsort((rng.random(rows.size), rows))  # grouped by query, chunks in no order
    got = sparse.top_k(be, sparse.SparseScores(rows[shuffled], chunks[shuffled], scores[shuffled], n_queries), k)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_csr_top_k_reads_unsorted_rows_as_the_sorted_block():
    """`csr_top_k` of a product whose rows are unsorted (scipy's sparse products) is `top_k(from_csr(...))`."""
    be = get_backend("numpy")
    left = scipy.sparse.random(12, 40, density=0.2, random_state=1, dtype=np.float32, format="csr")
    right = scipy.sparse.random(40, 500, density=0.05, random_state=2, dtype=np.float32, format="csr")
    right.data = np.round(right.data, 1)  # ties
    product = (left @ right).tocsr()
    rows = np.repeat(np.arange(12), np.diff(product.indptr))
    order = np.lexsort((np.random.default_rng(7).random(product.nnz), rows))  # each row shuffled, as a product leaves it
    product = scipy.sparse.csr_matrix((product.data[order], product.indices[order], product.indptr), shape=product.shape)
    for k in (1, 5, 60):
        expected = sparse.top_k(be, sparse.from_csr(be, product.copy()), k)
        got = sparse.csr_top_k(be, product, k)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
