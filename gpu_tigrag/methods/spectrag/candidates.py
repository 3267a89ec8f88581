"""SpectRAG's stages 1-3 (seeds, relevance, expansion; retriever.py's module doc) for a block of queries
without a chunks × B block: what a query costs follows its candidates, not the corpus.

* **Seeds** come from two ranked lists: the dense first stage's top s (retrieve/first_stage.py: exact, the
  full cosine ranking's ids and bits, or the index's ANN from `ann.min_chunks`) and BM25's top s among the
  chunks scoring > 0 (`ops.fusion.bm25_top`: MaxScore over the postings, the block's scores bit for bit).
* **Relevance** needs three numbers of the whole corpus per query, each read off those lists or the vectors:
  the largest cosine (the dense list's first), the largest BM25 (the BM25 list's first, 0 when none
  matched) and, for the "spread" scale, the mean cosine, (mean of the chunk vectors) · q in k order. Then
  a (chunk, query) pair's relevance is an elementwise formula (`blend`) of its cosine (`gather_dot`, the
  dense product's bits) and its BM25 (`bm25_of_pairs`, the sparse product's bits): the same float32
  operations as over a block, so the same bits.
* **Expansion** walks the chunk graph from the seeds over (query, chunk) keys: a hop's reach is the
  frontier pairs' neighbours, minus the pairs already visited; a query whose hop overflows its room keeps
  its most relevant new chunks (equal relevance: lower id), and only those chunks' relevance is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ...backend import Backend, row_entries
from ...ops.dense_dot import query_dot
from ...ops.fusion import bm25_of_pairs, bm25_scores, bm25_top
from ...ops.sparse_scores import gather_dot


def fused_seeds(be: Backend, dense_ids: Any, bm25_ids: Any, matched: Any, rrf_k: int) -> Any:
    """S0 (count × B ids, best first): RRF of the dense top-count list (`dense_ids`, count × B) and the BM25
    top-count list (`bm25_ids`, where `matched`: the chunks scoring > 0, a prefix of each column),
    1 / (rrf_k + rank + 1) per list, ranks from 0. Equal fused scores keep first-seen order: the dense list in
    rank order, then the BM25 list's chunks not in the dense list."""
    xp = be.xp
    count = dense_ids.shape[0]
    rr = 1.0 / (rrf_k + xp.arange(count, dtype=xp.float64) + 1.0)
    same = (dense_ids[:, None, :] == bm25_ids[None, :, :]) & matched[None, :, :]  # dense rank × BM25 rank × B
    dense_fused = rr[:, None] + (same * rr[None, :, None]).sum(axis=1)
    bm25_fused = xp.where(matched & ~same.any(axis=0), rr[:, None], -np.inf)
    ids = xp.concatenate([dense_ids, bm25_ids])  # first-seen order along axis 0
    fused = xp.concatenate([dense_fused, bm25_fused])
    order = be.argsort_stable(-fused, axis=0)[:count]
    return xp.take_along_axis(ids, order, axis=0)


def blend(be: Backend, dense: Any, bm25: Any, top: Any, mean: Any, lex_top: Any, share: float, scale: str) -> Any:
    """Relevance (float32) from cosines `dense` and BM25 scores `bm25` and their query's largest cosine `top`,
    mean cosine `mean` (used by "spread" only) and largest non-negative BM25 `lex_top`, all broadcast
    together (a block with per-query rows of stats, or pairs with their query's stats): the code's hybrid
    relevance, share·c/max c + (1 − share)·bm25⁺/max bm25⁺, raw cosine where BM25 matches nothing; "spread"
    puts (c − mean c) / (max c − mean c) in c/max c's (and the raw cosine's) place."""
    xp = be.xp
    if scale == "spread":
        dense_n = (dense - mean) / xp.maximum(top - mean, xp.float32(1e-6))
        fallback = dense_n
    else:
        dense_n = xp.where(top > 0, dense / xp.where(top > 0, top, 1), dense)
        fallback = dense
    lexical = xp.maximum(bm25, 0)
    matched = lex_top > 0
    rel = xp.where(matched, share * dense_n + (1 - share) * (lexical / xp.where(matched, lex_top, 1)), fallback)
    return rel.astype(xp.float32)


