"""The dense first stage: each query's k chunks of highest cosine, without a chunks × B block.

Methods that need the best chunks of the whole corpus by cosine (the dense fallback of a query with
no seed, the dense list of a fused first hop, NaiveRAG) ask `first_stage(device)` for them.
`FlatSearch` is exact: it scans the passage vectors in row blocks and keeps a running top-k, so its
memory is one block × B whatever the corpus size, and its ranking is the full cosine ranking's
(equal scores in chunk-id order, as `ops.topk.ranked_top_k`).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..backend import Backend
from ..ops.topk import ranked_top_k

#: bytes of one block of scores and its top-k temporaries, per (row, query): sized to stay in cache-sized slices
BLOCK_BYTES = 64 << 20


class DenseSearch(Protocol):
    """What a dense first stage answers."""

    def search(self, vectors: Any, k: int) -> tuple[Any, Any]:
        """(ids, cosines), k × B on the backend, best first per column; ids are int64 chunk ids."""
        ...


class FlatSearch:
    """Exact top-k by cosine over every chunk (module doc)."""

    def __init__(self, be: Backend, embeddings: Any):
        self.be, self.embeddings = be, embeddings

    def search(self, vectors: Any, k: int) -> tuple[Any, Any]:
        be, xp = self.be, self.be.xp
        vectors = be.asarray(vectors)
        n, n_queries = self.embeddings.shape[0], vectors.shape[0]
        k = min(k, n)
        rows = max(k, BLOCK_BYTES // max(4 * 3 * n_queries, 1))
        best_ids = xp.zeros((0, n_queries), dtype=xp.int64)
        best_vals = xp.zeros((0, n_queries), dtype=xp.float32)
        for start in range(0, n, rows):
            block = self.embeddings[start:start + rows] @ vectors.T  # rows × B
            ids, vals = ranked_top_k(be, block, k)
            # the running best (lower ids) come first, so equal scores stay in chunk-id order
            merged_vals = xp.concatenate([best_vals, vals.astype(xp.float32)])
            merged_ids = xp.concatenate([best_ids, ids.astype(xp.int64) + start])
            order, best_vals = ranked_top_k(be, merged_vals, k)
            best_ids = xp.take_along_axis(merged_ids, order, axis=0)
        return best_ids, best_vals


def first_stage(device: Any) -> DenseSearch:
    """The dense first stage of a device index (one per process and backend)."""
    return device.get("first_stage.flat", lambda: FlatSearch(device.be, device.embeddings))
