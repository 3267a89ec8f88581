"""LiteSemRAG's co-occurrence sums (step 3): the CPU kernel (kernels/shared_chunks.py) against a plain count and
against the sparse products the GPU keeps, with repeated prototypes, more than 64 nodes in a query, and queries
of no, one or unrelated nodes."""

import math

import numpy as np
import scipy.sparse

from gpu_tigrag.kernels.shared_chunks import shared_chunk_sums


def random_postings(n_protos: int, n_chunks: int, seed: int) -> scipy.sparse.csr_matrix:
    """Prototypes × chunks, 0/1, rows of very different lengths (a few common prototypes), some empty."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for p in range(n_protos):
        size = 0 if p % 17 == 5 else int(min(n_chunks, rng.zipf(1.6)))
        chunks = rng.choice(n_chunks, size=size, replace=False)
        rows += [p] * size
        cols += chunks.tolist()
    return scipy.sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n_protos, n_chunks))


def plain_sums(postings: scipy.sparse.csr_matrix, protos: np.ndarray, node_ptr: np.ndarray) -> np.ndarray:
    """The sums by sets, terms added in node order."""
    df = np.diff(postings.indptr).astype(np.float64)
    chunks = [set(postings.indices[postings.indptr[p]:postings.indptr[p + 1]].tolist()) for p in protos]
    out = np.zeros(protos.size)
    for q in range(node_ptr.size - 1):
        nodes = range(node_ptr[q], node_ptr[q + 1])
        for a in nodes:
            total = 0.0
            for b in nodes:
                shared = len(chunks[a] & chunks[b])
                if a != b and shared:
                    total += shared / math.sqrt(max(df[protos[a]] * df[protos[b]], 1.0))
            out[a] = total
    return out


def sparse_sums(postings: scipy.sparse.csr_matrix, protos: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The sums as the GPU's form gives them: one product of per-query columns."""
    n = protos.size
    chosen = (scipy.sparse.csr_matrix((np.ones(n), (np.arange(n), protos)), shape=(n, postings.shape[0]))
              @ postings).tocoo()
    _, column = np.unique(queries[chosen.row] * postings.shape[1] + chosen.col, return_inverse=True)
    own = scipy.sparse.csr_matrix((chosen.data, (chosen.row, column.ravel())), shape=(n, column.max() + 1))
    shared = (own @ own.T).tocoo()
    keep = shared.row != shared.col
    df = np.diff(postings.indptr).astype(np.float64)[protos]
    a, b = shared.row[keep], shared.col[keep]
    return np.bincount(a, weights=shared.data[keep] / np.sqrt(np.maximum(df[a] * df[b], 1.0)), minlength=n)


def test_the_kernel_counts_every_shared_chunk():
    postings = random_postings(300, 2000, seed=0)
    rng = np.random.default_rng(1)
    sizes = [0, 1, 2, 5, 64, 65, 150, 3, 0, 12]  # no node, one, two words' worth, and more than one 64-node pass
    queries = np.repeat(np.arange(len(sizes)), sizes)
    protos = rng.integers(0, 300, size=queries.size)
    protos[10:14] = protos[9]  # one prototype matched five times in a query: each pair shares all its chunks
    node_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    got = shared_chunk_sums(postings.indptr, postings.indices, protos, node_ptr, np.diff(postings.indptr), 2000)
    np.testing.assert_array_equal(got, plain_sums(postings, protos, node_ptr))  # same terms, same order: same bits
    np.testing.assert_allclose(got, sparse_sums(postings, protos, queries), rtol=1e-12, atol=0)
    assert (got[node_ptr[1]:node_ptr[2]] == 0).all()  # a lone node is isolated
    repeated = protos[9]
    if np.diff(postings.indptr)[repeated] > 0:
        assert got[9] > 0


def test_nodes_without_chunks_and_no_nodes():
    postings = scipy.sparse.csr_matrix((3, 10), dtype=np.float32)
    protos = np.array([0, 1, 2, 0])
    got = shared_chunk_sums(postings.indptr, postings.indices, protos, np.array([0, 4]), np.zeros(3), 10)
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0]
    empty = shared_chunk_sums(postings.indptr, postings.indices, np.zeros(0, dtype=np.int64), np.array([0]),
                              np.zeros(3), 10)
    assert empty.size == 0


def test_claimed_entries_are_the_later_nodes_chunks_their_group_already_holds():
    """The repeated-string correction (kernels/repeated_strings.py) against the per-node set walk it replaces:
    groups interleaved in list order, a prototype repeated inside a group, a group of one node."""
    from gpu_tigrag.kernels.repeated_strings import claimed_entries

    bm25 = random_postings(40, 300, seed=3)
    bm25.data = np.random.default_rng(4).random(bm25.nnz).astype(np.float32)
    protos = np.array([3, 7, 3, 9, 11, 7, 7, 20, 3])
    groups = np.array([0, 1, 0, 2, 1, 1, 3, 2, 0])
    weights = np.random.default_rng(5).random(protos.size)
    queries = np.array([0, 0, 0, 1, 0, 0, 2, 1, 0])
    want, covered = [], {}
    for i, p in enumerate(protos):
        row = bm25[int(p)]
        seen = covered.get(groups[i])
        if seen is None:
            covered[groups[i]] = set(row.indices.tolist())
            continue
        want += [(queries[i], c, weights[i] * np.float64(v)) for c, v in zip(row.indices, row.data) if c in seen]
        seen |= set(row.indices.tolist())
    got = claimed_entries(bm25.indptr, bm25.indices, bm25.data, protos, groups, weights, queries, 300)
    assert list(zip(*(a.tolist() for a in got))) == [(int(q), int(c), float(v)) for q, c, v in want]
    assert len(want) > 0
