"""The max-cosine rerank of expanded queries (eq. 3.15). The hop-1 cosine rerank (section 3.6) is
`where(pool, cosine, -inf)` in the retriever, which keeps the full cosine for fusion."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend import Backend

from ...ops.dense_dot import query_dot


def masked_max_cosine(be: Backend, embeddings: Any, vectors: Any, owner: Any, n_queries: int, pool: Any,
                      tiles: Any = None) -> Any:
    """For each query, the max cosine over its expanded-query embeddings (rows of `vectors`
    whose `owner`, a host array, is that query), on pooled chunks, −inf elsewhere: chunks × B.
    `tiles`: the embeddings' RowTiles (`query_dot`). The maximum over a query's columns is one pass of
    kernels/owner_max.py over the product."""
    from ...kernels.owner_max import owner_max_cpu, owner_max_cuda

    xp = be.xp
    owner = np.asarray(owner, dtype=np.int64)
    if owner.size and np.any(owner[1:] < owner[:-1]):
        raise ValueError("expanded-query vectors must be grouped by query (owner ascending)")
    sims = query_dot(be, embeddings, vectors, tiles)  # chunks × M
    counts = np.bincount(owner, minlength=n_queries).astype(np.int64)
    starts = np.zeros(n_queries, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    best = xp.empty((embeddings.shape[0], n_queries), dtype=xp.float32)
    be.kernel(cpu=owner_max_cpu, cuda=owner_max_cuda)(sims, be.asarray(starts), be.asarray(counts),
                                                     xp.ascontiguousarray(pool, dtype=bool), best)
    return best
