"""Personalized PageRank on each query's induced subgraph, B queries at once (SpectRAG).

Query b has a candidate set M_b (chunks) holding its seeds S_b. On the subgraph of the weighted
graph W induced by M_b, with P_b its random-walk matrix (column j scaled by 1 / deg_b(j), the
weighted degree of j inside M_b) and v_b uniform over S_b, the PPR vector is the fixed point of

    x ← d · (P_b x + v_b · Σ_{j ∈ M_b, deg_b(j) = 0} x_j) + (1 − d) · v_b,

dangling mass going back to the seeds: what `networkx.pagerank(G[M_b], alpha=d,
personalization=v_b, weight="weight")` computes (it also sends dangling mass to the
personalization). As there, the iteration starts uniform over M_b and query b stops once its L1
change is below `tol · |M_b|` (networkx's criterion) or after `max_iter` sweeps. Every sweep is
one fused kernel over the block (kernels/subgraph_ppr.py) that touches only the candidates' edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.subgraph_ppr import subgraph_ppr_sweep_cpu, subgraph_ppr_sweep_cuda, subgraph_ppr_sweep_serial

from ..backend import Backend


#: edge visits per sweep from which the CPU twin runs on all threads (below: one thread)
PARALLEL_MIN_EDGES = 200_000


@dataclass
class CandidatePairs:
    """The candidate sets of a block of B queries as (query, chunk) pairs grouped by query, chunk
    ids ascending within a query (device arrays, except `counts`)."""

    rows: Any  # int64 (P,), chunk ids
    cols: Any  # int64 (P,), query of each pair
    positions: Any  # int64 (P,), index of the pair within its query
    col_start: Any  # int64 (B + 1,), the pairs of query b are col_start[b]:col_start[b + 1]
    counts: np.ndarray  # int64 (B,) on the host: |M_b|

    @classmethod
    def from_mask(cls, be: Backend, mask: Any) -> "CandidatePairs":
        """From a bool n × B mask (nonzero over the transposed view walks query by query)."""
        xp = be.xp
        cols, rows = xp.nonzero(mask.T)
        counts = mask.sum(axis=0).astype(xp.int64)
        col_start = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(counts)])
        cols = cols.astype(xp.int64)
        positions = xp.arange(rows.size, dtype=xp.int64) - col_start[cols]
        return cls(rows.astype(xp.int64), cols, positions, col_start, be.to_host(counts).astype(np.int64))

    @property
    def width(self) -> int:
        """The largest candidate set (columns of `padded`)."""
        return int(self.counts.max()) if self.counts.size else 0

    def padded(self, be: Backend, values: Any, fill: Any) -> Any:
        """Per-pair values laid out B × width, `fill` beyond each query's candidates."""
        out = be.xp.full((self.counts.size, self.width), fill, dtype=values.dtype)
        out[self.cols, self.positions] = values
        return out


def subgraph_pagerank(be: Backend, weights: Any, pairs: CandidatePairs, seeds: Any, damping: float, tol: float,
                      max_iter: int) -> tuple[Any, Any, int]:
    """PPR restricted to each query's candidates: (π per pair (P,) float32, has_edges (B,) bool —
    False where the induced subgraph has no edge —, sweeps used).

    `weights` is the symmetric n × n CSR W on the backend; `seeds` (s × B ids) are the restart
    sets, each inside its query's candidates (uniform weight over the distinct ids).
    """
    xp = be.xp
    n = weights.shape[0]
    width = pairs.counts.size
    rows, cols = pairs.rows, pairs.cols
    member = xp.zeros((n, width), dtype=xp.float32)
    member[rows, cols] = 1.0
    degree = (weights @ member)[rows, cols]  # deg = (W @ M) ⊙ M, gathered at the pairs
    del member
    inv = xp.where(degree > 0, 1.0 / xp.where(degree > 0, degree, 1.0), 0.0).astype(xp.float32)
    inv_deg = xp.zeros((width, n), dtype=xp.float32)
    inv_deg[cols, rows] = inv
    has_edges = xp.bincount(cols, weights=(degree > 0).astype(xp.float32), minlength=width) > 0

    seed_mask = xp.zeros((width, n), dtype=bool)
    seed_mask[xp.broadcast_to(xp.arange(width)[None, :], seeds.shape), seeds] = True
    per_query = seed_mask.sum(axis=1, keepdims=True).astype(xp.float32)
    v = xp.where(seed_mask, 1.0 / xp.maximum(per_query, 1.0), 0.0).astype(xp.float32)
    del seed_mask
    counts = be.asarray(pairs.counts.astype(np.float32))
    x = xp.zeros((width, n), dtype=xp.float32)
    x[cols, rows] = (1.0 / counts)[cols]  # networkx's start: uniform over the candidates
    out = xp.zeros_like(x)
    dmass = xp.bincount(cols, weights=x[cols, rows] * (inv == 0), minlength=width).astype(xp.float32)
    delta = xp.zeros(width, dtype=xp.float32)
    threshold = (np.float32(tol) * counts).astype(xp.float32)
    active = (counts > 0).astype(xp.uint8)
    d = np.float32(damping)
    edges = int(be.to_host(xp.diff(weights.indptr)[rows].sum())) if rows.size else 0  # edge visits per sweep
    cpu = subgraph_ppr_sweep_cpu if edges >= PARALLEL_MIN_EDGES else subgraph_ppr_sweep_serial
    sweep = be.kernel(cpu=cpu, cuda=subgraph_ppr_sweep_cuda)
    row_ids = xp.ascontiguousarray(rows)
    iterations = 0
    for iterations in range(1, max_iter + 1):
        coef = (d * dmass + (1 - d)).astype(xp.float32)
        sweep(weights.indptr, weights.indices, weights.data, pairs.col_start, row_ids, x, inv_deg, v, coef, active, d,
              out, delta, dmass)
        x, out = out, x
        active &= (delta >= threshold).astype(xp.uint8)
        if not bool(active.any()):
            break
    return x[cols, rows], has_edges, iterations
