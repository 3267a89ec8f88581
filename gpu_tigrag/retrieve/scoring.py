"""PPR-weighted BM25 (eq. 3.7) and cumulative-mass pooling (eqs. 3.8-3.9), for B queries at once."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import Backend


def ppr_weighted_bm25(be: Backend, bm25: Any, token_ids: Any, token_weights: Any) -> Any:
    """ρ(c, μ) = Σ_{v ∈ Φ_μ} p̂(v)·BM25(v, c) for every chunk and query: dense chunks × B.

    `token_ids` / `token_weights` are γ × B (the expanded set Φ_μ and p̂ of each query);
    they form a sparse vocab × B matrix, so the whole batch is one sparse product.
    """
    xp = be.xp
    gamma, n_queries = token_ids.shape
    cols = xp.broadcast_to(xp.arange(n_queries, dtype=xp.int32)[None, :], (gamma, n_queries))
    expansion = be.sparse.coo_matrix(
        (token_weights.ravel(), (token_ids.ravel().astype(xp.int32), cols.ravel())),
        shape=(bm25.shape[1], n_queries),
    ).tocsr()
    return (bm25 @ expansion).toarray()


def cumulative_mass_pool(be: Backend, scores: Any, threshold: float) -> Any:
    """Boolean chunks × B mask of the pool P_μ: the top α chunks of each column whose
    cumulative score first reaches `threshold` of the column's total (eq. 3.9).

    Chunks with score 0 are not candidates. A column with no candidate has an empty pool.
    Scores are >= 0 (BM25 with a non-negative idf, weighted by PPR mass).
    """
    if not be.is_gpu:  # the same cutoffs without a strided sort of the whole block (kernels/columns.py)
        from kernels.columns import mass_cutoffs_cpu

        scores = np.ascontiguousarray(scores, dtype=np.float32)
        cutoffs = np.empty(scores.shape[1], dtype=np.float32)
        mass_cutoffs_cpu(scores, threshold, cutoffs)
        return (scores >= cutoffs[None, :]) & (scores > 0)
    return pool_by_sorting(be.xp, scores, threshold)


def pool_by_sorting(xp: Any, scores: Any, threshold: float) -> Any:
    """`cumulative_mass_pool` with array operations: sort each column, cumulative sum, cut."""
    ordered = -xp.sort(-scores, axis=0)
    cumulative = xp.cumsum(ordered, axis=0)
    total = cumulative[-1:, :]
    reached = cumulative >= threshold * total
    alpha = xp.argmax(reached, axis=0)  # first index reaching the mass; α = index + 1
    cutoff = xp.take_along_axis(ordered, alpha[None, :], axis=0)
    return (scores >= cutoff) & (scores > 0)
