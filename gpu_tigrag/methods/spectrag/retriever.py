"""The SpectRAG retriever (paper Table 2; public code `query/*`; docs/design-notes.md#spectrag-query):
hybrid seeds, expansion over the chunk graph, proximity re-scoring and token-budgeted context
selection.

Per block of B queries, every numeric stage is an array operation over the block's (query, chunk)
candidate pairs, never a chunks × B block (candidates.py: seeds from the dense first stage's and BM25's
top lists, relevance of the pairs a query reaches, expansion over pairs); only the selection loop runs
on the host, as a numba loop over the B × |M| candidates:

1. **Seeds.** c = E·qᵀ; dense top-s and BM25 top-s (scores > 0) fused by RRF (BM25: the public
   code's BM25Okapi, lexical.py, or the index's, `bm25`),
   1 / (rrf_k + rank + 1) with ranks from 0; S0 = the top s by fused score, equal scores in
   first-seen order (the dense list, then the BM25 list), as the code's stable sort does.
2. **Relevance** of every chunk: rel = share·c/max c + (1 − share)·bm25⁺/max bm25⁺, where c/max c
   is c itself when max c ≤ 0 (the code), and rel = c (raw) when BM25 matches nothing. With
   `relevance_scale` "spread", (c − mean c)/(max c − mean c) takes c/max c's place (and c's where BM25
   matches nothing), mean c = (mean chunk vector)·q; "auto" (the default) is "max" on the code's encoder
   (MiniLM), "spread" on another. max c and max bm25⁺ are the first entries of the seeds' two lists.
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
   **Title-link lift** (`link_seeds` r > 0; off in the paper): the query's r seeds of highest rel (equal: S0
   order) and every chunk of each passage they name by title (text/titles.forward_title_links: the directed
   edge an LLM's utility question "who is the director it names?" would make) join the candidates before PPR
   (candidates.linked_keys) and score `link_lift` more.
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
from ...ops.subgraph_ppr import CandidatePairs, subgraph_pagerank
from ...index.index import Index
from ...ops.rows import unit_rows
from ...ops.topk import ranked_top_k
from ...ops.fusion import NEG_INF, postings_max_weight, query_term_rows
from ...retrieve.first_stage import SCREEN_BLOCK_ROWS, first_stage
from .candidates import (BlockRelevance, chunk_centroid, expand_pairs, fused_seeds, linked_keys, mean_cosine,
                         seed_lists)
from ...retrieve.results import HopTrace, QueryResult
from ...retrieve.base import BaseRetriever, PreparedBatch
from .lexical import build_okapi
from .token_budget import select_contexts

MISSING_STAGE = ("this index has no SpectRAG stage; build it with `tigrag extend INDEX --methods spectrag` "
                 "(or `tigrag index ... --methods tigrag,spectrag`)")


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
    """(W as CSR on the backend; the expansion's reach CSR on the backend, row i the chunks j with W[j, i] ≠ 0,
    the ones a hop from i reaches; the mean degree of a node reached along edges, Σd²/Σd: W entries read per
    candidate)."""
    weights = weights.tocsr().astype(np.float32)
    weights.sum_duplicates()
    reach = weights.T.tocsr()
    reach.eliminate_zeros()
    reach.sort_indices()
    degree = np.diff(weights.indptr).astype(np.float64)
    mean_reach = float((degree ** 2).sum() / degree.sum()) if degree.sum() else 0.0
    return be.csr(weights), be.csr(reach), mean_reach


class SpectragRetriever(BaseRetriever):
    """Batched SpectRAG retrieval over an `Index` with its SpectRAG stage (`index.stage("spectrag")`);
    see the module docstring for what the `QueryResult`s hold."""

    method = "spectrag"
    #: bytes per W entry read when the induced subgraphs (ops/subgraph_ppr.py) and a hop's reach are gathered
    EDGE_BYTES = 48
    #: bytes per (chunk, query) of a block of every chunk's relevance (cosine, BM25, relevance and temporaries),
    #: made only for the queries whose candidates do not fill the k asked for, a slice of them at a time
    REST_BYTES_PER_ENTRY = 10 * 4
    #: the largest such block, bytes
    REST_BLOCK_BYTES = 64 << 20

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
        self.weights, self.reach, self.reach_degree = self._graph(index, stage)
        self.forward_links = device.get("spectrag.forward_title_links", lambda: self.be.csr(device.title_links)) \
            if self.settings.link_seeds > 0 else None
        if self.settings.bm25 == "okapi":
            self.okapi = device.get("spectrag.okapi", lambda: build_okapi(index.chunk_texts))
            okapi = self.okapi.matrix
            self.bm25 = device.get("spectrag.okapi_matrix", lambda: self.be.csr(okapi))
            self.postings = device.get("spectrag.okapi_postings", lambda: self.be.csr(okapi.T.tocsr()))
            self.max_weight = device.get("spectrag.okapi_max_weight", lambda: postings_max_weight(okapi))
            self.n_terms = self.okapi.n_words
            # MaxScore's bounds hold for positive weights; the public code's idf floor (ε × the mean idf) can be
            # negative on a corpus where most words are in most chunks: its BM25 top list is then found in blocks
            self.maxscore = bool(okapi.nnz == 0 or okapi.data.min() > 0)
        else:
            self.okapi = None
            self.bm25, self.postings, self.max_weight = device.bm25, device.postings, device.postings_max_weight
            self.n_terms = index.n_vocab
            self.maxscore = True
        self.embeddings = device.embeddings
        self.centroid = device.get("spectrag.centroid", lambda: self.be.asarray(chunk_centroid(index.embeddings)))
        self.search = first_stage(device, self.config.dense).search
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
        """The candidates' reach and induced subgraphs, and a query's share of the dense search's screening block
        (no chunks × B block: the relevance blocks of `_rest` are cut to REST_BLOCK_BYTES)."""
        candidates = max(self.settings.max_candidates, self.settings.seeds)
        return int(candidates * self.reach_degree * self.EDGE_BYTES) + 2 * 4 * SCREEN_BLOCK_ROWS

    # -- device side ----------------------------------------------------------------------
    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        be, xp, cfg = self.be, self.be.xp, self.settings
        if len(batch) == 0:
            return []
        seeds, relevance, pairs, sizes, lifted = self._candidates(batch)
        t = time.perf_counter()
        if cfg.ppr_norm == "off":  # no PPR term: as in a query whose induced subgraph has no edge
            ppr, has_edges = xp.zeros(pairs.rows.size, dtype=xp.float32), xp.zeros(len(batch), dtype=bool)
        else:
            pi, has_edges, _ = subgraph_pagerank(be, self.weights, pairs, seeds, cfg.damping, cfg.ppr_tol,
                                                 cfg.ppr_max_iter)
            ppr = ppr_ranks(be, pairs, pi) if cfg.ppr_norm == "rank" else max_normalised(be, pairs, pi)
        t = self.timer.add("ppr", t)
        spec = spectral_proximity(be, self.unit_coords, pairs, seeds) if self.unit_coords is not None else None
        t = self.timer.add("spectral", t)
        score = self._score(pairs, relevance.pairs(pairs.rows, pairs.cols), ppr, has_edges[pairs.cols], spec)
        if lifted is not None:
            score = self._lift(pairs, score, lifted)
        ranked = self._rank_candidates(pairs, score)
        rest = self._rest(pairs, relevance, k)
        # non-candidates score (1 − α)·rel, the score with no proximity; rel where no term exists
        plain = np.zeros(len(batch), dtype=bool) if spec is not None else ~be.to_host(has_edges)
        outside = np.where(plain, np.float32(1), np.float32(1 - cfg.alpha))
        fallback = ~be.to_host(relevance.matched)
        self.timer.add("score", t)
        return self._collect(batch.queries, pairs.counts, ranked, rest, outside, k, fallback, sizes, seeds.shape[0])

    def _candidates(self, batch: PreparedBatch) -> tuple[Any, BlockRelevance, CandidatePairs, np.ndarray, Any]:
        """Stages 1-3 of a block (candidates.py): (S0 s × B, the block's relevance, the candidate pairs,
        candidates after each hop, the sorted keys of the chunks the title-link lift raises or None)."""
        be, cfg = self.be, self.settings
        t = time.perf_counter()
        vectors = be.asarray(batch.vectors).astype(be.xp.float32)
        count = min(cfg.seeds, self.index.n_chunks)
        dense_ids, top, bm25_ids, matched, lex_top = seed_lists(
            be, self.search, self.bm25, self.postings, self.max_weight, vectors, batch.seeds, self.n_terms, count,
            self.maxscore)
        seeds = fused_seeds(be, dense_ids, bm25_ids, matched, cfg.rrf_k)
        mean = mean_cosine(be, self.centroid, vectors) if cfg.relevance_scale == "spread" else be.xp.zeros_like(top)
        relevance = BlockRelevance(be, self.embeddings, self.bm25, self.n_terms, vectors, batch.seeds,
                                   query_term_rows(be, batch.seeds, self.n_terms), top, mean, lex_top,
                                   cfg.dense_share, cfg.relevance_scale)
        t = self.timer.add("seed", t)
        n = self.index.n_chunks
        expansion = expand_pairs(be, self.reach, seeds, n, relevance.pairs, cfg.hops, cfg.max_candidates)
        keys, lifted = expansion.keys, None
        if self.forward_links is not None:
            lifted = linked_keys(be, self.forward_links, seeds, relevance.pairs, cfg.link_seeds, n)
            keys = be.xp.unique(be.xp.concatenate([keys, lifted]))
        pairs = CandidatePairs.from_keys(be, keys, n, len(batch))
        self.timer.add("expand", t)
        return seeds, relevance, pairs, expansion.sizes, lifted

    def explain(self, queries: Sequence[str]) -> dict[str, list[list[int]]]:
        """Each query's seeds S0 (in fusion order) and candidate set (ascending ids): what stages 1-3
        chose, for comparisons with the public code (bench/studies/faithfulness_spectrag.py)."""
        seeds_out: list[list[int]] = []
        candidates_out: list[list[int]] = []
        for start in range(0, len(queries), self.batch_size()):
            batch = self.prepare(list(queries[start:start + self.batch_size()]))
            seeds, _, pairs, _, _ = self._candidates(batch)
            seeds, rows = self.be.to_host(seeds), self.be.to_host(pairs.rows)
            col_start = self.be.to_host(pairs.col_start)
            seeds_out += [[int(c) for c in dict.fromkeys(seeds[:, q].tolist())] for q in range(len(batch))]
            candidates_out += [rows[col_start[q]:col_start[q + 1]].tolist() for q in range(len(batch))]
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
        if self.settings.link_seeds > 0:
            lifted = "seed" if self.settings.link_seeds == 1 else f"{self.settings.link_seeds} seeds"
            lines.append(f"title-link lift: the most relevant {lifted} and every passage named by title there score "
                         f"+{self.settings.link_lift:g}")
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

    def _lift(self, pairs: CandidatePairs, score: Any, lifted: Any) -> Any:
        """`score` with `link_lift` added to the pairs whose (query · n + chunk) key is in `lifted` (sorted)."""
        xp = self.be.xp
        keys = pairs.cols * self.index.n_chunks + pairs.rows
        place = xp.minimum(xp.searchsorted(lifted, keys), lifted.size - 1)
        return (score + xp.where(lifted[place] == keys, np.float32(self.settings.link_lift),
                                 np.float32(0))).astype(xp.float32)

    def _rank_candidates(self, pairs: CandidatePairs, score: Any) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × width on the host, each query's candidates best first (equal scores:
        lower id; -1 / -inf past its candidates)."""
        be, xp = self.be, self.be.xp
        ids = pairs.padded(be, pairs.rows, -1)  # ascending ids within a query
        scores = pairs.padded(be, score, NEG_INF)
        order = be.argsort_stable(-scores, axis=1)
        return (be.to_host(xp.take_along_axis(ids, order, axis=1)),
                be.to_host(xp.take_along_axis(scores, order, axis=1)))

    def _rest(self, pairs: CandidatePairs, relevance: BlockRelevance, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, rel), B × depth on the host, of the most relevant non-candidates of each query whose candidates do
        not reach depth k (equal relevance: lower id; −1 / −inf for the other queries and past a query's
        chunks): every chunk's relevance for those queries only, a slice of them at a time."""
        be = self.be
        n, counts = self.index.n_chunks, pairs.counts
        depth = min(k, n) - int(counts.min()) if counts.size else 0
        if depth <= 0:
            return np.zeros((counts.size, 0), dtype=np.int64), np.zeros((counts.size, 0), dtype=np.float32)
        ids_out = np.full((counts.size, depth), -1, dtype=np.int64)
        vals_out = np.full((counts.size, depth), NEG_INF, dtype=np.float32)
        short = np.flatnonzero(counts < min(k, n))
        step = max(1, self.REST_BLOCK_BYTES // max(n * self.REST_BYTES_PER_ENTRY, 1))
        for first in range(0, short.size, step):
            cols = short[first:first + step]
            rel = relevance.block(cols)
            column = np.full(counts.size, -1, dtype=np.int64)  # each query's column in this slice, -1: not in it
            column[cols] = np.arange(cols.size)
            of_pair = be.asarray(column)[pairs.cols]
            listed = of_pair >= 0  # the slice's queries' candidates are out of their rest
            rel[pairs.rows[listed], of_pair[listed]] = NEG_INF
            ids, vals = ranked_top_k(be, rel, depth)
            ids_out[cols], vals_out[cols] = be.to_host(ids).T, be.to_host(vals).T
        return ids_out, vals_out

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
