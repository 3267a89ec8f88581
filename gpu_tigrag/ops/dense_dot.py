"""Cosines of chunk vectors with query vectors whose bits do not depend on the batch (kernels/dense_dot.py).

Every dense product of the engine's chunk vectors with a batch's query vectors goes through
`query_dot`, so a query's scores, and so its ranking among near-ties, are the same bits alone or in
any batch, after a resume, and in every method that ranks by the same cosine.
"""

from __future__ import annotations

from typing import Any

from ..backend import Backend
from ..kernels.dense_dot import query_dot_cpu, query_dot_cuda


def query_dot(be: Backend, rows: Any, vectors: Any) -> Any:
    """`rows @ vectors.T` as float32 (rows: n × d; vectors: B × d; both taken as float32) on the backend of `be`,
    each entry one fixed sequence of float32 operations (independent of B, of the other rows and of threads)."""
    xp = be.xp
    rows = xp.ascontiguousarray(rows, dtype=xp.float32)  # no copy for the engine's float32 chunk vectors
    vectors_t = xp.ascontiguousarray(xp.asarray(vectors).T, dtype=xp.float32)
    if rows.shape[1] != vectors_t.shape[0]:
        raise ValueError(f"chunk vectors have {rows.shape[1]} dimensions, query vectors {vectors_t.shape[0]}")
    out = xp.empty((rows.shape[0], vectors_t.shape[1]), dtype=xp.float32)
    be.kernel(cpu=query_dot_cpu, cuda=query_dot_cuda)(rows, vectors_t, out)
    return out
