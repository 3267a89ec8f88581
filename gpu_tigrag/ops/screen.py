"""Exact top-k by `query_dot`'s cosines at the speed of a BLAS product: screen with the BLAS, decide with the
batch-independent bits.

`query_dot` adds each cosine's terms in k order, so a query's scores are the same bits in any batch (ops/
dense_dot.py), at 2-3× the time of a BLAS product, whose bits follow its blocking and threads. Both are
float32 sums of the same d products, and any order of such a sum lies within γ_d·Σ|q_k e_k| ≤ γ_d·‖q‖·‖e‖
of the exact real dot (γ_d = d·u / (1 − d·u), u = 2⁻²⁴; Higham, Accuracy and Stability of Numerical
Algorithms, §3.1, for any summation order, with or without fused multiply-adds). So a BLAS score s and the
k-order score f of the same pair differ by at most δ = 2·γ_d·‖q‖·max‖e‖. Let v be a query's k-th largest
screening score: k chunks have s ≥ v, so f ≥ v − δ, and a chunk with s < v − 2δ has f < v − δ, below all
of them. Every chunk with s ≥ v − 2δ is a candidate, its cosine is computed again in k order (`gather_dot`:
`query_dot`'s bits), and the candidates ranked by it (equal cosines: lower id) give exactly the plain
scan's top k, ids and bits. Candidates beyond the k are the chunks within
2δ (~9e-5 for unit vectors of 384 dimensions) of the cut: near-ties, a few per query.

The screen runs over row blocks (the scores of one block × B at a time, written into one buffer reused by every
block: a fresh 16 MB block per product cost ~20% of the product in a microbenchmark of 256 × 131,072). On the CPU each
block's BLAS product uses the numba threads (the policy's BLAS pool is one thread: threads.py) and a numba kernel
keeps each query's k largest screening scores and its candidates (kernels/screen_top.py); a query whose
candidates overflow their buffer (thousands of chunks within slack of its cut: duplicated vectors) is
answered by the plain scan. On the GPU the product is cuBLAS's (fp32: CuPy's default compute type, not
TF32) and the per-block steps are CuPy partitions and masks.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..backend import Backend
from .sparse_scores import gather_dot
from .topk import ranked_top_k

#: unit roundoff of float32
FLOAT32_UNIT = 2.0 ** -24


def dot_error_bound(dim: int) -> float:
    """γ_d: a float32 dot of d terms, added in any order, is within γ_d·Σ|q_k e_k| of the real dot."""
    nu = dim * FLOAT32_UNIT
    if nu >= 0.5:
        raise ValueError(f"vectors of {dim} dimensions are too long for a float32 error bound")
    return nu / (1.0 - nu)


def screen_slack(vectors: np.ndarray, max_row_norm: float) -> np.ndarray:
    """Per query (float64, host): how far below its k-th largest screening score a candidate may lie, 2δ =
    4·γ_d·‖q‖·max‖e‖ (module doc), rounded up, plus the subnormal steps the d products may lose to underflow."""
    vectors = np.asarray(vectors, dtype=np.float64)
    dim = vectors.shape[1]
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    slack = 4.0 * dot_error_bound(dim) * norms * max_row_norm * (1.0 + 1e-6)
    return slack + 4.0 * dim * np.float64(np.finfo(np.float32).smallest_subnormal)


def capacity(k: int) -> int:
    """Candidates kept per query before the list is compacted (`kernels.screen_top`)."""
    return 4 * k + 1024


def screened_top_k(be: Backend, embeddings: Any, vectors: Any, k: int, max_row_norm: float, block_rows: int,
                   product: Callable[[Any, Any, Any], Any], plain: Callable[[Any, int], tuple[Any, Any]]
                   ) -> tuple[Any, Any]:
    """(ids int64, cosines float32), k × B on the backend, best first, equal cosines in chunk-id order: the
    plain scan's answer bit for bit (module doc). `product(vectors, rows, out)` is the BLAS screening product
    (B × rows float32, written into `out`, a C-ordered buffer of that shape, and returned); `plain(vectors, k)`
    answers the queries whose candidates overflow. 1 <= k <= rows."""
    xp = be.xp
    vectors = xp.ascontiguousarray(be.asarray(vectors), dtype=xp.float32)
    n, width = embeddings.shape[0], vectors.shape[0]
    slack = screen_slack(be.to_host(vectors), max_row_norm)
    state = be.kernel(cpu=_HostScreen, cuda=_DeviceScreen)(be, width, k, slack)
    scratch = xp.empty(width * min(block_rows, n), dtype=xp.float32)  # every block's scores, in turn
    for start in range(0, n, block_rows):
        rows = embeddings[start:start + block_rows]
        state.add(product(vectors, rows, scratch[:width * rows.shape[0]].reshape(width, rows.shape[0])), start)
    queries, chunks, overflow = state.candidates()  # grouped by query, ids ascending within a query
    exact = gather_dot(be, embeddings, vectors, chunks, queries)
    # each query's candidates as a column (ids ascending down it, −inf below), ranked by exact cosine: equal
    # cosines keep the lower position, which is the lower id
    counts = xp.bincount(queries, minlength=width)
    starts = xp.cumsum(counts) - counts
    place = xp.arange(queries.size) - starts[queries]
    depth = max(int(counts.max()) if counts.size else 0, k)
    padded = xp.full((depth, width), -math.inf, dtype=xp.float32)
    padded[place, queries] = exact
    padded_ids = xp.zeros((depth, width), dtype=xp.int64)
    padded_ids[place, queries] = chunks
    order, vals = ranked_top_k(be, padded, k)
    ids = xp.take_along_axis(padded_ids, order, axis=0)
    vals = vals.astype(xp.float32)
    if overflow.size:
        more_ids, more_vals = plain(vectors[be.asarray(overflow)], k)
        ids[:, be.asarray(overflow)], vals[:, be.asarray(overflow)] = more_ids, more_vals
    return ids, vals


class _HostScreen:
    """The CPU screen's state: heaps and candidate buffers filled by `kernels.screen_top`."""

    def __init__(self, be: Backend, width: int, k: int, slack: np.ndarray):
        self.k, self.slack = k, slack
        self.top = np.full((width, k), -np.inf, dtype=np.float32)
        cap = capacity(k)
        self.ids = np.empty((width, cap), dtype=np.int64)
        self.scores = np.zeros((width, cap), dtype=np.float32)
        self.counts = np.zeros(width, dtype=np.int64)

    def add(self, screen: np.ndarray, offset: int) -> None:
        from ..kernels.screen_top import screen_block_cpu

        screen_block_cpu(np.ascontiguousarray(screen, dtype=np.float32), offset, self.slack, self.top, self.ids,
                         self.scores, self.counts)

    def candidates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, chunk) of every candidate the final k-th screening score admits, and the overflowed queries."""
        floor = self.top[:, 0].astype(np.float64) - self.slack  # the root: the k-th largest screening score
        counts = np.maximum(self.counts, 0)
        listed = np.arange(self.ids.shape[1])[None, :] < counts[:, None]
        admitted = listed & (self.scores.astype(np.float64) >= floor[:, None])
        queries, slots = np.nonzero(admitted)
        return queries.astype(np.int64), self.ids[queries, slots], np.flatnonzero(self.counts < 0)


class _DeviceScreen:
    """The GPU screen's state: each query's k largest screening scores so far, and the candidate blocks."""

    def __init__(self, be: Backend, width: int, k: int, slack: np.ndarray):
        self.be, self.k = be, k
        xp = be.xp
        self.slack = xp.asarray(slack)
        self.top = xp.full((width, k), -math.inf, dtype=xp.float32)
        self.found: list[tuple[Any, Any, Any]] = []

    def add(self, screen: Any, offset: int) -> None:
        xp, k = self.be.xp, self.k
        rows = screen.shape[1]
        best = screen if rows <= k else xp.partition(screen, rows - k, axis=1)[:, rows - k:]
        merged = xp.concatenate([self.top, best], axis=1)
        self.top = xp.partition(merged, merged.shape[1] - k, axis=1)[:, merged.shape[1] - k:]
        floor = self.top.min(axis=1).astype(xp.float64) - self.slack
        queries, rows_in = xp.nonzero(screen.astype(xp.float64) >= floor[:, None])
        self.found.append((queries, rows_in + offset, screen[queries, rows_in]))

    def candidates(self) -> tuple[Any, Any, np.ndarray]:
        xp = self.be.xp
        queries = xp.concatenate([f[0] for f in self.found]).astype(xp.int64)
        chunks = xp.concatenate([f[1] for f in self.found]).astype(xp.int64)
        scores = xp.concatenate([f[2] for f in self.found])
        floor = self.top.min(axis=1).astype(xp.float64) - self.slack
        admitted = scores.astype(xp.float64) >= floor[queries]
        queries, chunks = queries[admitted], chunks[admitted]
        order = self.be.argsort_stable(queries)  # blocks in row order: ids stay ascending within a query
        return queries[order], chunks[order], np.zeros(0, dtype=np.int64)
