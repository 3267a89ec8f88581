"""The title-link lift of a ranked block on the host: each query's first `count` chunks and every chunk their
directed title links name (`methods.spectrag.chunk_signals.forward_title_links`) score `lift` × the query's top
score more, chunks named but not ranked entering at that lift alone; then the block is ranked again. Scale-free
(the lift is in units of the query's own top score), so it applies to any ranking whose scores decrease down
it: LiteSemRAG's reciprocal ranks and fused sums (SpectRAG lifts its candidates' scores on the device instead,
`methods.spectrag.candidates.linked_keys`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from ..backend import row_entries


def lift_named(ids: np.ndarray, scores: np.ndarray, links: scipy.sparse.csr_matrix, count: int, lift: float,
               k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, scores, lifted) B × k' (k' ≤ k), -1 / 0 / False past each query's chunks, from `ids` (int64 B × K,
    best first, -1 past a query's ranking) and their `scores` (float64, decreasing): the block with the lift
    applied and ranked again (equal scores: the old order, named chunks not ranked before after them in id
    order). `lifted` marks the chunks that were lifted."""
    width, depth = ids.shape
    n = links.shape[0]
    valid = ids >= 0
    query, position = np.nonzero(valid)
    chunk = ids[valid].astype(np.int64)
    score = scores[valid].astype(np.float64)
    top_score = np.where(valid[:, 0], scores[:, 0], 0.0) if depth else np.zeros(width)
    head = position < count
    owner, entry = row_entries(np, links.indptr, chunk[head])
    named = links.indices[entry].astype(np.int64)
    named_query = query[head][owner]
    lifted_keys = np.unique(np.concatenate([query[head] * n + chunk[head], named_query * n + named]))
    ranked_keys = query * n + chunk
    new_keys = np.setdiff1d(lifted_keys, ranked_keys, assume_unique=True)
    all_query = np.concatenate([query, new_keys // n])
    all_chunk = np.concatenate([chunk, new_keys % n])
    all_score = np.concatenate([score, np.zeros(new_keys.size)])
    order_hint = np.concatenate([position, depth + np.arange(new_keys.size)])  # new keys: id order per query
    keys = all_query * n + all_chunk
    place = np.minimum(np.searchsorted(lifted_keys, keys), max(lifted_keys.size - 1, 0))
    is_lifted = lifted_keys[place] == keys if lifted_keys.size else np.zeros(keys.size, dtype=bool)
    all_score = all_score + np.where(is_lifted, np.float64(lift) * top_score[all_query], 0.0)
    order = np.lexsort((order_hint, -all_score, all_query))
    all_query, all_chunk, all_score, is_lifted = (a[order] for a in (all_query, all_chunk, all_score, is_lifted))
    starts = np.searchsorted(all_query, np.arange(width))
    rank = np.arange(all_query.size) - starts[all_query]
    keep = rank < k
    out_width = min(k, int(np.bincount(all_query[keep], minlength=width).max(initial=0)))
    out_ids = np.full((width, out_width), -1, dtype=np.int64)
    out_scores = np.zeros((width, out_width), dtype=np.float64)
    out_lifted = np.zeros((width, out_width), dtype=bool)
    out_ids[all_query[keep], rank[keep]] = all_chunk[keep]
    out_scores[all_query[keep], rank[keep]] = all_score[keep]
    out_lifted[all_query[keep], rank[keep]] = is_lifted[keep]
    return out_ids, out_scores, out_lifted
