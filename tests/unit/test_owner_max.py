"""The max-cosine rerank's reduction (kernels/owner_max.py): each query's best column on its pooled rows, −inf
elsewhere and for a query without vectors; the rerank through it equals the plain NumPy maximum over each
query's columns bit for bit; the CUDA twin gives the CPU twin's bits under the simulator."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpu_tigrag.backend import get_backend
from gpu_tigrag.kernels.owner_max import owner_max_cpu
from gpu_tigrag.methods.tigrag.rerank import masked_max_cosine
from gpu_tigrag.ops.dense_dot import query_dot


def _reference(sims: np.ndarray, owner: np.ndarray, n_queries: int, pool: np.ndarray) -> np.ndarray:
    out = np.full((sims.shape[0], n_queries), -np.inf, dtype=np.float32)
    for q in range(n_queries):
        columns = np.nonzero(owner == q)[0]
        if columns.size:
            out[:, q] = sims[:, columns].max(axis=1)
    return np.where(pool, out, np.float32(-np.inf))


def _case(seed: int, n: int = 37, counts=(3, 0, 1, 5, 2)):
    rng = np.random.default_rng(seed)
    owner = np.repeat(np.arange(len(counts)), counts).astype(np.int64)
    sims = rng.standard_normal((n, owner.size)).astype(np.float32)
    sims[4, :] = -2.5  # equal values: the max is that value
    pool = rng.random((n, len(counts))) < 0.6
    return sims, owner, pool


def test_each_query_gets_the_best_of_its_own_columns_on_its_pooled_rows():
    sims, owner, pool = _case(0)
    counts = np.bincount(owner, minlength=5).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    out = np.zeros((sims.shape[0], 5), dtype=np.float32)
    owner_max_cpu(sims, starts, counts, pool, out)
    np.testing.assert_array_equal(out, _reference(sims, owner, 5, pool))
    assert np.all(out[:, 1] == -np.inf)  # a query without vectors
    assert np.all(out[~pool] == -np.inf)


def test_masked_max_cosine_is_the_plain_maximum_over_each_querys_vectors():
    be = get_backend("numpy")
    rng = np.random.default_rng(1)
    embeddings = rng.standard_normal((50, 16)).astype(np.float32)
    _, owner, _ = _case(1, counts=(2, 4, 0, 1))
    vectors = rng.standard_normal((owner.size, 16)).astype(np.float32)
    pool = rng.random((50, 4)) < 0.5
    got = masked_max_cosine(be, embeddings, vectors, owner, 4, pool)
    want = _reference(query_dot(be, embeddings, vectors), owner, 4, pool)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="grouped by query"):
        masked_max_cosine(be, embeddings, vectors, owner[::-1].copy(), 4, pool)


SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    from gpu_tigrag.kernels.owner_max import owner_max_cpu, owner_max_cuda
    rng = np.random.default_rng(2)
    counts = np.array([2, 0, 3, 1], dtype=np.int64)
    starts = np.array([0, 2, 2, 5], dtype=np.int64)
    sims = rng.standard_normal((9, 6)).astype(np.float32)
    pool = rng.random((9, 4)) < 0.7
    want = np.empty((9, 4), np.float32)
    owner_max_cpu(sims, starts, counts, pool, want)
    got = cuda.to_device(np.zeros((9, 4), np.float32))
    owner_max_cuda(cuda.to_device(sims), cuda.to_device(starts), cuda.to_device(counts), cuda.to_device(pool), got,
                   threads=(2, 4))
    assert np.array_equal(got.copy_to_host(), want), (got.copy_to_host(), want)
    assert np.all(want[:, 1] == -np.inf)
    print("SIM-OK")
""")


def test_cuda_twin_matches_the_cpu_twin_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]
