"""PPR-weighted BM25 (eq. 3.7) and cumulative-mass pooling (eqs. 3.8-3.9), for B queries at once."""

from __future__ import annotations

from typing import Any

from ...backend import Backend


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
    The columns are sorted as rows of the transposed block (contiguous: about twice as fast
    as sorting along axis 0 of the C-ordered block on CPU), and summed in descending order.
    """
    xp = be.xp
    ordered = xp.flip(xp.sort(xp.ascontiguousarray(scores.T), axis=1), axis=1)  # B × chunks, descending
    cumulative = xp.cumsum(ordered, axis=1)
    reached = cumulative >= threshold * cumulative[:, -1:]
    alpha = xp.argmax(reached, axis=1)  # first index reaching the mass; α = index + 1
    cutoff = xp.take_along_axis(ordered, alpha[:, None], axis=1)
    return (scores >= cutoff.T) & (scores > 0)
