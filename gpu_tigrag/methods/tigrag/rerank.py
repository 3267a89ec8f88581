"""The max-cosine rerank of expanded queries (eq. 3.15). The hop-1 cosine rerank (section 3.6) is
`where(pool, cosine, -inf)` in the retriever, which keeps the full cosine for fusion."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend import Backend

from ...ops.dense_dot import query_dot
from ...ops.fusion import NEG_INF


def masked_max_cosine(be: Backend, embeddings: Any, vectors: Any, owner: Any, n_queries: int, pool: Any,
                      tiles: Any = None) -> Any:
    """For each query, the max cosine over its expanded-query embeddings (rows of `vectors`
    whose `owner`, a host array, is that query), on pooled chunks, −inf elsewhere: chunks × B.
    `tiles`: the embeddings' RowTiles (`query_dot`)."""
    xp = be.xp
    sims = query_dot(be, embeddings, vectors, tiles)  # chunks × M
    best = xp.full((embeddings.shape[0], n_queries), NEG_INF, dtype=xp.float32)
    counts = np.bincount(owner, minlength=n_queries)
    for rank in range(int(counts.max()) if counts.size else 0):
        # rank-th vector of every query that has one: a vectorised max over a padded axis
        take, cols = _rank_members(owner, counts, rank, xp)
        best[:, cols] = xp.maximum(best[:, cols], sims[:, take])
    return xp.where(pool, best, NEG_INF)


def _rank_members(owner: Any, counts: np.ndarray, rank: int, xp: Any) -> tuple[Any, Any]:
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cols = np.nonzero(counts > rank)[0]
    return xp.asarray(starts[cols] + rank), xp.asarray(cols)
