"""The SpectRAG retriever (paper Table 2; public code `query/*`; docs/design-notes.md#spectrag-query):
hybrid seeds, expansion over the chunk graph, proximity re-scoring and token-budgeted context
selection.

Per block of B queries, every numeric stage is one array operation over the block (chunks × B
on the backend); only the selection loop runs on the host, as a numba loop over the B × |M|
candidates:

1. **Seeds.** c = E·qᵀ; dense top-s and BM25 top-s (scores > 0) fused by RRF (BM25: the public
   code's BM25Okapi, lexical.py, or the index's, `bm25`),
   1 / (rrf_k + rank + 1) with ranks from 0; S0 = the top s by fused score, equal scores in
   first-seen order (the dense list, then the BM25 list), as the code's stable sort does.
2. **Relevance** of every chunk: rel = share·c/max c + (1 − share)·bm25⁺/max bm25⁺, where c/max c
   is c itself when max c ≤ 0 (the code), and rel = c (raw) when BM25 matches nothing. With
   `relevance_scale` "spread", (c − mean c)/(max c − mean c) takes c/max c's place (and c's where BM25
   matches nothing); "auto" (the default) is "max" on the code's encoder (MiniLM), "spread" on another.
3. **Expansion.** Breadth-first over W's sparsity, `hops` hops from S0: F' = (A @ F > 0) ∧ ¬visited,
   capped at `max_candidates` chunks per query; a hop that overflows keeps its most relevant new
   chunks (equal relevance: lower chunk id), so the candidate set M is deterministic.
4. **PPR** on each query's induced subgraph of the chunk graph (ops/subgraph_ppr.py), restarting
   uniformly at S0, dangling mass to the seeds (networkx's pagerank on G[M]: it starts uniform over
   M and a query stops when its L1 change is below ppr_tol·|M|, the code's tol = 1e-6);
   ppr = π / max π over M (`ppr_norm` "max"; "rank": the share of M with a smaller π; "off": none).
5. **Spectral proximity** spec(x) = max_{s ∈ S0} ẑ_x·ẑ_s, ẑ the row-normalised coordinates (zero
   rows stay 0): one batched matmul over the padded candidates × seeds.
6. **Score** = (1 − α)·rel + α·(share·spec + (1 − share)·ppr) on the candidates. PPR is missing for a
   query whose induced subgraph has no edge, spec when the index has no coordinates; a missing term
   is replaced by the other, and with both missing the score is rel (the code's fallback). With
   `proximity_floor` > 0, candidates whose rel is below floor × the query's best candidate rel
   score (1 − α)·rel, as non-candidates do.
7. **Selection** under a token budget (token_budget.py); budget = `token_budget`, or 10 × the
   index's mean chunk (cl100k tokens) when it is 0 (the paper's 12k tokens for ~10 chunks of 1,200).

What a `QueryResult` holds: `chunk_ids` starts with the selected context in selection order
(`context` = its length), then the other candidates by score, then the other chunks by
relevance; `scores` are the candidates' scores, and for non-candidates the score with no
proximity, (1 − α)·rel (rel in a query where both proximity terms are missing). `chunk_ids`
holds k chunks (at most all chunks) and `context` = min(context, k); k=None returns the context
alone (its whole length). The public code returns the context alone, in selection order: R@k
reads its first k. `dense_fallback` is True when BM25 matched nothing for the
query (its seeds are the dense list alone and its relevance is the raw cosine). `hops` has one
trace per expansion hop: `seeds` = |S0|, `pool_size` = candidates after that hop.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ...backend import Backend
from ...config import RetrievalConfig
from .config import SpectragQueryConfig, resolve_relevance_scale
from ...encoders import Encoder, VectorCache, index_encoder_config
from ...errors import TigragError
from ...ops.dense_dot import query_dot
from ...ops.subgraph_ppr import CandidatePairs, subgraph_pagerank
from ...index.index import Index
from ...ops.rows import unit_rows
from ...ops.topk import ranked_top_k
from ...ops.fusion import NEG_INF, bm25_scores
from ...retrieve.results import HopTrace, QueryResult
from ...retrieve.base import BaseRetriever, PreparedBatch
from .lexical import build_okapi
from .token_budget import select_contexts

MISSING_STAGE = ("this index has no SpectRAG stage; build it with `tigrag extend INDEX --methods spectrag` "
                 "(or `tigrag index ... --methods tigrag,spectrag`)")


def fused_seeds(be: Backend, dense: Any, bm25: Any, count: int, rrf_k: int) -> Any:
    """S0 (count × B ids, best first): RRF of the dense top-`count` and the BM25 top-`count` with
    a score > 0, 1 / (rrf_k + rank + 1) per list, ranks from 0. Equal fused scores keep first-seen
    order: the dense list in rank order, then the BM25 list's chunks not in the dense list."""
    xp = be.xp
    count = min(count, dense.shape[0])
    dense_ids, _ = ranked_top_k(be, dense, count)
    bm25_ids, bm25_vals = ranked_top_k(be, bm25, count)
    matched = bm25_vals > 0
    rr = 1.0 / (rrf_k + xp.arange(count, dtype=xp.float64) + 1.0)
    same = (dense_ids[:, None, :] == bm25_ids[None, :, :]) & matched[None, :, :]  # dense rank × BM25 rank × B
    dense_fused = rr[:, None] + (same * rr[None, :, None]).sum(axis=1)
    bm25_fused = xp.where(matched & ~same.any(axis=0), rr[:, None], -np.inf)
    ids = xp.concatenate([dense_ids, bm25_ids])  # first-seen order along axis 0
    fused = xp.concatenate([dense_fused, bm25_fused])
    order = be.argsort_stable(-fused, axis=0)[:count]
    return xp.take_along_axis(ids, order, axis=0)


