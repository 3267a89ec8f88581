"""Personalized PageRank on each query's induced subgraph, B queries at once (SpectRAG).

Query b has a candidate set M_b (chunks) holding its seeds S_b. On the subgraph of the weighted
chunk graph W induced by M_b, with P_b its random-walk matrix (column j scaled by 1 / deg_b(j), the
weighted degree of j inside M_b) and v_b uniform over S_b, the PPR vector is the fixed point of

    x ← d · (P_b x + v_b · Σ_{j ∈ M_b, deg_b(j) = 0} x_j) + (1 − d) · v_b,

dangling mass going back to the seeds: what `networkx.pagerank(G[M_b], alpha=d,
personalization=v_b, weight="weight")` computes (it also sends dangling mass to the
personalization). As there, the iteration starts uniform over M_b and query b stops once its L1
change is below `tol · |M_b|` (networkx's criterion) or after `max_iter` sweeps.

The induced subgraphs of the block are gathered once into one block-diagonal CSR over the
(query, candidate) pairs (`InducedSubgraphs`), holding W[i, j] / deg_b(j); every sweep is then
one fused kernel over it (kernels/subgraph_ppr.py): the candidates' internal edges only, and one
value per pair rather than a chunks × B block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kernels.subgraph_ppr import subgraph_ppr_sweep_cpu, subgraph_ppr_sweep_cuda, subgraph_ppr_sweep_serial

from ..backend import Backend, row_entries


#: internal edges (visits per sweep) from which the CPU twin runs on all threads; below, one thread
#: is faster (a sweep of 1M edges takes ~2 ms on one core, while a parallel launch costs ~8 ms when
#: other processes keep the cores busy)
PARALLEL_MIN_EDGES = 1_000_000


@dataclass
class CandidatePairs:
    """The candidate sets of a block of B queries as (query, chunk) pairs grouped by query, chunk
    ids ascending within a query (device arrays, except `counts`)."""

    rows: Any  # int64 (P,), chunk ids
    cols: Any  # int64 (P,), query of each pair
    positions: Any  # int64 (P,), index of the pair within its query
    col_start: Any  # int64 (B + 1,), the pairs of query b are col_start[b]:col_start[b + 1]
    counts: np.ndarray  # int64 (B,) on the host: |M_b|
    mask: Any = None  # the bool n × B mask they came from, when kept

    @classmethod
    def from_mask(cls, be: Backend, mask: Any) -> "CandidatePairs":
        """From a bool n × B mask."""
        xp = be.xp
        cols, rows = xp.nonzero(xp.ascontiguousarray(mask.T))  # row-major: query by query, chunks ascending
        counts = mask.sum(axis=0).astype(xp.int64)
        col_start = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(counts)])
        cols = cols.astype(xp.int64)
        positions = xp.arange(rows.size, dtype=xp.int64) - col_start[cols]
        return cls(rows.astype(xp.int64), cols, positions, col_start, be.to_host(counts).astype(np.int64), mask)

    @classmethod
    def from_keys(cls, be: Backend, keys: Any, n: int, width: int) -> "CandidatePairs":
        """From ascending int64 keys query · n + chunk (each query's chunks ascending, as `from_mask` gives)."""
        xp = be.xp
        keys = keys.astype(xp.int64)
        rows, cols = keys % n, keys // n
        counts = xp.bincount(cols, minlength=width).astype(xp.int64)
        col_start = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(counts)])
        positions = xp.arange(rows.size, dtype=xp.int64) - col_start[cols]
        return cls(rows, cols, positions, col_start, be.to_host(counts).astype(np.int64))

    @property
    def width(self) -> int:
        """The largest candidate set (columns of `padded`)."""
        return int(self.counts.max()) if self.counts.size else 0

    def padded(self, be: Backend, values: Any, fill: Any) -> Any:
        """Per-pair values laid out B × width, `fill` beyond each query's candidates."""
        out = be.xp.full((self.counts.size, self.width), fill, dtype=values.dtype)
        out[self.cols, self.positions] = values
        return out


