"""Sparse Personalized PageRank by forward push (`tigrag.ppr.algorithm = "push"`), B queries at once.

The exact iterate (ops/ppr.py) sweeps a vocab × B block over the whole graph, so its cost grows
with the vocabulary. Forward push (Andersen, Chung & Lang 2006) moves a query's mass only where
it is: a node's residual is pushed to its neighbours while it is at least ε per edge of the node
(`push_threshold = "edges"`), so each push moves at least (1 − d)·ε of mass per edge it visits and a
query visits at most 1 / ((1 − d)·ε) edges, whatever the graph's size (kernels/push_ppr.py). The
alternative rule `"mass"` (at least ε of mass) also pushes the frequent tokens, whose edges grow
with the corpus; bench/results/ppr_sparse.md measures both against the exact iterate.

Guarantees (tested against a direct solve): every score is at most the exact PPR value, and the
L1 error of the scores is 1 − Σ scores (the mass left in the residuals, times d), which is below
ε per touched node ("mass") or per edge of the touched nodes ("edges").

Each query keeps only its `support` best nodes (B × K, K = max(γ, SUPPORT)): the top-γ the scoring
needs and the scores the bridge ranking reads; no vocab × B block is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from ..backend import Backend
from ..kernels.pair_count import table_capacity
from ..kernels.push_ppr import INITIAL_CAPACITY, N_STATS, SCALE_BITS, push_ppr_cpu, push_ppr_cuda
from .ppr import top_gamma

#: nodes kept per query at least: the top-γ plus the scores the bridge ranking of the `best` preset
#: reads (a bridge token outside a query's SUPPORT best counts 0 there)
SUPPORT = 1024
PUSH_THRESHOLDS = ("mass", "edges")


class PushSettings(Protocol):
    """What the push reads of its settings (TIGRAG's `PPRConfig` is one)."""

    damping: float
    top_gamma: int
    max_iter: int
    push_epsilon: float
    push_threshold: str


@dataclass
class PushGraph:
    """Row u lists u's neighbours i with W[u, i] / deg(u) (the transpose of the transition matrix P:
    where u's mass goes), on the backend."""

    indptr: Any  # int64 (n + 1,)
    indices: Any  # int32
    prob: Any  # float32
    n_nodes: int

    @classmethod
    def from_adjacency(cls, be: Backend, adjacency: Any) -> "PushGraph":
        """From the symmetric weighted token graph W (host CSR); shares computed in float64."""
        w = adjacency.tocsr()
        degree = np.asarray(w.sum(axis=1), dtype=np.float64).ravel()
        rows = np.repeat(np.arange(w.shape[0]), np.diff(w.indptr))
        prob = (w.data.astype(np.float64) / degree[rows]).astype(np.float32)
        return cls(be.asarray(w.indptr.astype(np.int64)), be.asarray(w.indices.astype(np.int32)), be.asarray(prob),
                   int(w.shape[0]))


def seed_lists(seeds: Sequence[np.ndarray], n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr int64, ids int32) on the host: the distinct seeds of each query, ascending (CSR)."""
    lengths = np.array([len(s) for s in seeds], dtype=np.int64)
    if not lengths.sum():
        return np.zeros(len(seeds) + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in seeds])
    keys = np.unique(np.repeat(np.arange(len(seeds), dtype=np.int64), lengths) * n_nodes + flat)
    indptr = np.zeros(len(seeds) + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // n_nodes, minlength=len(seeds)), out=indptr[1:])
    return indptr, (keys % n_nodes).astype(np.int32)


@dataclass
class SparsePPR:
    """The best nodes of each query's push: row q holds its node ids ascending (padded with
    `n_nodes`) and their scores (0 at the padding)."""

    ids: Any  # int64 B × K on the backend
    scores: Any  # float32 B × K on the backend
    n_nodes: int
    stats: np.ndarray  # int64 B × 3 on the host: nodes touched, rounds, edge visits

    def top_gamma(self, be: Backend, gamma: int) -> tuple[Any, Any]:
        """Per query, the ids of its γ best nodes and their L1-normalised scores (γ × B), as
        `ops.ppr.top_gamma` gives for a dense block: ties to the lowest ids, no weight on a node
        the push never scored (its id is then 0)."""
        xp = be.xp
        positions, weights = top_gamma(be, self.scores.T, gamma)
        ids = xp.take_along_axis(self.ids.T, positions, axis=0)
        return xp.where(weights > 0, ids, 0), weights

    def at(self, be: Backend, rows: Any, cols: Any) -> Any:
        """Scores at the (node, query) pairs `rows`, `cols` (0 where a node is not in the query's support)."""
        xp = be.xp
        width = self.n_nodes + 1
        keys = (xp.arange(self.ids.shape[0], dtype=xp.int64)[:, None] * width + self.ids).ravel()  # ascending
        target = be.asarray(cols).astype(xp.int64) * width + be.asarray(rows).astype(xp.int64)
        if keys.size == 0:
            return xp.zeros(target.shape, dtype=xp.float32)
        found = xp.minimum(xp.searchsorted(keys, target), keys.size - 1)
        return xp.where(keys[found] == target, self.scores.ravel()[found], 0).astype(xp.float32)

    def dense(self, be: Backend) -> Any:
        """The vocab × B block of these scores (tests and benchmarks; never on the query path)."""
        xp = be.xp
        out = xp.zeros((self.n_nodes + 1, self.ids.shape[0]), dtype=xp.float32)
        cols = xp.broadcast_to(xp.arange(self.ids.shape[0])[:, None], self.ids.shape)
        out[self.ids.ravel(), cols.ravel()] = self.scores.ravel()
        return out[:-1]


def push_pagerank(be: Backend, graph: PushGraph, seeds: Sequence[np.ndarray], config: PushSettings,
                  support: int = SUPPORT) -> SparsePPR:
    """Forward-push PPR of each query's seed set (uniform restart over its distinct seeds; a query
    without seeds scores nothing), its `max(γ, support)` best nodes kept."""
    xp = be.xp
    width = len(seeds)
    k = max(1, min(max(config.top_gamma, support), graph.n_nodes))
    indptr, ids = seed_lists(seeds, max(graph.n_nodes, 1))
    out_ids = xp.empty((width, k), dtype=xp.int32)
    out_units = xp.empty((width, k), dtype=xp.int64)
    stats = xp.zeros((width, N_STATS), dtype=xp.int64)
    if width:
        eps_units = max(1, int(round(config.push_epsilon * 2.0 ** SCALE_BITS)))
        push = be.kernel(cpu=push_ppr_cpu, cuda=push_ppr_cuda)
        push(be.asarray(indptr), be.asarray(ids), graph.indptr, graph.indices, graph.prob, np.int64(eps_units),
             config.push_threshold == "edges", np.float64(config.damping), np.int64(config.max_iter), out_ids,
             out_units, stats)
    order = be.argsort_stable(out_ids, axis=1)
    ids_sorted = xp.take_along_axis(out_ids, order, axis=1).astype(xp.int64)
    scores = (xp.take_along_axis(out_units, order, axis=1).astype(xp.float64) * 2.0 ** -SCALE_BITS).astype(xp.float32)
    return SparsePPR(ids_sorted, scores, graph.n_nodes, be.to_host(stats)[:, :3].copy())


#: bytes per kept node of a query (ids int32 + int64 while selected, sorted copies, float32 scores)
SUPPORT_BYTES = 4 + 8 + 8 + 8 + 4
#: bytes per GPU table slot (node, residual, score) plus its share of the touched and frontier lists
TABLE_SLOT_BYTES = 4 + 8 + 8 + (4 + 4 + 8) // 2


def push_bytes_per_query(be: Backend, n_nodes: int, gamma: int, support: int = SUPPORT) -> int:
    """Memory per query of the push (its first launch on a GPU; retries of the queries whose table
    overflowed take no more): the kept nodes, and on a GPU the query's table."""
    kept = max(1, min(max(gamma, support), n_nodes)) * SUPPORT_BYTES
    if not be.is_gpu:
        return kept  # the CPU twin's tables are one per thread, not per query
    return kept + min(INITIAL_CAPACITY, table_capacity(max(n_nodes, 1))) * TABLE_SLOT_BYTES


def scores_at(be: Backend, scores: Any, rows: Any, cols: Any) -> Any:
    """PPR scores at (node, query) pairs, from a dense vocab × B block, a `SparsePPR` or the exact iterate's
    blocks (`ops.ppr.BlockedPPR`)."""
    from .ppr import BlockedPPR

    if isinstance(scores, (SparsePPR, BlockedPPR)):
        return scores.at(be, rows, cols)
    return scores[be.asarray(rows), be.asarray(cols)]