def relevance(be: Backend, dense: Any, bm25: Any, dense_share: float, scale: str = "max") -> tuple[Any, Any]:
    """(rel chunks × B float32, matched (B,) bool): the code's hybrid relevance vector; raw cosine
    in the queries BM25 matches nothing for. `scale` (`spectrag.relevance_scale`) puts the cosines on
    one scale: "max", c / max c (the code's: near 1 for every chunk where an encoder's cosines are
    compressed, as multilingual-e5's are); "spread", (c − mean c) / (max c − mean c) over the query's
    chunks (best 1, mean 0, whatever the encoder's range), also where BM25 matches nothing."""
    xp = be.xp
    top = dense.max(axis=0, keepdims=True)
    if scale == "spread":  # each column's mean reduced as a contiguous row: the same bits in any batch
        mean = xp.ascontiguousarray(dense.T).mean(axis=1, dtype=xp.float32)[None, :]
        dense_n = (dense - mean) / xp.maximum(top - mean, xp.float32(1e-6))
        fallback = dense_n
    else:
        dense_n = xp.where(top > 0, dense / xp.where(top > 0, top, 1), dense)
        fallback = dense
    lexical = xp.maximum(bm25, 0)
    lex_top = lexical.max(axis=0, keepdims=True)
    matched = lex_top > 0
    rel = xp.where(matched, dense_share * dense_n + (1 - dense_share) * (lexical / xp.where(matched, lex_top, 1)),
                   fallback)
    return rel.astype(xp.float32), matched[0]


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


def max_normalised(be: Backend, pairs: CandidatePairs, pi: Any) -> Any:
    """ppr per pair (P,): π / max π over the query's candidates (the paper's and code's)."""
    top = pairs.padded(be, pi, np.float32(0)).max(axis=1)
    return pi / be.xp.where(top > 0, top, 1)[pairs.cols]


