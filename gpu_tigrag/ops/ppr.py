"""Batched Personalized PageRank (section 3.4) as one sparse × dense product per iteration.

For B queries at once, X (vocab × B) iterates

    X ← d · (P X + V · m(X)) + (1 − d) · V,

P = W D⁻¹ the column-stochastic transition matrix of the weighted token graph W, V (vocab × B)
the personalization vectors of eq. 3.6 (uniform over each query's seed tokens), and m(X)
the mass sitting on dangling (degree-0) nodes, sent back to the query's seeds. The fixed
point is the PPR vector, i.e. the solution of (I − d·P̃) x = (1 − d) v, which is what the
tests check against a direct linear solve. Iteration stops once every column's L1 change
is below `tol` or after `max_iter` sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..kernels.ppr import ppr_sweep_cpu, ppr_sweep_cuda

from ..backend import Backend
from .topk import top_k_rows


@dataclass
class TransitionMatrix:
    """P = W D⁻¹ on the backend, with the dangling-node mask."""

    matrix: Any  # CSR, vocab × vocab, float32
    dangling: Any  # bool, vocab

    @classmethod
    def from_adjacency(cls, be: Backend, adjacency: Any) -> "TransitionMatrix":
        """Built on the host from the host adjacency, then moved: the same bits on every backend
        (a device column sum runs a transposed product whose rounding varies from run to run)."""
        w = adjacency.tocsr().astype(np.float32)
        degree = np.asarray(w.sum(axis=0)).ravel()
        dangling = degree == 0
        inv = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, degree)).astype(np.float32)
        p = w.copy()
        p.data = p.data * inv[p.indices]  # scale column j by 1/deg(j)
        return cls(be.csr(p), be.asarray(dangling))


def seed_matrix(be: Backend, seeds: Sequence[np.ndarray], n_vocab: int) -> Any:
    """Dense vocab × B personalization matrix: column j uniform over the unique seeds of query j."""
    xp = be.xp
    rows, cols, values = [], [], []
    for j, ids in enumerate(seeds):
        unique = np.unique(ids)
        if unique.size:
            rows.append(unique)
            cols.append(np.full(unique.size, j))
            values.append(np.full(unique.size, 1.0 / unique.size, dtype=np.float32))
    v = xp.zeros((n_vocab, len(seeds)), dtype=xp.float32)  # filled where it lives: no dense host copy
    if rows:
        v[be.asarray(np.concatenate(rows)), be.asarray(np.concatenate(cols))] = be.asarray(np.concatenate(values))
    return v


class PPRSettings(Protocol):
    """What the power iteration reads of its settings (TIGRAG's `PPRConfig` is one)."""

    damping: float
    tol: float
    max_iter: int


#: bytes of the iterates a block of the CPU power iteration holds (x, its next sweep and v: vocab × columns float32
#: each). Each column converges and stops on its own, so a batch can be iterated block by block of columns, each
#: block until its own columns stop: the same scores, bit for bit. One block of a whole 2Wiki batch (37k tokens, 499
#: questions: 222 MB) runs from memory. With the sweep's sums in registers (kernels/ppr.neighbour_sums) the best
#: block holds x in about 8 MB: 2Wiki's blocks of 48 columns ran 1.12× faster than of 112 (the 48 MB of the
#: loop-over-columns sweep), while MuSiQue-100 (18k tokens) keeps a batch of 100 in one block, where narrower
#: blocks ran 0.7-0.9× (Xeon with AMX; python bench/studies/ppr_columns.py).
CPU_BLOCK_BYTES = 24 << 20


def cpu_block_columns(n_vocab: int) -> int:
    """The widest block of columns whose iterates fit `CPU_BLOCK_BYTES`: a multiple of 16 (a vector of float32
    lanes), at least 32."""
    return max(32, CPU_BLOCK_BYTES // (3 * 4 * max(n_vocab, 1)) // 16 * 16)


def personalized_pagerank(be: Backend, transition: TransitionMatrix, v: Any, config: PPRSettings,
                          block_columns: int | None = None) -> tuple[Any, int]:
    """PPR scores (vocab × B, float32, columns sum to 1 where seeded) and the sweeps used (the most any block of
    columns used). The columns are iterated in blocks of at most `block_columns` (none: `cpu_block_columns` on the
    CPU, every column on a GPU), of equal widths (no small last block); any width gives the same scores
    (`power_iteration`). A retriever asks `pagerank_of_seeds`, which keeps the blocks apart."""
    xp = be.xp
    v = xp.ascontiguousarray(v, dtype=xp.float32)  # read only: the caller's seed block is never written
    bounds = column_blocks(be, v.shape[0], v.shape[1], block_columns)
    if len(bounds) <= 2:
        return power_iteration(be, transition, v, config)
    blocked, sweeps = _iterate_blocks(be, transition, bounds, lambda start, end: xp.ascontiguousarray(v[:, start:end]),
                                      config, v.shape[0])
    return blocked.dense(be), sweeps


def column_blocks(be: Backend, n_vocab: int, width: int, block_columns: int | None = None) -> list[int]:
    """The first column of each block of a batch of `width` columns, and `width` last: equal widths of at most
    `block_columns` (none: `cpu_block_columns` on the CPU, every column on a GPU)."""
    if block_columns is None:
        block_columns = width if be.is_gpu else cpu_block_columns(n_vocab)
    blocks = max(1, -(-width // max(block_columns, 1)))
    return [width * b // blocks for b in range(blocks + 1)]


@dataclass
class BlockedPPR:
    """Exact PPR scores of a batch kept as its blocks of columns (vocab × width each, as iterated), never
    assembled into one vocab × B array: on 2Wiki (37k tokens × 499 questions, blocks of 48) that strided copy and
    the dense seed matrix before it took ~15% of the PPR step. Answers what a hop asks of its scores:
    `top_gamma` and the scores at (node, query) pairs (`ops.push_ppr.scores_at`), the same bits as the dense
    array's."""

    blocks: list[Any]
    starts: list[int]  # each block's first column, the batch's width last
    n_vocab: int

    def top_gamma(self, be: Backend, gamma: int) -> tuple[Any, Any]:
        """`top_gamma` of the dense scores: each column's top γ on its own, block by block."""
        xp = be.xp
        if not self.blocks:  # a batch of no query
            return (xp.zeros((min(gamma, self.n_vocab), 0), dtype=xp.int64),
                    xp.zeros((min(gamma, self.n_vocab), 0), dtype=xp.float32))
        parts = [top_gamma(be, block, gamma) for block in self.blocks]
        return xp.concatenate([ids for ids, _ in parts], axis=1), xp.concatenate([w for _, w in parts], axis=1)

    def at(self, be: Backend, rows: Any, cols: Any) -> Any:
        """Scores at the (node, query) pairs `rows`, `cols` (host or backend integer arrays)."""
        xp = be.xp
        rows, cols = be.to_host(rows).astype(np.int64), be.to_host(cols).astype(np.int64)
        which = np.searchsorted(np.asarray(self.starts[1:]), cols, side="right")
        out = xp.empty(cols.shape, dtype=xp.float32)
        for b in np.unique(which):
            mine = np.flatnonzero(which == b)
            out[be.asarray(mine)] = self.blocks[b][be.asarray(rows[mine]), be.asarray(cols[mine] - self.starts[b])]
        return out

    def dense(self, be: Backend) -> Any:
        """The vocab × B array (tests, studies)."""
        xp = be.xp
        return xp.concatenate(self.blocks, axis=1) if self.blocks else xp.zeros((self.n_vocab, 0), dtype=xp.float32)


def pagerank_of_seeds(be: Backend, transition: TransitionMatrix, seeds: Sequence[np.ndarray], n_vocab: int,
                      config: PPRSettings, block_columns: int | None = None) -> tuple[BlockedPPR, int]:
    """`personalized_pagerank` of the seed sets `seeds` (`seed_matrix`), each block's seed columns made where it is
    iterated (no vocab × B seed matrix) and its scores kept as a block (`BlockedPPR`); the sweeps used."""
    bounds = column_blocks(be, n_vocab, len(seeds), block_columns)
    return _iterate_blocks(be, transition, bounds, lambda start, end: seed_matrix(be, seeds[start:end], n_vocab),
                           config, n_vocab)


def _iterate_blocks(be: Backend, transition: TransitionMatrix, bounds: Sequence[int],
                    seed_block: Callable[[int, int], Any], config: PPRSettings, n_vocab: int) -> tuple[BlockedPPR, int]:
    """`power_iteration` of each non-empty block of columns between `bounds` (`column_blocks`), its seed columns
    `seed_block(start, end)`; the blocks and the most sweeps any used."""
    blocks, starts, sweeps = [], [], 0
    for start, end in zip(bounds, bounds[1:]):
        if end > start:
            block, used = power_iteration(be, transition, seed_block(start, end), config)
            blocks.append(block)
            starts.append(start)
            sweeps = max(sweeps, used)
    return BlockedPPR(blocks, starts + [bounds[-1]], n_vocab), sweeps


def power_iteration(be: Backend, transition: TransitionMatrix, v: Any, config: PPRSettings) -> tuple[Any, int]:
    """PPR scores of one block of columns (`v`: C-ordered vocab × B float32) and the sweeps used.

    Each sweep is one fused kernel (kernels.ppr): sparse product, restart and the per-column
    L1 change in a single pass over the block. Each column stops at the first sweep whose change
    for that column is below `tol` and is held from then on, so a query's scores are those it gets
    alone, whatever its batch-mates (a block-wide stop let a column run on while others converged:
    1 of 200 2Wiki questions changed its top 10 between batch sizes). The block ends once every
    column has stopped; the test is kept on the device and read every `be.sync_interval` sweeps,
    so the result is the same whatever the interval and a GPU does not wait for the host after
    every sweep. `sweeps` counts the block's sweeps.
    """
    xp = be.xp
    p = transition.matrix
    d = np.float32(config.damping)
    if v.shape[1] == 0:
        return v.copy(), 1
    x = v.copy()
    out = xp.empty_like(x)
    delta = xp.zeros(x.shape[1], dtype=xp.float32)
    dangling = xp.nonzero(transition.dangling)[0]
    sweep = be.kernel(cpu=ppr_sweep_cpu, cuda=ppr_sweep_cuda)
    stopped = xp.zeros(x.shape[1], dtype=bool)  # per column: its change fell below tol at an earlier sweep
    used = xp.zeros((), dtype=xp.int64)
    interval = be.sync_interval
    for iteration in range(1, config.max_iter + 1):
        coef = (d * x[dangling].sum(axis=0) + (1 - d)).astype(xp.float32)
        sweep(p.indptr, p.indices, p.data, x, v, coef, d, stopped, out, delta)  # a stopped column keeps its iterate
        used += ~stopped.all()
        stopped = stopped | (delta < config.tol)
        x, out = out, x
        if iteration % interval == 0 and bool(stopped.all()):
            break
    return x, int(used)


def top_gamma(be: Backend, scores: Any, gamma: int) -> tuple[Any, Any]:
    """Per column, the ids of the γ highest-scoring nodes and their L1-normalised scores (γ × B).

    Ties at the cut go to the lowest node ids, the same on NumPy and CuPy.

    Nodes with zero score are never kept (their weight is 0), so a column reaching fewer
    than γ nodes still sums to 1 over what it reached.
    """
    xp = be.xp
    n = scores.shape[0]
    gamma = min(gamma, n)
    ids = top_k_rows(be, scores, gamma)
    weights = xp.take_along_axis(scores, ids, axis=0)
    weights = xp.where(weights > 0, weights, 0).astype(xp.float32)
    total = weights.sum(axis=0, keepdims=True)
    weights = weights / xp.where(total > 0, total, 1)
    return ids, weights
