"""The TIGRAG retriever: batched retrieval over the token graph, rerank and entity-driven multi-hop.

Per batch of B queries, every numeric stage is one array operation over the batch:
seed matrix -> PPR (vocab × B, or a sparse push) -> top-γ -> PPR-weighted BM25 -> pooling ->
masked cosine. The score steps are held by `self.blocks`: full chunks × B blocks (the
reference, `tigrag.blocks="full"`) or per-query candidate lists (`"sparse"`), behind the same
methods. Between hops only the entity bookkeeping (sets of entity ids per query) runs in Python;
expansion tokens and texts are lookups in tables built at index time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ...backend import Backend
from ...config import RetrievalConfig
from .config import resolve_modes
from ...ops.ppr import pagerank_of_seeds, top_gamma
from ...ops.push_ppr import PushGraph, push_bytes_per_query, push_pagerank
from ...encoders import Encoder, VectorCache
from ...index.index import Index
from .bridging import Bridge, BridgeFinder, rank_bridges
from .entity_source import EntityExtractor, IndexEntities, QueryTimeEntities
from .expansion import expanded_query_vectors, repeats_question, typed_ranks
from ...retrieve.base import BaseRetriever, PreparedBatch
from ...retrieve.results import HopTrace, QueryResult
from .full_blocks import FullBlocks
from .sparse_blocks import SparseBlocks
from ...text.titles import TitleIndex

log = logging.getLogger(__name__)


@dataclass
class GraphHop:
    """Output of the token-graph stage (PPR, weighted BM25, pooling) for a batch: pool mask and
    diagnostics."""

    pool: Any  # bool chunks × B
    rho: Any  # float32 chunks × B, the PPR-weighted BM25 score ρ
    n_seeds: np.ndarray  # int, per query: distinct seed tokens
    dense_fallback: np.ndarray  # bool, per query: no seed or an empty pool, so every chunk is pooled
    ppr: Any = None  # PPR scores, float32 vocab × B or a SparsePPR (push): they rank bridging entities


@dataclass
class HopState:
    """One hop of the multi-hop loop, over the queries still expanding (its columns)."""

    pick: Any  # float32 chunks × columns: the ranking whose top-ι chunks drive the next hop
    cols: np.ndarray  # int, per column: the query's position in the batch
    pool_sizes: np.ndarray  # int, per column: chunks in the hop's pool
    graph_hop: GraphHop  # the token-graph stage's output for these columns


class TigragRetriever(BaseRetriever):
    """Batched TIGRAG retrieval over a loaded `Index`."""

    method = "tigrag"
    OPTIONS = BaseRetriever.OPTIONS | {"entity_extractor"}

    def __init__(
        self,
        index: Index,
        config: RetrievalConfig | None = None,
        encoder: Encoder | None = None,
        backend: str | Backend = "auto",
        entity_extractor: EntityExtractor | None = None,
        vector_cache: VectorCache | None = None,
        allow_mixed_encoder: bool = False,
    ):
        """`config` defaults to the `best` preset (gpu_tigrag.presets); `RetrievalConfig()` is the
        paper's method; its settings are `config.tigrag`. `entity_extractor` is the NER of
        `tigrag.entities_at="query"` (default: spaCy).
        `encoder` defaults to the model and runtime that embedded the index; another one is an
        error unless `allow_mixed_encoder`. `vector_cache` keeps query and expansion vectors on
        disk across runs."""
        super().__init__(index, config, encoder, backend, vector_cache, allow_mixed_encoder)
        self.settings, self.chosen_modes = resolve_modes(self.config.tigrag, index.n_chunks)
        if self.chosen_modes:  # the retriever's config says what runs, not "auto"
            self.config = self.config.with_section("tigrag", self.settings)
            log.debug("tigrag: %s chunks %s tigrag.sparse_min_chunks (%s): auto chose %s", f"{index.n_chunks:,}",
                      "≥" if index.n_chunks >= self.settings.sparse_min_chunks else "<",
                      f"{self.settings.sparse_min_chunks:,}",
                      ", ".join(f"{k}={v}" for k, v in self.chosen_modes.items()))
        config, device = self.settings, self.device
        self.transition = device.transition if config.ppr.algorithm == "exact" else None
        self.push_graph = None
        if config.ppr.algorithm == "push":  # sparse PPR: no transition matrix, no vocab × B block
            self.push_graph = device.get("ppr.push_graph", lambda: PushGraph.from_adjacency(self.be, index.graph))
        self.bm25 = device.bm25
        if config.scoring == "graph":  # ablation: token presence, no BM25 weighting
            self.bm25 = device.get("tigrag.bm25_presence", self._presence)
        self.degree = None
        if config.expansion == "degree":  # ablation: weighted degree centrality, the same for every query
            self.degree = device.get("tigrag.degree", self._degree)
        self.embeddings = device.embeddings
        self.entities = (IndexEntities(index, config.entity_labels) if config.entities_at == "index"
                         else QueryTimeEntities(index, config.entity_labels, entity_extractor))
        fusion = config.fusion
        self.titles = device.get("tigrag.titles", lambda: TitleIndex(index.passage_titles)) if fusion.title_links \
            else None
        self.bridges = BridgeFinder(index, self.entities, self.titles)
        self.passage_chunks = device.get("tigrag.passage_chunks", self._passage_chunks)
        self.device_passage_chunks = device.get("tigrag.passage_chunks_device", lambda: tuple(
            self.be.asarray(a) for a in self.passage_chunks))
        self.blocks = FullBlocks(self) if config.blocks == "full" else SparseBlocks(self)

    @classmethod
    def default_config(cls) -> RetrievalConfig:
        from ...presets import preset

        return preset()

    def _presence(self) -> Any:
        """BM25's sparsity with every entry 1 (a copy: the host CSR may be the index's own matrix)."""
        presence = self.device.bm25.copy()
        presence.data = self.be.xp.ones_like(presence.data)
        return presence

    def _degree(self) -> Any:
        degree = np.asarray(self.index.graph.sum(axis=0)).ravel().astype(np.float32)
        return self.be.asarray(degree / max(float(degree.sum()), 1e-12))

    def _passage_chunks(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, chunk ids): the chunks of each passage, in chunk order."""
        index = self.index
        order = np.argsort(index.chunk_passage, kind="stable")
        indptr = np.zeros(len(index.passage_titles) + 1, dtype=np.int64)
        np.cumsum(np.bincount(index.chunk_passage, minlength=len(index.passage_titles)), out=indptr[1:])
        return indptr, order

    # -- stages ---------------------------------------------------------------------------
    def graph_hop(self, seeds: Sequence[np.ndarray]) -> GraphHop:
        """PPR expansion over the token graph, weighted BM25 and pooling for a batch of seed sets."""
        be, xp, cfg = self.be, self.be.xp, self.settings
        t = time.perf_counter()
        n_seeds = np.array([np.unique(s).size for s in seeds], dtype=np.int64)
        if self.degree is not None:
            scores = xp.broadcast_to(self.degree[:, None], (self.index.n_vocab, len(seeds)))
            ids, weights = top_gamma(be, scores, cfg.ppr.top_gamma)
        elif self.push_graph is not None:
            scores = push_pagerank(be, self.push_graph, seeds, cfg.ppr)
            ids, weights = scores.top_gamma(be, cfg.ppr.top_gamma)
        else:
            scores, _ = pagerank_of_seeds(be, self.transition, seeds, self.index.n_vocab, cfg.ppr)
            ids, weights = scores.top_gamma(be, cfg.ppr.top_gamma)
        self.timer.add("ppr", t)
        rho, pool, fallback = self.blocks.score_and_pool(ids, weights, n_seeds)
        return GraphHop(pool, rho, n_seeds, fallback, scores)

    #: bytes per (node, query) of the exact PPR's vocab × B blocks: iterate, next, seeds, and hop 1's
    #: scores kept for the bridging choice (the push mode has none: ops.push_ppr.push_bytes_per_query)
    VOCAB_BYTES_PER_QUERY = 5 * 4

    def bytes_per_query(self) -> int:
        """The PPR's working memory plus the score blocks' (`blocks.bytes_per_query`: dense blocks over
        every chunk, or the candidates the sparse blocks have met)."""
        ppr = self.settings.ppr
        vocab_bytes = (push_bytes_per_query(self.be, self.index.n_vocab, ppr.top_gamma) if ppr.algorithm == "push"
                       else self.index.n_vocab * self.VOCAB_BYTES_PER_QUERY)
        return self.blocks.bytes_per_query() + vocab_bytes

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        be, cfg, fusion = self.be, self.settings, self.settings.fusion
        queries, seeds = batch.queries, batch.seeds
        n = len(queries)
        query_vectors = be.asarray(batch.vectors)
        blocks = self.blocks
        first_hop = self.graph_hop(seeds)
        t = time.perf_counter()
        cosine = blocks.question_cosine(query_vectors, first_hop, k)
        sigma = self._rank_pool(first_hop, lambda: blocks.pool_cosine(first_hop, cosine))
        t = self.timer.add("rerank", t)
        question_links = self.titles.mentions_many(queries) if self.titles is not None else None
        linked = blocks.link_mask(question_links)
        pick = sigma  # the ranking whose top-ι chunks drive the next hop
        if fusion.first_hop == "hybrid":
            pick = blocks.hybrid_pick(cosine, seeds, first_hop, linked)
        self.timer.add("fusion", t)
        traces: list[list[HopTrace]] = [[] for _ in range(n)]
        seen: list[dict[Any, Bridge]] = [{} for _ in range(n)]
        hop_scores: list[tuple[np.ndarray, Any]] = []
        current = HopState(pick, np.arange(n), blocks.pool_sizes(first_hop), first_hop)
        for hop_number in range(1, cfg.hops + 1):
            t = time.perf_counter()
            top = blocks.top_chunks(current.pick, cfg.iota)
            chunk_lists = [[int(c) for c in row if c >= 0] for row in top]
            if hop_number == 1 and question_links is not None:
                chunk_lists = self._with_named_passages(chunk_lists, pick, question_links)
            new_lists = [list({b.key: b for b in found if b.key not in seen[q]}.values())
                         for q, found in zip(current.cols, self.bridges.candidates(chunk_lists))]
            if fusion.bridge_entities:
                new_lists = rank_bridges(be, current.graph_hop.ppr, range(len(new_lists)), new_lists,
                                         fusion.bridge_entities)
            next_active: list[int] = []
            for col, (q, chunks, new) in enumerate(zip(current.cols, chunk_lists, new_lists)):
                seen[q].update((b.key, b) for b in new)
                traces[q].append(HopTrace(
                    hop=hop_number,
                    seeds=int(current.graph_hop.n_seeds[col]),
                    pool_size=int(current.pool_sizes[col]),
                    top_chunks=chunks,
                    new_entities=[b.text for b in new],
                    dense_fallback=bool(current.graph_hop.dense_fallback[col]),
                ))
                if new:
                    next_active.append(int(q))
            self.timer.add("entities", t)
            if hop_number == cfg.hops or not next_active:
                break
            current = self._expanded_hop(queries, seeds, seen, np.asarray(next_active), query_vectors)
            hop_scores.append((current.cols, current.pick))
        t = time.perf_counter()
        final = blocks.merge_hops(sigma, hop_scores)
        if self.titles is not None:
            bridged = blocks.link_mask([[p for b in seen[q].values() for p in b.passages] for q in range(n)])
            final = blocks.add_link_bonus(final, cosine, linked, bridged)
        self.timer.add("fusion", t)
        return self._collect(queries, final, k, first_hop.dense_fallback, traces)

    def _with_named_passages(self, chunk_lists: list[list[int]], pick: Any,
                             question_links: list[list[int]]) -> list[list[int]]:
        """Hop-1 sources plus the best chunk (by `pick`) of every passage the question names: a
        comparison of two films needs the directors of both, not only of the top chunk's film."""
        indptr, members = self.passage_chunks
        named = [(q, members[indptr[p]:indptr[p + 1]]) for q, passages in enumerate(question_links) for p in passages]
        if not named:
            return chunk_lists
        rows = np.concatenate([chunks for _, chunks in named])
        cols = np.concatenate([np.full(chunks.size, q, dtype=np.int64) for q, chunks in named])
        scores = self.blocks.values_at(pick, cols, rows)  # one gather per batch
        out = [list(chunks) for chunks in chunk_lists]
        start = 0
        for q, chunks in named:
            best = int(chunks[int(np.argmax(scores[start:start + chunks.size]))])
            start += chunks.size
            if best not in out[q]:
                out[q].append(best)
        return out

    def _expanded_hop(self, queries: list[str], seeds: list[np.ndarray], seen: list[dict[Any, Bridge]],
                      active: np.ndarray, query_vectors: Any = None) -> HopState:
        """Hop j+1 for the active queries: expanded query μ ⊕ entities through the token-graph stage,
        rerank by the max cosine over the embeddings of μ ⊕ e_x (eqs. 3.14-3.15). `query_vectors`: the
        batch's hop-1 vectors (B × dim), which "sum" and named_expansions reuse."""
        t = time.perf_counter()
        expanded_seeds, entity_texts, entity_links, entity_ranks, entity_repeats = [], [], [], [], []
        repeats = self.settings.fusion.named_expansions == "repeats"
        typed = self.settings.fusion.expansion_order == "typed"
        for q in active:
            keys = sorted(seen[q])
            order = {key: i for i, key in enumerate(seen[q])}  # the bridging order: earlier hop, better rank first
            ents = [seen[q][key] for key in keys]
            expanded_seeds.append(np.concatenate([seeds[q]] + [b.tokens for b in ents]))
            entity_texts.append([b.text for b in ents])
            entity_links.append([bool(b.passages) for b in ents])
            entity_ranks.append(typed_ranks(queries[q], ents, [order[key] for key in keys]) if typed
                                else [order[key] for key in keys])
            question = set(seeds[q].tolist()) if repeats else set()
            entity_repeats.append([repeats and repeats_question(b.tokens, question) for b in ents])
        self.timer.add("entities", t)
        graph_hop = self.graph_hop(expanded_seeds)
        own = query_vectors[self.be.xp.asarray(active)] if query_vectors is not None else None
        vectors, owner = (expanded_query_vectors(self, [queries[q] for q in active], entity_texts, own, entity_links,
                                                 entity_ranks, entity_repeats)
                          if self.settings.rerank else (None, None))
        t = time.perf_counter()
        sigma = self._rank_pool(graph_hop, lambda: self.blocks.expanded_cosine(graph_hop, vectors, owner, len(active)))
        self.timer.add("rerank", t)
        return HopState(sigma, active, self.blocks.pool_sizes(graph_hop), graph_hop)

    def _rank_pool(self, hop: GraphHop, pool_cosine: Callable[[], Any]) -> Any:
        """Scores that order the pool: the embedding cosine (`pool_cosine()`, -inf outside the pool),
        or ρ itself when rerank is ablated."""
        if self.settings.rerank:
            return pool_cosine()
        return self.blocks.rho_ranking(hop)

    def _collect(self, queries: list[str], final: Any, k: int, dense_fallback: np.ndarray,
                 traces: list[list[HopTrace]]) -> list[QueryResult]:
        ids, vals = self.blocks.final_ranking(final, k)
        keep = np.isfinite(vals)
        return [self.result(query, ids[q][keep[q]], vals[q][keep[q]], dense_fallback[q], traces[q])
                for q, query in enumerate(queries)]


#: `Retriever`: another name of TigragRetriever, the API's first name for the default method's retriever (docs/python.md)
Retriever = TigragRetriever
