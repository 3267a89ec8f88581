"""The block forms of SpectRAG's stages 1-3 as the retriever ran them before its candidate pairs
(methods/spectrag/candidates.py): every chunk's cosine, BM25 and relevance as chunks × B blocks, the seeds
ranked from them and the expansion as masks. Kept here as the reference the pair forms must equal, bit for bit.
The "spread" scale's mean is given (the retriever's is (mean chunk vector)·q)."""

from typing import Any

import numpy as np

from gpu_tigrag.backend import Backend
from gpu_tigrag.methods.spectrag.candidates import blend
from gpu_tigrag.ops.fusion import NEG_INF
from gpu_tigrag.ops.topk import ranked_top_k


def block_fused_seeds(be: Backend, dense: Any, bm25: Any, count: int, rrf_k: int) -> Any:
    """S0 from the dense and BM25 blocks (ranked_top_k of each, then RRF with first-seen ties)."""
    from gpu_tigrag.methods.spectrag.candidates import fused_seeds

    count = min(count, dense.shape[0])
    dense_ids, _ = ranked_top_k(be, dense, count)
    bm25_ids, bm25_vals = ranked_top_k(be, bm25, count)
    return fused_seeds(be, dense_ids, bm25_ids, bm25_vals > 0, rrf_k)


def block_relevance(be: Backend, dense: Any, bm25: Any, share: float, scale: str = "max",
                    mean: Any = None) -> tuple[Any, Any]:
    """(rel chunks × B, matched (B,)) from the blocks: the maxima over the chunks, `mean` (B,) for "spread"
    (default: each column's float32 mean)."""
    xp = be.xp
    top = dense.max(axis=0, keepdims=True)
    if mean is None:
        mean = xp.ascontiguousarray(dense.T).mean(axis=1, dtype=xp.float32)
    lex_top = xp.maximum(bm25, 0).max(axis=0, keepdims=True)
    rel = blend(be, dense, bm25, top, xp.asarray(mean, dtype=xp.float32)[None, :], lex_top, share, scale)
    return rel, (lex_top > 0)[0]


def expand(be: Backend, adjacency: Any, seeds: Any, rel: Any, hops: int, cap: int) -> tuple[Any, np.ndarray]:
    """(candidate mask chunks × B bool, candidates after each hop (hops × B, host)): breadth-first
    from the seeds over `adjacency`'s sparsity; a hop that would exceed `cap` chunks keeps its new
    chunks of highest `rel` (equal: lower id). Seeds always stay, even beyond the cap."""
    xp = be.xp
    n, width = rel.shape
    visited = xp.zeros((n, width), dtype=bool)
    visited[seeds, xp.broadcast_to(xp.arange(width)[None, :], seeds.shape)] = True
    frontier = visited
    sizes = np.zeros((hops, width), dtype=np.int64)
    size = be.to_host(visited.sum(axis=0)).astype(np.int64)
    for hop in range(hops):
        reach = adjacency @ frontier.astype(xp.float32)
        new = (reach > 0) & ~visited
        del reach
        found = be.to_host(new.sum(axis=0)).astype(np.int64)
        room = np.maximum(cap - size, 0)
        over = np.nonzero(found > room)[0]
        if over.size:
            new = _cut_by_relevance(be, new, rel, over, room[over])
            found = np.minimum(found, room)
        visited |= new
        size = size + found
        sizes[hop] = size
        frontier = new
        if not found.any():
            sizes[hop + 1:] = size
            break
    return visited, sizes


def _cut_by_relevance(be: Backend, new: Any, rel: Any, cols: np.ndarray, room: np.ndarray) -> Any:
    """`new` with columns `cols` cut to their `room` most relevant chunks (equal relevance: lower id)."""
    xp = be.xp
    dev_cols = xp.asarray(cols)
    keep = int(room.max())
    cut = xp.zeros((new.shape[0], cols.size), dtype=bool)
    if keep:
        scores = xp.where(new[:, dev_cols], rel[:, dev_cols], NEG_INF)
        ids, vals = ranked_top_k(be, xp.ascontiguousarray(scores), keep)
        ranks = xp.arange(ids.shape[0])[:, None]
        ok = (ranks < xp.asarray(room)[None, :]) & xp.isfinite(vals)
        cut[ids[ok], xp.broadcast_to(xp.arange(cols.size)[None, :], ids.shape)[ok]] = True
    new[:, dev_cols] = cut
    return new