def ppr_ranks(be: Backend, pairs: CandidatePairs, pi: Any) -> Any:
    """ppr per pair (P,) (`ppr_norm` = "rank"): the share of the query's other candidates with a
    smaller π, in [0, 1]; equal π, equal rank (the lowest of the tied places). Ranked on the host."""
    values = be.to_host(pairs.padded(be, pi, np.float32(np.inf))).astype(np.float64)  # pad: ranked last
    if values.size == 0:
        return be.xp.zeros(0, dtype=be.xp.float32)
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    place = np.arange(values.shape[1])
    new = np.concatenate([np.ones((values.shape[0], 1), dtype=bool), ordered[:, 1:] != ordered[:, :-1]], axis=1)
    first = np.maximum.accumulate(np.where(new, place[None, :], 0), axis=1)  # first place of each tie
    ranks = np.empty_like(first)
    np.put_along_axis(ranks, order, first, axis=1)
    share = (ranks / np.maximum(pairs.counts - 1, 1)[:, None]).astype(np.float32)
    return be.asarray(share)[pairs.cols, pairs.positions]


def spectral_proximity(be: Backend, unit_coords: Any, pairs: CandidatePairs, seeds: Any) -> Any:
    """spec per candidate pair (P,): the max over the query's seeds of ẑ_x·ẑ_s, one (P × d)·(P × s × d)
    contraction over the pairs. Not a batched matmul over candidates padded to the batch's largest set: its
    shape, and so the last bits of a query's products, would follow the batch-mates."""
    xp = be.xp
    cand = unit_coords[pairs.rows]  # P × d
    seed_coords = unit_coords[seeds.T]  # B × s × d
    return xp.einsum("pd,psd->ps", cand, seed_coords[pairs.cols]).max(axis=1)


def _chunk_graph(be: Backend, weights: Any) -> tuple[Any, Any, float]:
    """(W, its 0/1 pattern, both CSR on the backend; the mean degree of a node reached along edges,
    Σd²/Σd: W entries read per candidate)."""
    weights = weights.tocsr().astype(np.float32)
    weights.sum_duplicates()
    pattern = weights.copy()
    pattern.data = (pattern.data != 0).astype(np.float32)
    degree = np.diff(weights.indptr).astype(np.float64)
    reach = float((degree ** 2).sum() / degree.sum()) if degree.sum() else 0.0
    return be.csr(weights), be.csr(pattern), reach