@dataclass
class BlockRelevance:
    """The relevance of any (chunk, query) pair of one block of queries (module doc)."""

    be: Backend
    embeddings: Any  # chunks × dim on the backend
    bm25: Any  # chunks × terms CSR on the backend
    n_terms: int
    vectors: Any  # B × dim query vectors on the backend
    seeds: Sequence[np.ndarray]  # each query's BM25 terms (repeats kept)
    term_rows: Any  # `query_term_rows` of `seeds` on the backend
    top: Any  # (B,) float32 largest cosine
    mean: Any  # (B,) float32 mean cosine
    lex_top: Any  # (B,) float32 largest non-negative BM25
    share: float
    scale: str

    @property
    def matched(self) -> Any:
        """(B,) bool: BM25 matched a chunk of the query."""
        return self.lex_top > 0

    def pairs(self, rows: Any, cols: Any) -> Any:
        """float32 (P,): the relevance of chunk rows[p] for query cols[p]."""
        be = self.be
        dense = gather_dot(be, self.embeddings, self.vectors, rows, cols)
        lexical = bm25_of_pairs(be, self.bm25, self.term_rows, rows, cols)
        return blend(be, dense, lexical, self.top[cols], self.mean[cols], self.lex_top[cols], self.share, self.scale)

    def block(self, cols: np.ndarray) -> Any:
        """float32 chunks × len(cols): every chunk's relevance for the queries `cols` (host ids)."""
        be = self.be
        dev_cols = be.asarray(cols)
        dense = query_dot(be, self.embeddings, self.vectors[dev_cols])
        lexical = bm25_scores(be, self.bm25, [self.seeds[c] for c in cols], self.n_terms)
        return blend(be, dense, lexical, self.top[dev_cols][None, :], self.mean[dev_cols][None, :],
                     self.lex_top[dev_cols][None, :], self.share, self.scale)


def mean_cosine(be: Backend, centroid: Any, vectors: Any) -> Any:
    """(B,) float32: each query's mean cosine over the chunks, (mean of the chunk vectors) · q, in k order."""
    return query_dot(be, centroid[None, :], vectors)[0]


def chunk_centroid(embeddings: np.ndarray) -> np.ndarray:
    """The mean of the chunk vectors (float32 of a float64 mean), for `mean_cosine`."""
    rows = np.asarray(embeddings)
    if rows.shape[0] == 0:
        return np.zeros(rows.shape[1], dtype=np.float32)
    return rows.mean(axis=0, dtype=np.float64).astype(np.float32)


def seed_lists(be: Backend, search: Callable[[Any, int], tuple[Any, Any]], bm25: Any, postings: Any, max_weight: Any,
               vectors: Any, seeds: Sequence[np.ndarray], n_terms: int, count: int, maxscore: bool
               ) -> tuple[Any, Any, Any, Any, Any]:
    """(dense ids count × B, largest cosine (B,), BM25 ids count × B, matched count × B, largest BM25 (B,) ≥ 0),
    on the backend: the two lists the seeds are fused from, and the corpus-wide maxima they give."""
    xp = be.xp
    dense_ids, dense_vals = search(vectors, count)
    ids, scores, counts = bm25_top(be, bm25, postings, max_weight, seeds, n_terms, count, maxscore=maxscore)
    listed = np.arange(ids.shape[1])[None, :] < counts[:, None]  # B × count
    bm25_ids = np.where(listed, ids, -1).T
    lex_top = np.where(counts > 0, scores[:, 0] if scores.shape[1] else 0, 0).astype(np.float32)
    return (dense_ids, dense_vals[0].astype(xp.float32), be.asarray(np.ascontiguousarray(bm25_ids)),
            be.asarray(np.ascontiguousarray(listed.T)), be.asarray(lex_top))


@dataclass
class Expansion:
    """A block's candidate sets as sorted (query · n + chunk) keys, and the candidates after each hop."""

    keys: Any  # int64, ascending: query by query, chunks ascending
    sizes: np.ndarray  # hops × B (host)


