"""BM25 of given (chunk, query) pairs (kernels/bm25_pairs.py, ops.fusion.bm25_of_pairs): each pair's score is the
chunks × B block's entry bit for bit, whatever the other pairs, on the CPU twin and the CUDA kernel (simulator)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import scipy.sparse

from gpu_tigrag.backend import get_backend
from gpu_tigrag.ops.fusion import bm25_of_pairs, bm25_scores, query_term_rows


def random_bm25(n: int, vocab: int, seed: int) -> scipy.sparse.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.random((n, vocab)).astype(np.float32) * (rng.random((n, vocab)) < 0.2)
    dense[3] = 0  # a chunk with no term
    matrix = scipy.sparse.csr_matrix(dense * np.float32(7.3))
    matrix.sort_indices()
    return matrix


def test_every_pair_gets_the_blocks_bits():
    be = get_backend("numpy")
    bm25 = random_bm25(60, 40, 0)
    rng = np.random.default_rng(1)
    seeds = [rng.integers(0, 40, size=int(rng.integers(0, 9))).astype(np.int32) for _ in range(7)]  # repeats: counts
    seeds[2] = np.array([5, 5, 5, 9, 9, 1], dtype=np.int32)
    block = bm25_scores(be, bm25, seeds, 40)
    rows = np.repeat(np.arange(60), 7)
    cols = np.tile(np.arange(7), 60)
    got = bm25_of_pairs(be, bm25, query_term_rows(be, seeds, 40), rows, cols)
    assert got.dtype == np.float32 and got.tobytes() == block[rows, cols].tobytes()
    order = rng.permutation(rows.size)[:50]  # any subset, any order: the same values
    sub = bm25_of_pairs(be, bm25, query_term_rows(be, seeds, 40), rows[order], cols[order])
    assert sub.tobytes() == got[order].tobytes()
    assert bm25_of_pairs(be, bm25, query_term_rows(be, seeds, 40), rows[:0], cols[:0]).shape == (0,)
    shuffled = bm25.copy()  # a row's terms stored out of order: sorted first, the same sums
    for r in range(shuffled.shape[0]):
        lo, hi = shuffled.indptr[r], shuffled.indptr[r + 1]
        shuffled.indices[lo:hi], shuffled.data[lo:hi] = shuffled.indices[lo:hi][::-1], shuffled.data[lo:hi][::-1]
    shuffled.has_sorted_indices = False
    again = bm25_of_pairs(be, shuffled, query_term_rows(be, seeds, 40), rows, cols)
    assert again.tobytes() == got.tobytes() and shuffled.has_sorted_indices


SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    import scipy.sparse
    from numba import cuda
    from gpu_tigrag.kernels.bm25_pairs import bm25_pairs_cpu, bm25_pairs_cuda
    rng = np.random.default_rng(2)
    w = scipy.sparse.csr_matrix((rng.random((9, 12)) * (rng.random((9, 12)) < 0.4)).astype(np.float32))
    w.sort_indices()
    q = scipy.sparse.csr_matrix(np.array([[0, 2, 0, 1] * 3, [1] * 12, [0] * 12], dtype=np.float32))
    rows = np.array([0, 4, 8, 8, 2, 3], dtype=np.int64)
    cols = np.array([0, 1, 0, 2, 1, 1], dtype=np.int64)
    want = np.empty(6, np.float32)
    bm25_pairs_cpu(w.indptr, w.indices, w.data, q.indptr, q.indices, q.data, rows, cols, want)
    assert want.tobytes() == (w @ q.T).toarray()[rows, cols].astype(np.float32).tobytes()
    got = cuda.to_device(np.zeros(6, np.float32))
    args = [cuda.to_device(np.ascontiguousarray(a)) for a in (w.indptr, w.indices, w.data, q.indptr, q.indices, q.data,
                                                              rows, cols)]
    bm25_pairs_cuda(*args, got, threads=4)
    assert got.copy_to_host().tobytes() == want.tobytes(), (got.copy_to_host(), want)
    print("SIM-OK")
""")


def test_cuda_kernel_matches_the_cpu_twin_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]
