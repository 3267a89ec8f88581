"""Score fusion for the `best` preset, batched over a block of queries (chunks × B on the backend).

* `hybrid_first_hop`: RRF of the chunks' cosine, BM25 and the token-graph score ρ, plus the chunks of
  the passages the question names; it picks the chunks whose entities drive the next hop.
* `link_mask`: chunks × B mask of the chunks of given passages per query (title links).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...backend import Backend
from ...ops.fusion import NEG_INF, reciprocal_rank


def linked_chunks(passage_chunks: tuple[np.ndarray, np.ndarray], linked: Sequence[Sequence[int]]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(query, chunk) host arrays: every chunk of the passages linked to each query, gathered at once from
    `passage_chunks`, the (indptr, chunk ids) CSR from passage to its chunks."""
    indptr, chunk_ids = passage_chunks
    passages = np.fromiter((p for ps in linked for p in ps), dtype=np.int64)
    owners = np.repeat(np.arange(len(linked), dtype=np.int64), [len(ps) for ps in linked])
    sizes = indptr[passages + 1] - indptr[passages]
    first = np.repeat(indptr[passages] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
    return np.repeat(owners, sizes), chunk_ids[first + np.arange(int(sizes.sum()))]


def link_mask(be: Backend, passage_chunks: tuple[np.ndarray, np.ndarray], linked: Sequence[Sequence[int]],
              n_chunks: int) -> Any:
    """Bool chunks × B: True on every chunk of the passages linked to each query.

    `passage_chunks` is the (indptr, chunk ids) CSR from passage to its chunks."""
    queries, chunks = linked_chunks(passage_chunks, linked)
    mask = be.xp.zeros((n_chunks, len(linked)), dtype=bool)
    if chunks.size:
        mask[be.asarray(chunks), be.asarray(queries)] = True
    return mask


def hybrid_first_hop(be: Backend, cosine: Any, bm25: Any, rho: Any, question_links: Any | None,
                     depth: int, k: int) -> Any:
    """RRF of the chunks' cosine to the query, BM25 and ρ; the question's title-linked chunks,
    ordered by that fused score, form a fourth list counted twice (a named passage is the strongest
    first-hop evidence)."""
    xp = be.xp
    fused = (reciprocal_rank(be, cosine, depth, k) + reciprocal_rank(be, bm25, depth, k)
             + reciprocal_rank(be, rho, depth, k))
    if question_links is not None and bool(question_links.any()):
        linked = xp.where(question_links, fused, NEG_INF)
        fused = fused + 2 * reciprocal_rank(be, linked, depth, k)
    return fused