@dataclass
class InducedSubgraphs:
    """Every query's induced subgraph as one block-diagonal CSR over the candidate pairs: row p
    lists the pairs q of the same query whose chunks are W-neighbours of p's (device arrays)."""

    indptr: Any  # int64 (P + 1,)
    indices: Any  # int64, pair ids
    weights: Any  # float32, W[i, j] of each internal edge
    degree: Any  # float32 (P,), deg_b(i): weighted degree of the pair's chunk inside its query's candidates

    @classmethod
    def build(cls, be: Backend, weights: Any, pairs: CandidatePairs) -> "InducedSubgraphs":
        """From the n × n CSR W: each pair's W row, kept where the neighbour is a candidate of the
        same query (checked in the pairs' mask when they hold it, then found by a search in the
        sorted (query, chunk) keys of the pairs)."""
        xp = be.xp
        n = weights.shape[0]
        rows, cols = pairs.rows, pairs.cols
        n_pairs = int(rows.size)
        owner, position = row_entries(xp, weights.indptr, rows)  # pair of each W entry read, ascending
        neighbour = weights.indices[position].astype(xp.int64)
        weight = weights.data[position].astype(xp.float32)
        del position
        if pairs.mask is not None:  # most neighbours are not candidates: drop them before the search
            keep = pairs.mask[neighbour, cols[owner]]
            owner, neighbour, weight = owner[keep], neighbour[keep], weight[keep]
        keys = cols * n + rows  # ascending: pairs are grouped by query, chunks ascending within one
        target = cols[owner] * n + neighbour
        del neighbour
        found = xp.minimum(xp.searchsorted(keys, target), max(n_pairs - 1, 0))
        inside = (keys[found] == target) & (weight > 0) if n_pairs else xp.zeros(0, dtype=bool)
        owner, found, weight = owner[inside], found[inside], weight[inside]
        degree = xp.bincount(owner, weights=weight, minlength=n_pairs).astype(xp.float32)
        sub_indptr = xp.concatenate([xp.zeros(1, dtype=xp.int64),
                                     xp.cumsum(xp.bincount(owner, minlength=n_pairs)).astype(xp.int64)])
        return cls(sub_indptr, found.astype(xp.int64), weight, degree)


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
    cols = pairs.cols
    subgraphs = InducedSubgraphs.build(be, weights, pairs)
    degree = subgraphs.degree
    inv = xp.where(degree > 0, 1.0 / xp.where(degree > 0, degree, 1.0), 0.0).astype(xp.float32)
    prob = (subgraphs.weights * inv[subgraphs.indices]).astype(xp.float32)  # W[i, j] / deg_b(j)
    dangling = (degree == 0).astype(xp.uint8)
    has_edges = xp.bincount(cols, weights=(degree > 0).astype(xp.float32), minlength=width) > 0

    keys = cols * n + pairs.rows
    seed_cols = xp.broadcast_to(xp.arange(width, dtype=xp.int64)[None, :], seeds.shape)
    seed_pairs = xp.searchsorted(keys, (seed_cols * n + seeds.astype(xp.int64)).ravel())  # seeds are candidates
    v = xp.zeros(cols.size, dtype=xp.float32)
    v[seed_pairs] = 1.0  # a repeated seed counts once
    v /= xp.maximum(xp.bincount(cols, weights=v, minlength=width), 1.0).astype(xp.float32)[cols]
    counts = be.asarray(pairs.counts.astype(np.float32))
    x = (1.0 / counts)[cols].astype(xp.float32)  # networkx's start: uniform over the candidates
    out = xp.empty_like(x)
    dmass = xp.bincount(cols, weights=x * dangling, minlength=width).astype(xp.float32)
    delta = xp.zeros(width, dtype=xp.float32)
    threshold = (np.float32(tol) * counts).astype(xp.float32)
    active = (counts > 0).astype(xp.uint8)
    d = np.float32(damping)
    cpu = subgraph_ppr_sweep_cpu if int(subgraphs.indices.size) >= PARALLEL_MIN_EDGES else subgraph_ppr_sweep_serial
    sweep = be.kernel(cpu=cpu, cuda=subgraph_ppr_sweep_cuda)
    iterations = 0
    for iterations in range(1, max_iter + 1):
        coef = (d * dmass + (1 - d)).astype(xp.float32)
        sweep(subgraphs.indptr, subgraphs.indices, prob, pairs.col_start, dangling, x, v, coef, active, d, out, delta,
              dmass)
        x, out = out, x
        active &= (delta >= threshold).astype(xp.uint8)
        if not bool(active.any()):
            break
    return x, has_edges, iterations