def expand_pairs(be: Backend, reach: Any, seeds: Any, n: int, relevance: Callable[[Any, Any], Any], hops: int,
                 cap: int) -> Expansion:
    """Breadth-first from the seeds (count × B ids) over `reach` (CSR: row i lists the chunks one hop from i),
    `hops` hops; a hop that would take a query past `cap` chunks keeps its new chunks of highest
    `relevance(rows, cols)` (equal: lower id). Seeds always stay, even beyond the cap."""
    xp = be.xp
    width = seeds.shape[1]
    seed_cols = xp.broadcast_to(xp.arange(width, dtype=xp.int64)[None, :], seeds.shape)
    visited = xp.unique((seed_cols * n + seeds.astype(xp.int64)).reshape(-1))
    size = be.to_host(xp.bincount(visited // n, minlength=width)).astype(np.int64)
    sizes = np.zeros((hops, width), dtype=np.int64)
    frontier = visited
    for hop in range(hops):
        rows, cols = frontier % n, frontier // n
        owner, position = row_entries(xp, reach.indptr, rows)
        neighbours = reach.indices[position]
        keys = xp.unique(cols[owner] * n + neighbours.astype(xp.int64))
        place = xp.minimum(xp.searchsorted(visited, keys), max(visited.size - 1, 0))
        new = keys[visited[place] != keys] if visited.size else keys
        found = be.to_host(xp.bincount(new // n, minlength=width)).astype(np.int64)
        room = np.maximum(cap - size, 0)
        over = np.nonzero(found > room)[0]
        if over.size:
            new = _cut(be, new, n, over, room, relevance)
            found = np.minimum(found, room)
        visited = xp.sort(xp.concatenate([visited, new]))
        size = size + found
        sizes[hop] = size
        frontier = new
        if not found.any():
            sizes[hop + 1:] = size
            break
    return Expansion(visited, sizes)


def _cut(be: Backend, new: Any, n: int, over: np.ndarray, room: np.ndarray,
         relevance: Callable[[Any, Any], Any]) -> Any:
    """`new` keys with the queries `over` cut to their `room` most relevant chunks (equal relevance: lower id)."""
    xp = be.xp
    flagged = np.zeros(room.size, dtype=bool)
    flagged[over] = True
    cols = new // n
    selected = be.asarray(flagged)[cols]
    keys = new[selected]
    rows, cols = keys % n, keys // n
    rel = relevance(rows, cols)
    order = xp.lexsort(xp.stack([rows.astype(xp.float64), -rel.astype(xp.float64), cols.astype(xp.float64)]))
    keys, cols = keys[order], cols[order]
    starts = xp.searchsorted(cols, xp.arange(room.size))
    rank = xp.arange(keys.size) - starts[cols]
    kept = keys[rank < be.asarray(room)[cols]]
    return xp.sort(xp.concatenate([new[~selected], kept]))


def linked_keys(be: Backend, links: Any, seeds: Any, relevance: Callable[[Any, Any], Any], count: int, n: int) -> Any:
    """Sorted unique (query · n + chunk) keys of each query's `count` most relevant seeds (count × B `seeds`,
    equal relevance: S0 order) and of every chunk their rows of `links` (CSR, directed title links) name."""
    xp = be.xp
    width = seeds.shape[1]
    cols = xp.broadcast_to(xp.arange(width, dtype=xp.int64)[None, :], seeds.shape)
    rel = relevance(seeds.reshape(-1).astype(xp.int64), cols.reshape(-1)).reshape(seeds.shape)
    order = be.argsort_stable(-rel, axis=0)[:count]
    top = xp.take_along_axis(seeds.astype(xp.int64), order, axis=0).reshape(-1)
    top_cols = xp.take_along_axis(cols, order, axis=0).reshape(-1)
    owner, position = row_entries(xp, links.indptr, top)
    named = links.indices[position].astype(xp.int64)
    return xp.unique(xp.concatenate([top_cols * n + top, top_cols[owner] * n + named]))
