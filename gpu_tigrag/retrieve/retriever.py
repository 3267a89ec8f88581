"""The TIGRAG retriever: batched graph retrieval, rerank and entity-driven multi-hop.

Per batch of B queries, every numeric stage is one array operation over the batch:
seed matrix -> PPR (vocab × B) -> top-γ -> PPR-weighted BM25 (chunks × B) -> pooling ->
masked cosine. Between hops only the entity bookkeeping (sets of entity ids per query)
runs in Python; expansion tokens and texts are lookups in tables built at index time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..backend import Backend, get_backend
from ..config import RetrievalConfig
from ..errors import TigragError
from ..graph.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma
from ..index.embed import Encoder, load_encoder
from ..index.index import Index
from ..progress import counter
from ..text.tokens import valid_tokens
from .entity_source import EntityExtractor, IndexEntities, QueryTimeEntities
from .rerank import masked_cosine, masked_max_cosine
from .results import HopTrace, QueryResult
from .scoring import cumulative_mass_pool, ppr_weighted_bm25


@dataclass
class StageTimer:
    """Seconds spent per stage, summed over batches; `encode` is the encoder alone."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, stage: str, start: float) -> float:
        now = time.perf_counter()
        self.seconds[stage] += now - start
        return now


@dataclass
class GraphHop:
    """Output of the graph stage for a batch: pool mask and diagnostics."""

    pool: Any  # bool chunks × B
    rho: Any  # float32 chunks × B, the graph-weighted score ρ
    n_seeds: np.ndarray  # int, per query
    dense: np.ndarray  # bool, per query: no seed or empty pool -> all chunks pooled


@dataclass
class PreparedBatch:
    """The CPU-side work of a batch, done ahead: seed token ids and query embeddings (host)."""

    queries: list[str]
    seeds: list[np.ndarray]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.queries)

    def part(self, start: int, stop: int) -> "PreparedBatch":
        return PreparedBatch(self.queries[start:stop], self.seeds[start:stop], self.vectors[start:stop])