class SpectragRetriever(BaseRetriever):
    """Batched SpectRAG retrieval over an `Index` with its SpectRAG stage (`index.stage("spectrag")`);
    see the module docstring for what the `QueryResult`s hold."""

    method = "spectrag"
    #: bytes per (chunk, query) of the dense chunks × B blocks alive at once: cosine, BM25 (and its
    #: sparse product), relevance and its temporaries, the BFS frontier, reach and masks
    CHUNK_BYTES_PER_QUERY = 10 * 4
    #: bytes per W entry read when the induced subgraphs are gathered (ops/subgraph_ppr.py)
    EDGE_BYTES = 48

    def __init__(self, index: Index, config: RetrievalConfig | None = None, encoder: Encoder | None = None,
                 backend: str | Backend = "auto", vector_cache: VectorCache | None = None,
                 allow_mixed_encoder: bool = False):
        """`config.spectrag` holds the settings (default: `RetrievalConfig(method="spectrag")`).
        `encoder` defaults to the model and runtime that embedded the index; another one is an
        error unless `allow_mixed_encoder`. `vector_cache` keeps query vectors on disk across runs."""
        stage = index.stage("spectrag")  # the chunk graph, its spectral coordinates and token counts
        if stage is None:
            raise TigragError(MISSING_STAGE)
        if stage.n_chunks != index.n_chunks or len(stage.chunk_tokens) != index.n_chunks:
            raise TigragError(f"the index's SpectRAG stage covers {stage.n_chunks} chunks but the index has "
                              f"{index.n_chunks}; rebuild it with `tigrag extend INDEX --methods spectrag`")
        super().__init__(index, config, encoder, backend, vector_cache, allow_mixed_encoder)
        self.settings: SpectragQueryConfig
        self.settings, self.chosen_modes = resolve_relevance_scale(self.config.spectrag,
                                                                   index_encoder_config(index).model)
        if self.chosen_modes:  # the retriever's config says what runs, not "auto"
            self.config = self.config.with_section("spectrag", self.settings)
        device = self.device
        self.weights, self.adjacency, self.reach_degree = self._graph(index, stage)
        if self.settings.bm25 == "okapi":
            self.okapi = device.get("spectrag.okapi", lambda: build_okapi(index.chunk_texts))
            self.bm25 = device.get("spectrag.okapi_matrix", lambda: self.be.csr(self.okapi.matrix))
            self.n_terms = self.okapi.n_words
        else:
            self.okapi = None
            self.bm25 = device.bm25
            self.n_terms = index.n_vocab
        self.embeddings = device.embeddings
        self.unit_coords = device.get("spectrag.unit_coords", lambda: self.be.asarray(unit_rows(stage.coords))
                                      if stage.coords.ndim == 2 and stage.coords.shape[1] else None, source=stage)
        self.chunk_tokens = np.asarray(stage.chunk_tokens, dtype=np.int64)
        budget = self.settings.token_budget
        if budget == 0:
            budget = int(round(10 * float(self.chunk_tokens.mean()))) if self.chunk_tokens.size else 0
        self.token_budget = max(int(budget), 1)

    def _graph(self, index: Index, stage: Any) -> tuple[Any, Any, float]:
        """The chunk graph on the device (`_chunk_graph`): the stage's W, plus `title_links` × the title-link
        pairs (`chunk_signals.link_signal`, found once per index) when that weight is above 0."""
        device, weight = self.device, self.settings.title_links
        if weight <= 0:
            return device.get("spectrag.chunk_graph", lambda: _chunk_graph(self.be, stage.weights), source=stage)
        if index.config.spectrag.question_signal == "links":
            raise TigragError("spectrag.title_links adds the title-link pairs the index's SpectRAG stage already holds "
                              "(it was built with spectrag.question_signal=links): set spectrag.title_links=0 for this "
                              "index, or rebuild the stage with `tigrag extend INDEX --methods spectrag` and the default "
                              "question signal")
        from .chunk_signals import link_signal

        links = device.get("spectrag.title_link_pairs", lambda: link_signal(
            index.chunk_texts, index.chunk_passage, index.passage_titles, index.config.chunk.title_in_chunk))
        return device.get(f"spectrag.chunk_graph+links:{weight!r}", lambda: _chunk_graph(
            self.be, stage.weights + np.float32(weight) * links), source=stage)

    def default_k(self) -> int:
        """k=None returns the context alone (0: no ranking past it)."""
        return 0

    def query_seeds(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Each query's terms in the BM25 of `bm25`: the public code's words (okapi), or the index's
        valid tokens."""
        if self.okapi is None:
            return super().query_seeds(queries)
        return [self.okapi.query_ids(q) for q in queries]

    def bytes_per_query(self) -> int:
        candidates = max(self.settings.max_candidates, self.settings.seeds)
        return (self.index.n_chunks * self.CHUNK_BYTES_PER_QUERY
                + int(candidates * self.reach_degree * self.EDGE_BYTES))

    # -- device side ----------------------------------------------------------------------
    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        be, xp, cfg = self.be, self.be.xp, self.settings
        if len(batch) == 0:
            return []
        seeds, rel, matched, mask, sizes = self._candidates(batch)
        t = time.perf_counter()
        pairs = CandidatePairs.from_mask(be, mask)
        t = self.timer.add("expand", t)
        if cfg.ppr_norm == "off":  # no PPR term: as in a query whose induced subgraph has no edge
            ppr, has_edges = xp.zeros(pairs.rows.size, dtype=xp.float32), xp.zeros(len(batch), dtype=bool)
        else:
            pi, has_edges, _ = subgraph_pagerank(be, self.weights, pairs, seeds, cfg.damping, cfg.ppr_tol,
                                                 cfg.ppr_max_iter)
            ppr = ppr_ranks(be, pairs, pi) if cfg.ppr_norm == "rank" else max_normalised(be, pairs, pi)
        t = self.timer.add("ppr", t)
        spec = spectral_proximity(be, self.unit_coords, pairs, seeds) if self.unit_coords is not None else None
        t = self.timer.add("spectral", t)
        score = self._score(pairs, rel[pairs.rows, pairs.cols], ppr, has_edges[pairs.cols], spec)
        ranked = self._rank_candidates(pairs, score)
        rest = self._rest(mask, rel, pairs.counts, k)
        # non-candidates score (1 − α)·rel, the score with no proximity; rel where no term exists
        plain = np.zeros(len(batch), dtype=bool) if spec is not None else ~be.to_host(has_edges)
        outside = np.where(plain, np.float32(1), np.float32(1 - cfg.alpha))
        fallback = ~be.to_host(matched)
        self.timer.add("score", t)
        return self._collect(batch.queries, pairs.counts, ranked, rest, outside, k, fallback, sizes, seeds.shape[0])

    def _candidates(self, batch: PreparedBatch) -> tuple[Any, Any, Any, Any, np.ndarray]:
        """Stages 1-3 of a block: (S0 s × B, rel chunks × B, BM25 matched (B,), candidate mask
        chunks × B, candidates after each hop)."""
        be, cfg = self.be, self.settings
        t = time.perf_counter()
        dense = query_dot(be, self.embeddings, batch.vectors, self.device.embedding_tiles)  # chunks × B cosine
        lexical = bm25_scores(be, self.bm25, batch.seeds, self.n_terms)
        seeds = fused_seeds(be, dense, lexical, cfg.seeds, cfg.rrf_k)
        rel, matched = relevance(be, dense, lexical, cfg.dense_share, cfg.relevance_scale)
        del dense, lexical
        t = self.timer.add("seed", t)
        mask, sizes = expand(be, self.adjacency, seeds, rel, cfg.hops, cfg.max_candidates)
        self.timer.add("expand", t)
        return seeds, rel, matched, mask, sizes

    def explain(self, queries: Sequence[str]) -> dict[str, list[list[int]]]:
        """Each query's seeds S0 (in fusion order) and candidate set (ascending ids): what stages 1-3
        chose, for comparisons with the public code (bench/studies/faithfulness_spectrag.py)."""
        seeds_out: list[list[int]] = []
        candidates_out: list[list[int]] = []
        for start in range(0, len(queries), self.batch_size()):
            batch = self.prepare(list(queries[start:start + self.batch_size()]))
            seeds, _, _, mask, _ = self._candidates(batch)
            seeds, mask = self.be.to_host(seeds), self.be.to_host(mask)
            seeds_out += [[int(c) for c in dict.fromkeys(seeds[:, q].tolist())] for q in range(len(batch))]
            candidates_out += [np.flatnonzero(mask[:, q]).tolist() for q in range(len(batch))]
        return {"seeds": seeds_out, "candidates": candidates_out}

    def trace_lines(self, result: QueryResult) -> list[str]:
        """What `tigrag query` prints under a query's ranking: seeds, candidates per hop, the context."""
        lines = []
        if result.dense_fallback:
            lines.append("BM25 matched no chunk: the seeds are the dense list alone and the relevance is the raw cosine")
        if result.hops:
            growth = ", ".join(f"hop {h.hop}: {h.pool_size}" for h in result.hops)
            lines.append(f"SpectRAG: {result.hops[0].seeds} seed chunks S0 (dense and BM25 by RRF); candidates after "
                         f"{growth} (cap {self.settings.max_candidates})")
        if result.context is not None:
            used = int(self.chunk_tokens[result.chunk_ids[:result.context]].sum()) if result.context else 0
            lines.append(f"context: the first {result.context} chunks, {used:,} cl100k tokens of a "
                         f"{self.token_budget:,}-token budget")
        return lines

    def _score(self, pairs: CandidatePairs, rel: Any, ppr: Any, has_ppr: Any, spec: Any) -> Any:
        """Per-pair scores (1 − α)·rel + α·proximity; rel alone where no proximity term exists;
        (1 − α)·rel for candidates below the proximity floor (`proximity_floor` × the query's best
        candidate relevance)."""
        be, xp, cfg = self.be, self.be.xp, self.settings
        alpha, share = np.float32(cfg.alpha), np.float32(cfg.spectral_share)
        if spec is None:
            score = xp.where(has_ppr, (1 - alpha) * rel + alpha * ppr, rel)
            no_term = ~has_ppr
        else:
            proximity = xp.where(has_ppr, share * spec + (1 - share) * ppr, spec)
            score = (1 - alpha) * rel + alpha * proximity
            no_term = xp.zeros(rel.shape, dtype=bool)
        if cfg.proximity_floor > 0:
            best = pairs.padded(be, rel, np.float32(NEG_INF)).max(axis=1)
            below = (rel < np.float32(cfg.proximity_floor) * best[pairs.cols]) & ~no_term
            score = xp.where(below, (1 - alpha) * rel, score)
        return score.astype(xp.float32)

    def _rank_candidates(self, pairs: CandidatePairs, score: Any) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × width on the host, each query's candidates best first (equal scores:
        lower id; -1 / -inf past its candidates)."""
        be, xp = self.be, self.be.xp
        ids = pairs.padded(be, pairs.rows, -1)  # ascending ids within a query
        scores = pairs.padded(be, score, NEG_INF)
        order = be.argsort_stable(-scores, axis=1)
        return (be.to_host(xp.take_along_axis(ids, order, axis=1)),
                be.to_host(xp.take_along_axis(scores, order, axis=1)))

    def _rest(self, mask: Any, rel: Any, counts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, rel), B × depth on the host, of the most relevant non-candidates, deep enough for
        every query whose candidates do not reach depth k (equal relevance: lower id)."""
        be, xp = self.be, self.be.xp
        n = rel.shape[0]
        depth = min(k, n) - int(counts.min()) if counts.size else 0
        if depth <= 0:
            return np.zeros((counts.size, 0), dtype=np.int64), np.zeros((counts.size, 0), dtype=np.float32)
        ids, vals = ranked_top_k(be, xp.where(mask, NEG_INF, rel), depth)
        return be.to_host(ids).T, be.to_host(vals).T

    def _collect(self, queries: list[str], counts: np.ndarray, ranked: tuple[np.ndarray, np.ndarray],
                 rest: tuple[np.ndarray, np.ndarray], outside: np.ndarray, k: int, fallback: np.ndarray,
                 sizes: np.ndarray, n_seeds: int) -> list[QueryResult]:
        t = time.perf_counter()
        cfg, index = self.settings, self.index
        ids, scores = ranked
        valid = np.maximum(ids, 0)
        positions, n_selected = select_contexts(
            scores.astype(np.float64), self.chunk_tokens[valid], index.chunk_passage[valid].astype(np.int64), counts,
            self.token_budget, cfg.core_size, cfg.core_floor, cfg.tail_floor, cfg.tie_band)
        rest_ids, rest_vals = rest
        out = []
        for q, query in enumerate(queries):
            m, size = int(counts[q]), int(n_selected[q])
            chosen = positions[q, :size]
            others = np.ones(m, dtype=bool)
            others[chosen] = False
            order = np.concatenate([chosen, np.nonzero(others)[0]])
            chunk_ids = ids[q, order].tolist()
            chunk_scores = scores[q, order].tolist()
            depth = min(size if k == 0 else k, index.n_chunks)
            if depth > m:
                finite = np.isfinite(rest_vals[q])
                chunk_ids += rest_ids[q][finite][: depth - m].tolist()
                chunk_scores += (outside[q] * rest_vals[q][finite][: depth - m]).tolist()
            chunk_ids, chunk_scores = chunk_ids[:depth], chunk_scores[:depth]
            hops = [HopTrace(hop=h + 1, seeds=n_seeds, pool_size=int(sizes[h, q]), top_chunks=[], new_entities=[],
                             dense_fallback=bool(fallback[q])) for h in range(sizes.shape[0])]
            out.append(self.result(query, chunk_ids, chunk_scores, fallback[q], hops, context=min(size, depth)))
        self.timer.add("select", t)
        return out