class Retriever:
    """Batched TIGRAG retrieval over a loaded `Index`."""

    def __init__(
        self,
        index: Index,
        config: RetrievalConfig = RetrievalConfig(),
        encoder: Encoder | None = None,
        backend: str | Backend = "auto",
        entity_extractor: EntityExtractor | None = None,
    ):
        """`entity_extractor` is the NER of `entities_at="query"` (default: the index's spaCy model)."""
        self.index = index
        self.config = config
        self.be = backend if isinstance(backend, Backend) else get_backend(backend)
        self.encoder = encoder or load_encoder(index.config.encoder)
        if self.encoder.name != index.encoder_name:
            raise TigragError(
                f"index was embedded with encoder {index.encoder_name!r}, not {self.encoder.name!r}"
            )
        be = self.be
        self.transition = TransitionMatrix.from_adjacency(be, index.graph)
        self.bm25 = be.csr(index.bm25)
        if config.scoring == "graph":  # ablation: token presence, no BM25 weighting (on a copy: the
            self.bm25 = self.bm25.copy()  # host CSR may be the index's own matrix)
            self.bm25.data = be.xp.ones_like(self.bm25.data)
        self.degree = None
        if config.expansion == "degree":  # ablation: weighted degree centrality, the same for every query
            degree = np.asarray(index.graph.sum(axis=0)).ravel().astype(np.float32)
            self.degree = be.asarray(degree / max(float(degree.sum()), 1e-12))
        self.embeddings = be.asarray(index.embeddings)
        self.entities = (IndexEntities(index, config.entity_labels) if config.entities_at == "index"
                         else QueryTimeEntities(index, config.entity_labels, entity_extractor))
        self.timer = StageTimer()

    # -- stages ---------------------------------------------------------------------------
    def query_seeds(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Seed token ids V_seed = V_μ ∩ V of each query."""
        cfg = self.index.config
        return [self.index.vocab.encode(valid_tokens(q, cfg.tokens, cfg.chunk.language)) for q in queries]

    def graph_stage(self, seeds: Sequence[np.ndarray]) -> GraphHop:
        """PPR expansion, weighted BM25 and pooling for a batch of seed sets."""
        be, xp, cfg = self.be, self.be.xp, self.config
        t = time.perf_counter()
        n_seeds = np.array([np.unique(s).size for s in seeds], dtype=np.int64)
        if self.degree is None:
            v = seed_matrix(be, seeds, self.index.n_vocab)
            scores, _ = personalized_pagerank(be, self.transition, v, cfg.ppr)
        else:
            scores = xp.broadcast_to(self.degree[:, None], (self.index.n_vocab, len(seeds)))
        ids, weights = top_gamma(be, scores, cfg.ppr.top_gamma)
        t = self.timer.add("ppr", t)
        rho = ppr_weighted_bm25(be, self.bm25, ids, weights)
        t = self.timer.add("score", t)
        pool = cumulative_mass_pool(be, rho, cfg.pool_threshold)
        dense = be.to_host(~pool.any(axis=0)) | (n_seeds == 0)
        if dense.any():
            pool[:, xp.asarray(np.nonzero(dense)[0])] = True
        self.timer.add("pool", t)
        return GraphHop(pool, rho, n_seeds, dense)

    def encode(self, texts: Sequence[str]) -> Any:
        return self.be.asarray(self.encode_host(texts))

    def encode_host(self, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        vectors = self.encoder.encode(texts)
        self.timer.add("encode", t)
        return vectors

    def prepare(self, queries: Sequence[str]) -> PreparedBatch:
        """Tokenise and embed a batch (CPU work; may run in another thread ahead of `run_prepared`)."""
        queries = list(queries)
        return PreparedBatch(queries, self.query_seeds(queries), self.encode_host(queries))

    def run_prepared(self, prepared: PreparedBatch, k: int | None = None) -> list[QueryResult]:
        """The device part of a batch prepared by `prepare`, split on out-of-memory errors."""
        return self._retrieve_splitting(prepared, k or self.config.beta)

    # -- batch ----------------------------------------------------------------------------
    def retrieve(self, queries: Sequence[str], k: int | None = None, show_progress: bool = False) -> list[QueryResult]:
        """Top-k chunks (default β) for every query, with scores, titles and hop trace."""
        if isinstance(queries, str):
            raise TigragError("retrieve() takes a sequence of queries; wrap a single query in a list")
        k = k or self.config.beta
        size = self.batch_size()
        results: list[QueryResult] = []
        bar = counter(len(queries), "retrieve", show_progress, unit="query")
        try:
            for start in range(0, len(queries), size):
                batch = self.prepare(queries[start : start + size])
                results.extend(self._retrieve_splitting(batch, k))
                bar.update(len(batch))
        finally:
            bar.close()
        return results

    #: bytes per (row, query) of the dense blocks alive at once: chunks × B (scores, sorted copy,
    #: cumulative sums, cosines, merged scores, masks) and vocab × B (PPR iterate, next, seeds).
    CHUNK_BYTES_PER_QUERY = 6 * 4 + 2
    VOCAB_BYTES_PER_QUERY = 4 * 4

    def batch_size(self) -> int:
        """Queries per block: the configured size, lowered so one block fits `memory_budget_mb`
        and, on a GPU, 80% of the device memory free now."""
        per_query = (self.index.n_chunks * self.CHUNK_BYTES_PER_QUERY
                     + self.index.n_vocab * self.VOCAB_BYTES_PER_QUERY)
        budget = self.config.memory_budget_mb << 20
        free = self.be.free_memory_bytes()
        if free is not None:
            budget = min(budget, int(0.8 * free))
        fits = max(1, budget // max(per_query, 1))
        return int(min(self.config.batch_size, fits))

    def _retrieve_splitting(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        """One block; on an out-of-memory error it is halved and retried, so no query is lost."""
        try:
            return self._retrieve_batch(batch, k)
        except self.be.out_of_memory_errors:
            if len(batch) == 1:
                raise TigragError(
                    "out of memory on a single query; lower memory_budget_mb or use a machine with more memory"
                ) from None
            self.be.release_cached_memory()
            half = len(batch) // 2
            return (self._retrieve_splitting(batch.part(0, half), k)
                    + self._retrieve_splitting(batch.part(half, len(batch)), k))

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        be, xp, cfg = self.be, self.be.xp, self.config
        queries, seeds = batch.queries, batch.seeds
        n = len(queries)
        query_vectors = be.asarray(batch.vectors)
        hop = self.graph_stage(seeds)
        t = time.perf_counter()
        sigma = self._rank_pool(hop, lambda: masked_cosine(be, self.embeddings, query_vectors, hop.pool))
        final = sigma.copy()
        self.timer.add("rerank", t)
        traces: list[list[HopTrace]] = [[] for _ in range(n)]
        pool_sizes = be.to_host(hop.pool.sum(axis=0))
        seen: list[set[int]] = [set() for _ in range(n)]
        active = np.arange(n)
        current = {"sigma": sigma, "cols": active, "pool_sizes": pool_sizes, "hop": hop}
        for hop_number in range(1, cfg.hops + 1):
            t = time.perf_counter()
            top = self._top_chunks(current["sigma"], cfg.iota)
            next_active: list[int] = []
            chunk_lists = [[int(c) for c in row if c >= 0] for row in top]
            for col, (q, chunks, found) in enumerate(zip(current["cols"], chunk_lists,
                                                         self.entities.of_chunks(chunk_lists))):
                new = [e for e in dict.fromkeys(found) if e not in seen[q]]
                seen[q].update(new)
                traces[q].append(HopTrace(
                    hop=hop_number,
                    seeds=int(current["hop"].n_seeds[col]),
                    pool_size=int(current["pool_sizes"][col]),
                    top_chunks=chunks,
                    new_entities=[self.entities.text(e) for e in new],
                    dense_fallback=bool(current["hop"].dense[col]),
                ))
                if new:
                    next_active.append(int(q))
            self.timer.add("entities", t)
            if hop_number == cfg.hops or not next_active:
                break
            current = self._expanded_hop(queries, seeds, seen, np.asarray(next_active))
            cols = xp.asarray(current["cols"])
            final[:, cols] = xp.maximum(final[:, cols], current["sigma"])
        return self._collect(queries, final, k, hop.dense, traces)

    def _expanded_hop(self, queries: list[str], seeds: list[np.ndarray], seen: list[set[int]], active: np.ndarray) -> dict[str, Any]:
        """Hop j+1 for the active queries: expanded query μ ⊕ entities through the graph stage,
        rerank by the max cosine over the embeddings of μ ⊕ e_x (eqs. 3.14-3.15)."""
        be, entities = self.be, self.entities
        t = time.perf_counter()
        expanded_seeds, texts, owner = [], [], []
        for col, q in enumerate(active):
            ents = sorted(seen[q])
            expanded_seeds.append(np.concatenate([seeds[q]] + [entities.tokens_of(e) for e in ents]))
            texts.extend(f"{queries[q]} {entities.text(e)}" for e in ents)
            owner.extend([col] * len(ents))
        self.timer.add("entities", t)
        hop = self.graph_stage(expanded_seeds)
        vectors = self.encode(texts) if self.config.rerank else None
        t = time.perf_counter()
        sigma = self._rank_pool(hop, lambda: masked_max_cosine(
            be, self.embeddings, vectors, np.asarray(owner, dtype=np.int64), len(active), hop.pool))
        self.timer.add("rerank", t)
        return {"sigma": sigma, "cols": active, "pool_sizes": be.to_host(hop.pool.sum(axis=0)), "hop": hop}

    def _rank_pool(self, hop: GraphHop, cosine: Any) -> Any:
        """Scores that order the pool: the embedding cosine, or ρ itself when rerank is ablated."""
        if self.config.rerank:
            return cosine()
        xp = self.be.xp
        return xp.where(hop.pool, hop.rho, xp.float32(-np.inf)).astype(xp.float32)

    def _top_chunks(self, sigma: Any, count: int) -> np.ndarray:
        """Ids (B × count) of the best-scoring chunks per column; -1 where fewer are pooled."""
        ids, vals = self._topk(sigma, count)
        return np.where(np.isfinite(vals), ids, -1)

    def _topk(self, scores: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × k, best first; equal scores in chunk-id order on every backend."""
        xp = self.be.xp
        k = min(k, scores.shape[0])
        part = self.be.top_k_rows(scores, k)  # ascending ids, so the stable sort below breaks ties by id
        vals = xp.take_along_axis(scores, part, axis=0)
        order = self.be.argsort_stable(-vals, axis=0)
        ids = xp.take_along_axis(part, order, axis=0)
        vals = xp.take_along_axis(vals, order, axis=0)
        return self.be.to_host(ids).T, self.be.to_host(vals).T

    def _collect(self, queries: list[str], final: Any, k: int, dense: np.ndarray, traces: list[list[HopTrace]]) -> list[QueryResult]:
        ids, vals = self._topk(final, k)
        index = self.index
        out = []
        for q, query in enumerate(queries):
            keep = np.isfinite(vals[q])
            chunk_ids = [int(c) for c in ids[q][keep]]
            passages = [int(index.chunk_passage[c]) for c in chunk_ids]
            out.append(QueryResult(
                query=query,
                chunk_ids=chunk_ids,
                scores=[float(s) for s in vals[q][keep]],
                titles=[index.passage_titles[p] for p in passages],
                passage_ids=passages,
                dense_fallback=bool(dense[q]),
                hops=traces[q],
            ))
        return out
